"""The exactness table's rows on a DiffusionGemma model (spec/exactness.md E6, spec/diffusiongemma.md DG2, DG6.4,
DG6.5): the shipped checkpoint (``diffusiongemma``) and a random config (``diffusiongemma-random``), each with
three kinds of row, all tier E:

- ``cached``: the cached decoder against the reference on the table's left-padded batch, one seeded stream for
  both (the official draws): the same events (acceptances, renoisings, hence steps and stop step), the same
  tokens, bit-equal logits at every step (the reference encodes the prefix in the cached decoder's chunks, DG2.1).
- ``batch``: the cached batch with one generator per row (DG6.5) against each row decoded alone, unpadded, with
  its own generator seeded alike: the same events and tokens, logits within the measured rounding of the forward
  (padded and unpadded shapes round differently). With one shared stream a batch row equals its lone decode only
  in law (DG6.4), which is why this row draws per row.
- ``padded``: each row alone, left-padded by ``PADDING`` more positions, against the row alone unpadded, one
  seeded generator each (a batch of one: the official stream, no per-row draws needed): padding alone, within
  the measured rounding.

``batch`` and ``padded`` are tier E in float32 (and float64); in bfloat16 they are tier A (their drift reported):
the events of a sampled decode must then be equal at every step, and bf16's rounding flips acceptances where
entropies nearly tie (on the random config: commit order 0 in a ``--quick`` table).

Logits are recorded at the model's two entry points (``LogitRecorder``): the reference's ``full_forward`` and
the cached decoder's ``denoise``. The speedup column is against the reference's decode of the same batch.
"""

from __future__ import annotations

import copy
import math
import random
import time
from typing import NamedTuple

import torch

from veridec.canvas import left_pad
from veridec.models.diffusiongemma import load_shipped_diffusiongemma, random_diffusiongemma
from veridec.numerics import HIGHER, tolerance
from veridec.optimized.diffusiongemma import generate as cached_generate
from veridec.reference.diffusiongemma import generate as reference_generate
from veridec.rules.diffusiongemma import draw_noise

from .rows import RowKind, Sides, TableInputs
from .workloads import row_tokens_per_step

DECODER = "diffusiongemma"
PADDING = 3  # the ``padded`` kind's extra left padding
BOS, FIRST_CONTENT = 2, 4  # the shipped checkpoint's task (tools/training/diffusiongemma.py): [BOS, content..]
SETTINGS = dict(max_denoising_steps=8, stability_threshold=1, confidence_threshold=0.05, eos_token_id=1,
                pad_token_id=0)  # every row's decode (the table's gen length is max_new_tokens)
RANDOM_SPREAD = 0.1  # the random config's initializer range: wider ones amplify rounding through self-conditioning
RANDOM_GENERATION = {"t_min": 0.4, "t_max": 0.8, "sampler_config": {"entropy_bound": 0.5}}
ROUNDED_TIER = "A"  # batch / padded below float32: bf16 rounding (1e-2) flips sampled decisions at near-ties


def load(name: str, dtype: torch.dtype, device) -> object:
    """``diffusiongemma``: the shipped checkpoint; ``diffusiongemma-random``: a random tiny config (seed 0,
    initializer range ``RANDOM_SPREAD``), both on ``device`` in ``dtype``."""
    model = load_shipped_diffusiongemma(dtype=dtype) if name == DECODER else \
        random_diffusiongemma(seed=0, initializer_range=RANDOM_SPREAD, generation=RANDOM_GENERATION).to(dtype)
    return model.to(device)


def prompts(model, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts [n, P] of the shipped task's form: BOS, then 1..6 content tokens (seeded)."""
    rng = random.Random(seed)
    rows = [[BOS] + [rng.randrange(FIRST_CONTENT, model.vocab_size) for _ in range(rng.randint(1, 6))]
            for _ in range(n)]
    prompt, mask = left_pad(rows, SETTINGS["pad_token_id"])
    return prompt.to(model.device), mask.to(model.device)


class LogitRecorder:
    """A DiffusionGemma model whose decoder logits are kept, one [B, L, V] float64 tensor per call."""

    uniform_state = True

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def _kept(self, logits: torch.Tensor) -> torch.Tensor:
        self.calls.append(logits.detach().double().cpu())
        return logits

    def denoise(self, *args, **kwargs) -> torch.Tensor:
        return self._kept(self.model.denoise(*args, **kwargs))

    def full_forward(self, *args, **kwargs) -> torch.Tensor:
        return self._kept(self.model.full_forward(*args, **kwargs))


def decode(generate, model, prompt, mask, gen_length: int, generator):
    """-> (Decoded, the decoder's logits per call, seconds)."""
    recorder = LogitRecorder(model)
    start = time.perf_counter()
    out = generate(recorder, prompt, mask, max_new_tokens=gen_length, generator=generator, **SETTINGS)
    return out, recorder.calls, time.perf_counter() - start


def seeded(seed: int, device, rows: int | None = None):
    """One generator on ``device`` (``rows`` None) or one per row, each seeded ``seed + row``."""
    if rows is None:
        return torch.Generator(device=device).manual_seed(seed)
    return [torch.Generator(device=device).manual_seed(seed + row) for row in range(rows)]


def kinds(model) -> tuple[RowKind, ...]:
    """``cached`` tier E in any dtype (the same computation, bit for bit); ``batch`` and ``padded`` tier E in
    float32 or float64, tier A below (``ROUNDED_TIER``)."""
    tier = "E" if model.dtype in (torch.float32, torch.float64) else ROUNDED_TIER
    return (RowKind("cached", "E", cached_sides, compared),
            RowKind("batch", tier, batch_sides, compared, {"alone": "unpadded"}),
            RowKind("padded", tier, padded_sides, compared, {"alone": "unpadded"}))


def reference_seconds(inputs: TableInputs) -> float:
    return _reference(inputs)[2]


def _reference(inputs: TableInputs):
    return inputs.once("diffusiongemma reference", lambda: decode(
        reference_generate, inputs.model, inputs.prompt, inputs.mask, inputs.gen_length,
        seeded(inputs.seed, inputs.model.device)))


def cached_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The reference and the cached decoder on the batch, one stream each seeded alike."""
    out, calls, seconds = decode(cached_generate, inputs.model, inputs.prompt, inputs.mask, inputs.gen_length,
                                 seeded(inputs.seed, inputs.model.device))
    expected, expected_calls, _ = _reference(inputs)
    table_pads = pads(inputs.mask)
    return Sides([(expected, expected_calls, table_pads)], [(out, calls, table_pads)], seconds)


def alone(inputs: TableInputs) -> list:
    """Each row decoded alone, unpadded, by the cached decoder with the generator seeded ``seed + row``."""
    def run():
        device = inputs.model.device
        return [(*decode(cached_generate, inputs.model, single, None, inputs.gen_length,
                         seeded(inputs.seed + row, device))[:2], [0]) for row, single in enumerate(inputs.singles())]

    return inputs.once("diffusiongemma alone", run)


def batch_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The rows alone, and the cached batch with one generator per row seeded as each row's alone (DG6.5)."""
    rows = inputs.prompt.shape[0]
    out, calls, seconds = decode(cached_generate, inputs.model, inputs.prompt, inputs.mask, inputs.gen_length,
                                 seeded(inputs.seed, inputs.model.device, rows))
    return Sides(alone(inputs), [(out, calls, pads(inputs.mask))], seconds)


def padded_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The rows alone, and each row alone left-padded by PADDING more positions, its generator seeded alike."""
    decodes, start = [], time.perf_counter()
    for row, single in enumerate(inputs.singles()):
        padded = torch.nn.functional.pad(single, (PADDING, 0), value=SETTINGS["pad_token_id"])  # [1, P + PADDING]
        mask = (torch.arange(padded.shape[1], device=padded.device) >= PADDING).long()[None]  # [1, P + PADDING]
        out, calls, _ = decode(cached_generate, inputs.model, padded, mask, inputs.gen_length,
                               seeded(inputs.seed + row, inputs.model.device))
        decodes.append((out, calls, [PADDING]))
    return Sides(alone(inputs), decodes, time.perf_counter() - start)


# --------------------------------------------------------------------------------------------------- comparison
class RowView(NamedTuple):
    """One row of a decode, from its first real position: its events per step of its own (kind, position, old,
    new), its tokens, its decoder logits [L, V] per step of its own."""

    steps: list[set]
    tokens: torch.Tensor  # [T_row]
    logits: list[torch.Tensor]
    prompt_length: int


def row_views(decoded, calls: list[torch.Tensor], pads: list[int]) -> list[RowView]:
    """The rows of a decode whose row ``b`` starts after ``pads[b]`` padding positions."""
    trace, views = decoded.trace, []
    for row, pad in enumerate(pads):
        active = [k for k, step in enumerate(trace.steps) if math.isfinite(step.selection_gaps[row])]
        steps = [set() for _ in active]
        for event in trace.events:
            if event.row == row:
                steps[event.step].add((event.kind, event.position - pad, event.old, event.new))
        views.append(RowView(steps, decoded.canvas[row, pad:], [calls[k][row] for k in active],
                             trace.prompt_length - pad))
    return views


def views_of(side: list) -> list[RowView]:
    """A side (a list of decodes as (Decoded, calls, pads): one batch, or one decode per row) as row views."""
    return [view for out, calls, row_pads in side for view in row_views(out, calls, row_pads)]


def pads(mask: torch.Tensor) -> list[int]:
    return [int((row == 0).sum()) for row in mask]


def row_agreement(expected: RowView, measured: RowView, pad_id: int,
                  every_step: bool = True) -> tuple[bool, int, int, float]:
    """(same events at every step of the expected row's canvases, matching generated tokens, generated tokens,
    largest logit difference at those steps: ``every_step``, else at each canvas's first step only, where both
    sides' inputs are equal). The measured row may run on in later canvases (a batch goes on while another row
    is unfinished): those steps are left out, and their tokens must be padding."""
    length = expected.tokens.shape[0]
    inside = [step for step in measured.steps if min(position for _, position, _, _ in step) < length]
    generated = measured.tokens[expected.prompt_length:]
    truth = torch.nn.functional.pad(expected.tokens[expected.prompt_length:],
                                    (0, generated.shape[0] - (length - expected.prompt_length)), value=pad_id)
    error = max(((a - b).abs().max().item() for k, (a, b) in enumerate(zip(expected.logits, measured.logits))
                 if every_step or _canvas_start(expected.steps, k)), default=0.0)
    return inside == expected.steps, int((generated == truth).sum()), generated.shape[0], error


def _canvas_start(steps: list[set], k: int) -> bool:
    """Step ``k`` is its canvas's first (its events sit on other positions than the step before's)."""
    first = lambda step: min(position for _, position, _, _ in step)  # noqa: E731
    return k == 0 or first(steps[k]) != first(steps[k - 1])


def rounding(inputs: TableInputs) -> float:
    """Measured rounding of the model's forward (numerics.tolerance against a copy one precision up): the first
    prompt alone, a seeded random canvas, no self-conditioning."""
    def measure() -> float:
        model, prompt = inputs.model, inputs.singles()[0]
        canvas = draw_noise((1, model.canvas_length), model.vocab_size, seeded(inputs.seed, prompt.device),
                            prompt.device)  # [1, L]
        mask = torch.ones_like(prompt, dtype=torch.bool)  # [1, P]
        higher = copy.deepcopy(model).to(HIGHER[model.dtype])
        tol = tolerance(model.full_forward(prompt, mask, canvas, None), higher.full_forward(prompt, mask, canvas, None))
        del higher
        return tol

    return inputs.once("diffusiongemma rounding", measure)


def compared(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The row: commit order match (share of rows with the same events at every step, hence the same steps and
    stop step), token match (share of generated tokens), the largest logit difference. ``cached``: at every
    step, bit-equal. The others: at each canvas's first step (the same prefix, the same random canvas, no
    self-conditioning), within the measured rounding (``logit_tolerance``); a later step feeds each side its own
    previous logits (self-conditioning, DG3.7), so its difference compounds the rounding and is judged by the
    decisions it leads to (the events), not by a rounding bound."""
    expected, measured = views_of(sides.expected), views_of(sides.measured)
    pad_id = SETTINGS["pad_token_id"]
    bitwise = kind.label == "cached"
    agreements = [row_agreement(e, m, pad_id, every_step=bitwise) for e, m in zip(expected, measured)]
    counters, n = _counters(sides.measured), len(expected)
    reference = reference_seconds(inputs)
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(sum(a[0] for a in agreements) / n, 4),
                token_match=round(sum(a[1] for a in agreements) / max(1, sum(a[2] for a in agreements)), 4),
                max_logit_error=max(a[3] for a in agreements), full_forwards=counters[0],
                positions_per_prompt=round(counters[1] / n, 1),
                tokens_per_step=round(sum(row_tokens_per_step(o.trace) for o, _, _ in sides.measured)
                                      / len(sides.measured), 3),
                seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(reference / sides.seconds, 2) if sides.seconds else math.inf,
                hmm_nll_per_token=None, logit_tolerance=None if bitwise else rounding(inputs))


def _counters(side: list) -> tuple[int, int]:
    """(full forwards, query positions) of a side's decodes together."""
    return (sum(out.trace.counters.full_forwards for out, _, _ in side),
            sum(out.trace.counters.query_positions for out, _, _ in side))
