"""The DiffusionGemma family (target ``diffusiongemma``: transformers' ``DiffusionGemmaForBlockDiffusion.generate``,
spec/diffusiongemma.md DG11): uniform-state canvases, so no mask token, no recording proxy and no commit order.

A candidate speaks the official convention: ``candidate(model, input_ids, attention_mask=None, **settings)`` with
``model`` transformers' ``DiffusionGemmaForBlockDiffusion`` (the shipped checkpoint's, or the user's own) and the
settings by their official names (``entropy_bound`` for ``sampler_config``'s), returning the sequences [B, P +
c L] (or an object with ``.sequences``). Both sides run with torch's global RNG seeded with the case's seed. A
case compares, step by step, the canvas each decoder call is fed (rows still denoising: the random start, every
acceptance and renoising, so the draws and the stop step) and then the sequences; the candidate's decoder calls
are seen by a forward pre-hook on the model's decoder.
"""

from __future__ import annotations

import time
from collections import Counter

import torch
from hypothesis import strategies as st

from veridec.optimized import diffusiongemma as cached

from ..candidates import CandidateError, checked_tokens
from ..guard import CandidateExited, CandidateTimedOut, candidate_limit, guarded
from .common import Family, choices, kept

DG_SETTINGS = ("max_new_tokens", "max_denoising_steps", "entropy_bound", "t_min", "t_max", "stability_threshold",
               "confidence_threshold", "eos_token_id", "pad_token_id", "cache_implementation")
SCHEDULES = ((0.4, 0.8), (0.001, 0.002), (0.9, 1.5))  # the official default first; the second practically greedy
STABILITY = (1, 0, 2, 3)
CONFIDENCE = (0.005, 0.4, 1.0, 0.05)
BOUNDS = (0.1, 0.5, 2.0)
CALL_SLACK = 64
MAX_PROMPT = 6


@st.composite
def dg_settings(draw, names, model, sampled: bool = False):
    """The settings among ``names``: 1-3 canvases' worth of tokens (not always whole ones), 1-6 steps, a
    schedule, the stop thresholds, EOS and PAD as the model's generation config has them or off, a cache kind."""
    length = model.canvas_length
    t_min, t_max = draw(st.sampled_from(SCHEDULES[:1] + SCHEDULES[2:] if sampled else SCHEDULES))
    settings = {"max_new_tokens": draw(st.sampled_from((length, length // 2 or 1, 2 * length, 3 * length - 1))),
                "max_denoising_steps": draw(st.integers(1, 6)),
                "entropy_bound": draw(st.sampled_from(BOUNDS) | st.builds(lambda r: {"at_entropy": r},
                                                                           st.integers(1, 3))),
                "t_min": t_min, "t_max": t_max, "stability_threshold": draw(st.sampled_from(STABILITY)),
                "confidence_threshold": draw(st.sampled_from(CONFIDENCE)),
                "eos_token_id": draw(st.sampled_from((model.generation.get("eos_token_id"), None))),
                "pad_token_id": draw(st.sampled_from((model.generation.get("pad_token_id"), None))),
                "cache_implementation": draw(st.sampled_from(cached.CACHE_IMPLEMENTATIONS))}
    return kept(settings, names, ("max_new_tokens",))


@st.composite
def dg_prompts(draw, model, max_batch: int = 3, padding: bool = True, infill: bool = False):
    """(prompt [B][P], attention_mask [B][P] or None): BOS then 0-5 ordinary tokens (ids 4 .. V - 1, the
    shipped model's task alphabet), left-padded with PAD (0) when ``padding`` and B > 1."""
    batch, length = draw(st.integers(1, max_batch)), draw(st.integers(1, MAX_PROMPT))
    bos = model.config.text_config.bos_token_id
    rows = [[bos] + draw(st.lists(st.integers(4, model.vocab_size - 1), min_size=length - 1, max_size=length - 1))
            for _ in range(batch)]
    mask = None
    if padding and batch > 1 and draw(st.booleans()):
        real = [draw(st.integers(1, length)) for _ in range(batch)]
        mask = [[0] * (length - n) + [1] * n for n in real]
        rows = [[0] * (length - n) + row[length - n:] for row, n in zip(rows, real)]
    return rows, mask


def _drawn(names, model, defaults: dict, sampled: bool):
    return dg_settings(names, model, sampled)


def resolve_dg_case(case: dict, model, prompt: torch.Tensor, mask) -> dict:
    """The case with an ``entropy_bound`` drawn as ``{"at_entropy": r}`` replaced by the sum of the r lowest
    entropies of row 0's first step (float32, as DG3.4 computes it: cumulative sum minus the entry), so that
    rank r meets the bound with equality, where a strict and a non-strict comparison differ. The first step's
    entropies depend on neither the bound nor the step count (its temperature is t_max); where that sum is 0
    (entropies that vanish), the default 0.1."""
    settings = case["settings"]
    if not isinstance(settings.get("entropy_bound"), dict):
        return case
    rank = settings["entropy_bound"]["at_entropy"]
    first = {**settings, "entropy_bound": 0.1, "max_denoising_steps": 1, "max_new_tokens": model.canvas_length}
    torch.manual_seed(case["seed"])
    trace = cached.generate(model, prompt, mask, **first).trace
    entropy = torch.tensor([e.confidence for e in trace.events if e.step == 0 and e.row == 0], dtype=torch.float32,
                           device="cpu").sort().values  # [L]
    sums = torch.cumsum(entropy, dim=0) - entropy
    bound = float(sums[min(rank, entropy.numel() - 1)])
    return {**case, "settings": {**settings, "entropy_bound": bound if bound > 0 else 0.1}}


def decode_target(model, prompt, attention_mask, ties, **settings):
    """The target: veridec's cached decoder, exact to the official loop (DG8.1)."""
    return cached.generate(model, prompt, attention_mask, ties=ties, **settings)


# ------------------------------------------------------------------------------------------------ one case
def step_inputs(trace) -> list[dict]:
    """Per step of a veridec decode: {row: the canvas fed to the decoder} for the rows still denoising (from the
    trace's events: every position's ``old`` token is its input)."""
    fed, seen, out = {}, {}, []
    for event in trace.events:
        fed.setdefault((event.row, event.step), {})[event.position] = event.old
    for record in trace.steps:
        step = {}
        for row, gap in enumerate(record.selection_gaps):
            if gap != float("inf"):
                local = seen.get(row, 0)
                seen[row] = local + 1
                tokens = fed[(row, local)]
                step[row] = [tokens[p] for p in sorted(tokens)]
        out.append(step)
    return out


class DecoderCalls:
    """The canvases fed to a DiffusionGemma model's decoder, seen by a forward pre-hook (whatever calls it: the
    model's forward or the decoder itself), stopped past ``limit`` calls."""

    def __init__(self, hf_model, limit: int):
        self.canvases, self.limit = [], limit
        self.encoder_calls = 0
        self._handles = [hf_model.model.decoder.register_forward_pre_hook(self._decoder, with_kwargs=True),
                         hf_model.model.encoder.register_forward_pre_hook(self._encoder, with_kwargs=True)]

    def _decoder(self, module, args, kwargs):
        canvas = kwargs.get("decoder_input_ids", args[0] if args else None)
        self.canvases.append(canvas.detach().to("cpu", copy=True))
        if len(self.canvases) > self.limit:
            raise CandidateError(f"it made more than {self.limit} decoder calls (stopped there)")

    def _encoder(self, module, args, kwargs):
        self.encoder_calls += 1

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def run_dg_case(setup, case: dict):
    """Tier E on one case: the target, then the candidate on transformers' model with its decoder calls seen;
    the first difference (a fed canvas, the number of decoder calls, the sequences) fails it."""
    from ..exact import CaseOutcome
    from ..running import Side, case_tensors

    prompt, mask = case_tensors(case, setup.model)
    case = resolve_dg_case(case, setup.model, prompt, mask)
    torch.manual_seed(case["seed"])
    started = time.perf_counter()
    try:
        decoded = setup.goal.decode(setup.model, prompt, mask, setup.ties, **setup.goal.settings_of(case))
    except ValueError as err:
        return CaseOutcome(case, "skipped", [f"the target refused the case: ValueError: {err}"])
    ours = Side(decoded.canvas, decoded.trace, decoded.trace.counters, seconds=time.perf_counter() - started)
    theirs, fed = _run_candidate(setup, prompt, mask, case, 2 * len(ours.trace.steps) + CALL_SLACK, ours.seconds)
    problems = [theirs.error] if theirs.error is not None else _differences(ours, fed, theirs.canvas, prompt.shape[1])
    return CaseOutcome(case, "diverged" if problems else "exact", problems, target=ours, candidate=theirs)


def _run_candidate(setup, prompt, mask, case: dict, limit: int, target_seconds: float | None):
    """The candidate on transformers' model (its own when given, spec EC9), seeded, guarded, its decoder calls
    seen (at most ``limit``). -> (Side, the canvases fed to the decoder)."""
    from ..running import Side
    from ..candidates import split_output
    from veridec.trace import Counters

    hf = setup.candidate_model if setup.candidate_model is not None else setup.model.hf
    calls = DecoderCalls(hf, limit)
    settings = {name: value for name, value in setup.goal.settings_of(case).items() if setup.fit.takes(name)}
    if mask is not None:
        settings["attention_mask"] = mask.clone()
    side = Side()
    torch.manual_seed(case["seed"])
    try:
        with guarded(candidate_limit(setup.case_timeout, target_seconds), f"the case {case}"):
            tokens, side.nfe = split_output(setup.candidate(hf, prompt.clone(), **settings))
        side.canvas = checked_tokens(tokens, setup.model.vocab_size, prompt.device)
    except CandidateTimedOut:
        side.error, side.timed_out = "it ran past its time limit on this case", True
    except CandidateExited as err:
        side.error = f"it called {err}: a candidate may not end the check"
    except Exception as err:  # noqa: BLE001 - any failure of foreign code is a finding, reported as such
        side.error = f"it raised {type(err).__name__}: {err}"
    finally:
        calls.close()
    side.counters = Counters(model_calls=len(calls.canvases) + calls.encoder_calls)
    return side, calls.canvases


def _differences(ours, fed: list, tokens, prompt_length: int) -> list[str]:
    """The first difference between the target's decode and the candidate's calls and output, in words."""
    expected, records = step_inputs(ours.trace), ours.trace.steps
    for index, step in enumerate(expected):
        where = f"decoder call {index} (canvas {records[index].block})"
        if index >= len(fed):
            return [f"the candidate made {len(fed)} decoder calls where the target takes {len(expected)}: it stopped "
                    f"before the target's {where} (a stop test, DG4, or the canvas count, DG6)"]
        for row, canvas in step.items():
            got = fed[index][row].tolist() if row < fed[index].shape[0] else None
            if got != canvas:
                return [f"{where}: row {row} was fed {got}, the target's canvas is {canvas} (the previous step's "
                        "acceptance or renoising differs, DG3.4-DG3.5; at a canvas's first call its random start)"]
    if len(fed) > len(expected):
        return [f"the candidate made {len(fed)} decoder calls where the target takes {len(expected)}: it ran past "
                "the target's stop (DG4)"]
    if tokens.shape != ours.canvas.shape or not torch.equal(tokens.to(ours.canvas.device), ours.canvas):
        return [f"the sequences differ: the candidate returned {tokens.tolist()}, the target {ours.canvas.tolist()} "
                "(an argmax canvas, DG4.4, or EOS / padding, DG5)"]
    return []


def run_dg_law_case(setup, case: dict):
    """Tier S on one case (spec/stochastic.md ST2-ST3, DG11.4): ``n`` decodes per side under independent seeds
    (2i on the target's, 2i + 1 on the candidate's, offset by the case's), the generated tokens of every row
    (PAD-filled, -1, to the widest output the case allows) compared by stochastic.compare_laws."""
    from ..running import Side, case_tensors
    from ..stochastic import compare_laws, detectable_delta, failed_draw, judged, samples_for_power

    prompt, mask = case_tensors(case, setup.model)
    case = resolve_dg_case(case, setup.model, prompt, mask)
    settings, length = setup.goal.settings_of(case), setup.model.canvas_length
    width = -(-settings["max_new_tokens"] // length) * length * prompt.shape[0]
    n = setup.samples or samples_for_power(setup.delta, setup.level / (2 * width))
    ours, theirs = [], []
    for draw in range(n):
        seed = case["seed"] + 2 * draw
        torch.manual_seed(seed)
        started = time.perf_counter()
        decoded = setup.goal.decode(setup.model, prompt, mask, setup.ties, **settings)
        target = Side(decoded.canvas, decoded.trace, seconds=time.perf_counter() - started)
        side, _ = _run_candidate(setup, prompt, mask, {**case, "seed": seed + 1},
                                 2 * len(decoded.trace.steps) + CALL_SLACK, target.seconds)
        if side.error is not None:
            return failed_draw(case, draw, side.error, n)
        ours.append(_generated(decoded.canvas, prompt.shape[1], width))
        theirs.append(_generated(side.canvas, prompt.shape[1], width))
    top = {"target": Counter(ours).most_common(5), "candidate": Counter(theirs).most_common(5)}
    return judged(case, compare_laws(ours, theirs, setup.level), detectable_delta(n, setup.level / (2 * width)), top,
                  "the output laws differ", "samples per side")


def _generated(canvas: torch.Tensor, prompt_length: int, width: int) -> tuple:
    """Every row's generated tokens as one tuple of ``width``, -1 after a shorter output (fewer canvases)."""
    rows = canvas[:, prompt_length:].cpu()
    out = torch.full((rows.shape[0], width // rows.shape[0]), -1, dtype=torch.long, device="cpu")
    out[:, :rows.shape[1]] = rows[:, :out.shape[1]]
    return tuple(out.reshape(-1).tolist())


def candidate_side(setup, prompt, mask, case: dict, limit: int, target_seconds: float | None = None):
    """The candidate's Side on ``case`` (the knob search's view: its sequences and model calls)."""
    return _run_candidate(setup, prompt, mask, case, limit, target_seconds)[0]


KNOBS = {"stability_threshold": choices("stability_threshold", STABILITY),
         "confidence_threshold": choices("confidence_threshold", CONFIDENCE),
         "entropy_bound": choices("entropy_bound", BOUNDS),
         "max_denoising_steps": choices("max_denoising_steps", (1, 2, 4, 6)),
         "eos_token_id": choices("eos_token_id", (1, None))}
FAMILY = Family("diffusiongemma", _drawn, knobs=KNOBS, resolve=resolve_dg_case, prompts=dg_prompts,
                runners={"E": run_dg_case, "S": run_dg_law_case}, candidate_side=candidate_side,
                tiers=("E", "S"))
