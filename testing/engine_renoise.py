"""Logit replay of a uniform-state engine algorithm (spec/engines.md EN8): SGLang's ``Gemma4Renoise`` run by its own
``run`` (``DllmAlgorithm._run_sync``: ``init_step_state``, ``prepare_inputs``, a forward, then ``step`` and
``prepare_inputs`` and a forward until every row is done or ``max_steps``) against DiffusionGemma's rule
(``testing.families.sglang_renoise``) fed the same logits, row by row and step by step.

The ``ModelRunner`` stand-in (``ReplayRunner``) holds veridec's DiffusionGemma model: its ``model_config`` and the
model's real embedding (``get_input_embeddings``: weight and scale, what the algorithm's soft embeddings read);
``prepare_dllm_input_embeds(input_ids, signal)`` keeps the self-conditioning signal the algorithm hands the model,
and ``forward`` checks it against the rule's (DG3.7: the previous step's processed logits as soft embeddings) and
then runs the decoder on each row's canvas (the engine's ``input_ids``) after its prefix (the prompt, then the
earlier canvases the engine emitted), with the rule's self-conditioning input. Each ``step`` is seen through the
algorithm's own ``step`` (wrapped on the instance): the canvases it was given, the logits, its canvases after and
its done flags, compared with the rule's. A round is one canvas; a case runs ``canvases`` rounds (EOS and padding
are the scheduler's, outside the replay).
"""

from __future__ import annotations

import torch

from .engines import Divergence, Replay, _Diverged, replayed
from .families.sglang_renoise import RenoiseRule
from .guard import CandidateExited, CandidateTimedOut, guarded
from .sglang import ContractError

RENOISE_FIELDS = ("batch_size", "input_ids", "rids", "forward_mode", "dllm_input_preparation_state",
                  "input_embeds", "mark_forward_metadata_ready")


class RenoiseBatch:
    """The ``ForwardBatch`` fields Gemma4Renoise's loop reads: ``batch_size``, ``input_ids`` [B*L] (each row's canvas,
    written in place), ``rids`` (request ids: its seeds), ``forward_mode`` (a DLLM extend), and the input-preparation
    slots it writes (``dllm_input_preparation_state``, ``input_embeds``); any other field is refused by name."""

    def __init__(self, input_ids: torch.Tensor, rids: list[str]):
        self.batch_size, self.input_ids, self.rids = len(rids), input_ids, list(rids)
        self.forward_mode = _ExtendMode()
        self.dllm_input_preparation_state = None
        self.input_embeds = None

    def mark_forward_metadata_ready(self, replan_equivalent: bool = True) -> None:
        """The base loop's note that attention metadata can be reused (nothing to plan here)."""

    def __getattr__(self, name):
        raise ContractError(f"the algorithm read forward_batch.{name}: the replay's ForwardBatch carries only "
                            f"{', '.join(RENOISE_FIELDS)}")


class _ExtendMode:
    @staticmethod
    def is_dllm_extend() -> bool:
        return True


class _Out:
    def __init__(self, logits: torch.Tensor):
        self.logits_output = type("LogitsProcessorOutput", (), {"full_logits": logits})()
        self.can_run_graph = False


class _Model:
    """``model_runner.model``: the real embedding, and the self-conditioning signal the algorithm hands over."""

    def __init__(self, runner):
        self.runner = runner

    def get_input_embeddings(self):
        return self.runner.embedding

    def prepare_dllm_input_embeds(self, input_ids: torch.Tensor, signal):
        self.runner.signal = None if signal is None else signal.detach().clone()  # [B*L, H] or None
        return None


class ReplayRunner:
    """The ``ModelRunner`` stand-in (module docstring): ``model_config.hf_config`` is the model's own config."""

    def __init__(self, case_run, rules: list[RenoiseRule]):
        self.case_run, self.rules, self.predictor, self.model = case_run, rules, case_run.model, _Model(self)
        self.model_config = type("ModelConfig", (), {"hf_config": self.predictor.config})()
        self.signal, self.forwards = None, 0

    @property
    def embedding(self):
        return self.predictor.hf.model.decoder.embed_tokens

    def forward(self, forward_batch, pp_proxy_tensors=None) -> _Out:
        run, length = self.case_run, self.predictor.canvas_length
        canvases = forward_batch.input_ids.view(len(self.rules), length)  # [B, L]
        if self.forwards == 0:
            run.check_start(canvases, self.rules)
        run.check_signal(self.signal, self.rules, self.embedding)
        rows = [run.row_logits(i, canvases[i], rule.processed) for i, rule in enumerate(self.rules)]
        self.forwards += 1
        return _Out(torch.cat(rows))  # [B*L, V] float32


class RenoiseRun:
    """One case's rounds (module docstring)."""

    def __init__(self, algorithm, model, case: dict, record: bool, step_seconds: float):
        self.algorithm, self.model, self.case, self.record = algorithm, model, case, record
        self.step_seconds, self.round, self.steps, self.transcript = step_seconds, 0, 0, []
        self.sequences = [list(prompt) for prompt in case["prompts"]]
        self.rids = [f"{case.get('rid', 'case')}-{i}" for i in range(len(case["prompts"]))]
        self.device = model.device

    def all_rounds(self) -> None:
        from .engine_renoise_compare import wrap_step

        original = self.algorithm.step
        for self.round in range(self.case["canvases"]):
            length, vocab = self.model.canvas_length, self.model.vocab_size
            rules = [RenoiseRule(self.case["config"], rid, vocab, length, self.device) for rid in self.rids]
            batch = RenoiseBatch(torch.zeros(len(rules) * length, dtype=torch.long, device=self.device), self.rids)
            runner = ReplayRunner(self, rules)
            self.algorithm.step = wrap_step(self, original, rules)
            try:
                self._run(runner, batch)
            finally:
                del self.algorithm.step
            for i, canvas in enumerate(batch.input_ids.view(len(rules), length).tolist()):
                self.sequences[i] += canvas

    def _run(self, runner, batch) -> None:
        try:
            with guarded(self.step_seconds * (self.case["config"]["max_denoising_steps"] + 1), "the engine's run"):
                self.algorithm.run(runner, batch, None)
        except _Diverged:
            raise
        except (CandidateTimedOut, CandidateExited, ContractError, Exception) as err:  # the engine's own failure
            raise _Diverged(self.divergence("contract", self.steps, 0, f"run raised {type(err).__name__}: {err}"))

    def row_logits(self, row: int, canvas: torch.Tensor, processed) -> torch.Tensor:
        """Row ``row``'s decoder logits [L, V] (float32) on ``canvas`` [L] after its prefix, with the rule's
        self-conditioning input ``processed`` [L, V] (None at a canvas's first step)."""
        prefix = torch.tensor([self.sequences[row]], dtype=torch.long, device=self.device)  # [1, T]
        mask = torch.ones_like(prefix, dtype=torch.bool)  # [1, T]
        chunks = [len(self.case["prompts"][row]) + j * self.model.canvas_length for j in range(self.round + 1)]
        condition = None if processed is None else processed[None].to(self.model.embedding_dtype)  # [1, L, V]
        with torch.no_grad():
            return self.model.full_forward(prefix, mask, canvas[None], condition, chunks)[0]

    def check_start(self, canvases: torch.Tensor, rules) -> None:
        """The canvas's start: each row's first input is its generator's first draw (EN8's stream)."""
        for i, rule in enumerate(rules):
            if not torch.equal(canvases[i], rule.start):
                raise _Diverged(self.divergence("start", 0, i, f"the engine's starting canvas {canvases[i].tolist()} "
                                                f"is not the stream's first draw {rule.start.tolist()}"))

    def check_signal(self, signal, rules, embedding) -> None:
        """Before a forward: each denoising row's self-conditioning signal is the soft embedding of the rule's
        last processed logits (zeros or None at a canvas's first step), within measured rounding."""
        from .engine_renoise_compare import signal_divergence

        found = signal_divergence(self, signal, rules, embedding)
        if found is not None:
            raise _Diverged(found)

    def divergence(self, kind: str, step: int, row: int, message: str, **fields) -> Divergence:
        fields["config"] = {**self.case["config"], **fields.get("config", {})}
        return Divergence(kind, self.round, step, row, self.round, f"canvas {self.round}, step {step}, row {row}: "
                          f"{message}", block_size=self.model.canvas_length, **fields)


def replay_renoise_case(algorithm, model, case: dict, record: bool = False, step_seconds: float = 10.0) -> Replay:
    """Replay ``case`` ({"prompts", "canvases", "config"}: flat knobs, optional "rid") through ``algorithm`` (a
    built Gemma4Renoise) against DiffusionGemma's rule on ``model`` (a DiffusionGemmaPredictor)."""
    return replayed(RenoiseRun(algorithm, model, case, record, step_seconds), case)



def rule_trajectory(model, case: dict) -> list[dict]:
    """DiffusionGemma's rule alone on ``case``, with SGLang's stated stream and the same forwards as the replay (no
    engine): per step {"canvas", "step", "input_ids" [B*L] given, "decided" [B*L] after, "done" [B]}; a row the rule
    has finished keeps its canvas. What a recorded engine run is held to without the engine (tests/golden)."""
    run, length, out = RenoiseRun(None, model, case, False, 10.0), model.canvas_length, []
    for run.round in range(case["canvases"]):
        rules = [RenoiseRule(case["config"], rid, model.vocab_size, length, run.device) for rid in run.rids]
        canvases = [rule.start for rule in rules]
        for step in range(case["config"]["max_denoising_steps"]):
            with torch.no_grad():
                logits = [run.row_logits(i, canvases[i], rule.processed) for i, rule in enumerate(rules)]
            decided = [c if rule.finished else rule.step(logits[i]).tokens for i, (c, rule) in
                       enumerate(zip(canvases, rules))]
            out.append({"canvas": run.round, "step": step, "input_ids": torch.cat(canvases).tolist(),
                        "decided": torch.cat(decided).tolist(), "done": [rule.finished for rule in rules]})
            canvases = decided
            if all(rule.finished for rule in rules):
                break
        for i, canvas in enumerate(canvases):
            run.sequences[i] += canvas.tolist()
    return out
