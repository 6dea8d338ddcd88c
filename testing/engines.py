"""Logit replay (spec/engines.md): an engine's dLLM algorithm, driven through its own contract, against a veridec
rule fed the same logits, step by step. No model runs on the engine's side, so the check is exact: both sides
compute on one float64 tensor of logits per step.

One case: rows (prompts) decoded block by block in SGLang's layout (blocks of ``block_size`` from canvas position
0, the first decoded block holding the prompt's tail, marked in ``dllm_prompt_mask``). A round gives every row
its next block and runs ``DllmAlgorithm._run_sync``'s loop: ``init_step_state``, a forward, then up to
``max_steps(block_size)`` times ``step`` (stop when every row is done) and a forward. Each forward is veridec's
editing decoder's call (``veridec.reference.editing``: the canvas up to the block's end, block-causal attention,
the block's logits), on a float64 copy of the model. Before each step the logits and the blocks are recorded;
after it the engine's blocks and done flags are compared with the rule's (``testing.families.sglang``): the
first difference ends the case and is named with its round, step, row, positions and margin.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from veridec.canvas import whole_blocks
from veridec.models.transformer import block_causal_bias

from .guard import CandidateExited, CandidateTimedOut, guarded
from .sglang import ContractError, ReplayBatch

STEP_SECONDS = 10.0  # one step's wall-clock limit (a step that never returns fails its case, never hangs)
HARNESS_STEPS = 64  # the most steps of one round the replay runs beyond 4 b, whatever max_steps says


@dataclass
class Position:
    """One position where the engine and the rule decided differently at a step."""

    position: int  # canvas position
    before: int
    engine_token: int
    reference_token: int
    engine_kind: str  # commit | edit | revoke | kept
    reference_kind: str
    confidence: float  # the rule's proposal's probability there (float64)
    threshold: float | None


@dataclass
class Divergence:
    """The first step where the engine and the rule differ (``kind``: decision, done, step cap, contract), or
    where the replay ends a case the rule never finishes (``stalled``)."""

    kind: str
    round: int
    step: int
    row: int
    block: int
    message: str
    positions: list = field(default_factory=list)
    engine_done: bool | None = None
    reference_done: bool | None = None
    margin: float = math.inf
    mask_id: int = -1
    indel_ids: tuple = ()
    block_size: int = 0
    config: dict = field(default_factory=dict)
    block_seen_before: bool = False
    record: dict = field(default_factory=dict)  # the step's inputs and both sides' decisions (the reproducer)


@dataclass
class Replay:
    """A case's replay: the steps run, the transcript (``record=True``), the first divergence if any."""

    case: dict
    steps: int = 0
    transcript: list = field(default_factory=list)
    divergence: Divergence | None = None


def replay_case(algorithm, rule, model, case: dict, record: bool = False,
                step_seconds: float = STEP_SECONDS) -> Replay:
    """Replay ``case`` ({"prompts", "gen_length", "block_size", "config"}, optionally "rounding") through
    ``algorithm`` (a built engine algorithm) against ``rule`` (an ``EngineRule``) on ``model`` (a float64 copy:
    ``float64_model``)."""
    return replayed(_Run(algorithm, rule, model, case, record, step_seconds), case)


def replayed(run, case: dict) -> Replay:
    """``run`` (a replay's run: ``all_rounds`` raising ``_Diverged`` at the first divergence) played out on
    ``case``: its steps, transcript and divergence (None: none)."""
    replay = Replay(case)
    try:
        run.all_rounds()
    except _Diverged as stop:
        replay.divergence = stop.divergence
    replay.steps, replay.transcript = run.steps, run.transcript
    return replay


def float64_model(model):
    """A float64 copy of ``model`` (the replay's logits), leaving the model itself as it was."""
    return copy.deepcopy(model).double()


def block_logits(model, canvas: torch.Tensor, block: int, size: int, rounding: str | None = None) -> torch.Tensor:
    """The editing decoder's forward (spec/editing.md ED2): canvas [L] up to block ``block``'s end, block-causal,
    RoPE positions from 0 -> that block's logits [b, V] (float64; ``rounding``: "float32" or "bfloat16" rounds
    them to that dtype first, still one float64 tensor that both sides read)."""
    end = (block + 1) * size
    positions = torch.arange(end, device=canvas.device)[None]  # [1, end]
    bias = block_causal_bias(end, size, device=canvas.device)[None, None]  # [1, 1, end, end]
    with torch.no_grad():
        logits = model.raw_forward(canvas[:end][None], positions, attn_bias=bias).logits[0, block * size:]
    return logits if rounding is None else logits.to(getattr(torch, rounding)).double()


class _Diverged(Exception):
    def __init__(self, divergence: Divergence):
        self.divergence = divergence


class _Run:
    """One case's rounds (module docstring)."""

    def __init__(self, algorithm, rule, model, case, record, step_seconds):
        self.algorithm, self.rule, self.model, self.case = algorithm, rule, model, case
        self.record, self.step_seconds = record, step_seconds
        self.size, self.mask_id = case["block_size"], model.special.mask_id
        self.config, self.rounding = case["config"], case.get("rounding")
        self.canvases = [_canvas(prompt, case["gen_length"], self.size, self.mask_id, model) for prompt in
                         case["prompts"]]
        self.next_block = [len(prompt) // self.size for prompt in case["prompts"]]
        self.steps, self.transcript, self.round = 0, [], 0

    def all_rounds(self) -> None:
        if self.case.get("fdfo"):
            from .engine_fdfo import fdfo_rounds

            return fdfo_rounds(self)
        while True:
            rows = [r for r, canvas in enumerate(self.canvases) if self.next_block[r] < canvas.numel() // self.size]
            if not rows:
                return
            _Round(self, rows).decode()
            for r in rows:
                self.next_block[r] += 1
            self.round += 1

    def where(self, step: int, row: int) -> str:
        return f"round {self.round}, step {step}, row {row} (block {self.next_block[row]})"

    def divergence(self, kind: str, step: int, row: int, message: str, **fields) -> Divergence:
        return Divergence(kind, self.round, step, row, self.next_block[row], f"{self.where(step, row)}: {message}",
                          mask_id=self.mask_id, indel_ids=self.indel_ids, block_size=self.size,
                          config=dict(self.config), **fields)

    @property
    def indel_ids(self) -> tuple:
        return tuple(self.case.get("indel_ids", ()))


def _canvas(prompt: list, gen_length: int, size: int, mask_id: int, model) -> torch.Tensor:
    """[L] the prompt then masks, L = P + gen_length rounded up to whole blocks (SGLang's fill, ED1)."""
    length = whole_blocks(len(prompt) + gen_length, size)
    canvas = torch.full((length,), mask_id, dtype=torch.long, device=next(model.parameters()).device)  # [L]
    canvas[: len(prompt)] = torch.tensor(prompt, dtype=torch.long, device=canvas.device)
    return canvas


class _Round:
    """Every row's next block through ``DllmAlgorithm._run_sync``'s loop (module docstring)."""

    def __init__(self, run: _Run, rows: list[int]):
        self.run, self.rows = run, rows
        size = run.size
        blocks = [run.canvases[r][run.next_block[r] * size:(run.next_block[r] + 1) * size] for r in rows]
        self.input_ids = torch.cat(blocks).clone()  # [B*b] the engine's canvas, written in place
        starts = [run.next_block[r] * size for r in rows]
        offsets = torch.arange(size, device=self.input_ids.device)  # [b]
        self.prompt_mask = torch.stack([start + offsets < len(run.case["prompts"][r])
                                        for start, r in zip(starts, rows)])  # [B, b]
        self.batch = ReplayBatch(self.input_ids, self.prompt_mask)
        self.rules = [run.rule.rule(run.config, run.mask_id) for _ in rows]
        self.seen = [set() for _ in rows]

    def run_loop(self, states) -> None:
        limit = self._limit()
        logits = self._forward()
        for step in range(limit):
            done = self._step(step, logits, states)
            if all(done):
                return
            logits = self._forward()
        self._after_cap(limit, done)

    def decode(self) -> None:
        self.run_loop(self.initial_states())

    def initial_states(self) -> list:
        """``init_step_state`` on this round's batch, checked: one state per row."""
        algorithm = self.run.algorithm
        init = getattr(algorithm, "init_step_state", None) or (lambda batch: [None] * batch.batch_size)  # base's
        states = self._call("init_step_state", -1, lambda: init(self.batch))
        if not isinstance(states, (list, tuple)) or len(states) != len(self.rows):
            raise _Diverged(self.run.divergence("contract", -1, self.rows[0], f"init_step_state returned "
                                                f"{_describe(states)}; the contract is a list of {len(self.rows)} "
                                                "states (one per row)"))
        return list(states)

    def _limit(self) -> int:
        size = self.run.size
        limit = getattr(self.run.algorithm, "max_steps", None) or (lambda block_size: block_size + 1)  # base's
        steps = self._call("max_steps", -1, lambda: limit(size))
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise _Diverged(self.run.divergence("contract", -1, self.rows[0], f"max_steps({size}) returned "
                                                f"{steps!r}; the contract is an integer >= 1"))
        return min(steps, 4 * size + HARNESS_STEPS)

    def write_back(self) -> None:
        """The engine's blocks into the rows' canvases (what later forwards and blocks see)."""
        run = self.run
        views = self.input_ids.view(len(self.rows), run.size)  # [B, b]
        for i, r in enumerate(self.rows):
            start = run.next_block[r] * run.size
            run.canvases[r][start:start + run.size] = views[i]

    def _forward(self) -> torch.Tensor:
        run = self.run
        return torch.cat([block_logits(run.model, run.canvases[r], run.next_block[r], run.size, run.rounding)
                          for r in self.rows])  # [B*b, V]

    def _step(self, step: int, logits: torch.Tensor, states) -> list:
        from .engine_compare import compare_step

        before, given = self.input_ids.clone(), logits.clone()
        done = self._call("step", step, lambda: self.run.algorithm.step(self.batch, logits, states))
        self._check_contract(step, done, logits, given)
        self.run.steps += 1
        compare_step(self, step, before, given, [bool(d) for d in done])
        self.write_back()
        return done

    def _call(self, what: str, step: int, call):
        label = f"{what}" if step < 0 else f"step {step}"
        try:
            with guarded(self.run.step_seconds, f"the engine's {label}"):
                return call()
        except (CandidateTimedOut, CandidateExited) as err:
            message = f"{what} ran past {self.run.step_seconds:g} s" if isinstance(err, CandidateTimedOut) \
                else f"{what} called os._exit"
        except ContractError as err:
            message = str(err)
        except Exception as err:  # the engine's own exception: its failure on the case, said with its step
            message = f"{what} raised {type(err).__name__}: {err}"
        raise _Diverged(self.run.divergence("contract", max(step, 0), self.rows[0], message))

    def _check_contract(self, step: int, done, logits: torch.Tensor, given: torch.Tensor) -> None:
        problem = None
        if not isinstance(done, (list, tuple)) or len(done) != len(self.rows):
            problem = f"step returned {_describe(done)}; the contract is List[bool] of {len(self.rows)} (one per row)"
        elif not all(isinstance(d, bool) or getattr(d, "dtype", None) == torch.bool for d in done):
            problem = f"step returned {_describe(done)}; the contract is List[bool] (True: the row may emit)"
        elif logits.shape != given.shape or not torch.equal(logits, given):
            problem = "step changed the logits it was given (full_logits is the model's output: read it, copy it)"
        elif self.batch.input_ids is not self.input_ids:
            problem = ("step replaced forward_batch.input_ids; the contract writes it in place (CUDA-graph safe: the "
                       "base loop and the next forward read the same tensor)")
        elif self.input_ids.shape != (len(self.rows) * self.run.size,) or self.input_ids.dtype != torch.long:
            problem = f"step changed input_ids' shape or dtype to {tuple(self.input_ids.shape)} {self.input_ids.dtype}"
        if problem:
            raise _Diverged(self.run.divergence("contract", step, self.rows[0], problem))

    def _after_cap(self, limit: int, done: list) -> None:
        """The loop ran out of steps with a row not done (the rule agreed it was not): ``stalled`` where the rule
        came back to a block and state it had seen (it repeats its steps forever: the case has no end to hold the
        engine to), else the divergence ``step cap``."""
        i = [bool(d) for d in done].index(False)
        if getattr(self.rules[i], "stalled", False):
            raise _Diverged(self.run.divergence("stalled", limit, self.rows[i], f"the rule stalls (back to a block "
                                                f"and state it had seen); the engine's loop emits the block after "
                                                f"max_steps = {limit} steps as it is"))
        raise _Diverged(self.run.divergence("step cap", limit, self.rows[i], f"the engine's loop ends the block "
                                            f"after max_steps = {limit} steps and emits it with the row not done; "
                                            "the rule goes on"))


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}"
