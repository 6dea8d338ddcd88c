"""The rows of the decoders with revocable commits in the exactness table (spec/exactness.md E2): WINO (spec/wino.md
WN8, official defaults threshold 0.6, threshold_back 0.9) and the editing sampler (spec/editing.md ED8, official
defaults threshold 0.95, editing_threshold 0.9). Each prompt is decoded alone (neither takes padding) by the
reference and by a variant. The match is the share of prompts with the same event sets step by step
(compare_traces on event traces); the logit error is the largest difference between the variant's call k and
the reference's call k, at the positions the variant computed, over the calls up to their first divergent step
(the same canvas on both sides); tokens per step are generated positions per forward (revoked drafts do not
count twice). ``EVENT_KINDS``: each decoder's kinds of row; ``ROUNDED`` the exact ones held to rounding.
"""

from __future__ import annotations

import math
import time

import torch

from veridec.compare import compare_traces
from veridec.events import event_trace
from veridec.optimized import editing as optimized_editing
from veridec.optimized import wino as optimized
from veridec.reference import editing as reference_editing
from veridec.reference import wino as reference

from .rows import RowKind, Sides, TableInputs, packing_tolerance, sequential_seconds
from .workloads import hmm_nll

EVENT_DECODERS = {  # decoder -> variant -> tier
    "wino": {"reference": "E", "optimized": "E", "prefix": "A"},  # spec WN8: the prefix cache is not exact
    "editing": {"reference": "E", "optimized": "E", "block": "E"},  # spec ED8: the block cache is exact
}
ROUNDED = {("editing", "block")}  # exact variants whose forwards have other shapes: equal up to rounding


class LoggedLogits:
    """``model`` whose every ``raw_forward`` keeps (positions computed [Q], logits [Q, V]) of row 0 on the host."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    def raw_forward(self, tokens, rope_pos, **options):
        out = self.model.raw_forward(tokens, rope_pos, **options)
        slots = options.get("slots")
        where = torch.arange(tokens.shape[1], device="cpu") if slots is None else slots[0].cpu()  # [Q]
        self.calls.append((where, out.logits[0].detach().float().cpu()))
        return out


def decode(model, decoder: str, variant: str, prompt, gen_length: int, block_length: int):
    """One decode of ``prompt`` [1, P] by ``decoder``'s ``variant`` -> (EventDecoded, its logged calls, seconds);
    the canvas is cut to P + ``gen_length`` (the editing sampler fills its last block to the end)."""
    logged = LoggedLogits(model)
    if decoder == "wino":
        kw, modules = dict(gen_length=gen_length, block_length=block_length), (reference, optimized)
    else:
        kw, modules = dict(max_new_tokens=gen_length, block_size=block_length), (reference_editing, optimized_editing)
    start = time.perf_counter()
    if variant == "reference":
        out = modules[0].generate(logged, prompt, **kw)
    else:
        out = modules[1].generate(logged, prompt, cache="none" if variant == "optimized" else variant, **kw)
    seconds = time.perf_counter() - start
    return out._replace(canvas=out.canvas[:, : prompt.shape[1] + gen_length]), logged.calls, seconds


def event_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """Each prompt decoded alone by the reference and by the variant (timed), each with its logged calls."""
    expected, measured, seconds = [], [], 0.0
    for single in inputs.singles():
        ours, our_calls, _ = decode(inputs.model, decoder, "reference", single, inputs.gen_length, inputs.block_length)
        out, calls, took = decode(inputs.model, decoder, kind.label, single, inputs.gen_length, inputs.block_length)
        expected.append((ours, our_calls))
        measured.append((out, calls))
        seconds += took
    return Sides(expected, measured, seconds)


def events_compared(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The row over the table's prompts, each decoded alone; the ``ROUNDED`` variants are held to the measured
    rounding of the model's forward (``packing_tolerance``), which excuses ties and bounds their logit error."""
    tolerance = packing_tolerance(inputs) \
        if (decoder, kind.label) in ROUNDED else None
    singles, gen_length = inputs.singles(), inputs.gen_length
    matches, tokens, errors, nlls = [], [], [], []
    full = positions = forwards = 0
    for single, (ours, our_calls), (out, calls) in zip(singles, sides.expected, sides.measured):
        length = single.shape[1]
        a, b = (event_trace(d, decoder, {"mask_id": inputs.model.special.mask_id}, length) for d in (ours, out))
        comparison = compare_traces(a, b, ours.canvas, out.canvas, numeric_error=tolerance or 0.0)
        # a ROUNDED variant's divergence at a tie within its tolerance is excused (spec E2), as for speculation
        matches.append(comparison.equivalent if tolerance is not None else comparison.first_divergence is None)
        tokens.append(comparison.token_match_rate)
        divergent = math.inf if comparison.first_divergence is None else comparison.first_divergence.step
        errors.append(_logit_error(our_calls, calls, divergent))
        full, positions = full + out.counters.full_forwards, positions + out.counters.query_positions
        forwards += out.forwards[0]
        if inputs.model_name == "hmm":
            nlls.append(hmm_nll(out.canvas, torch.ones_like(single), length, gen_length))
    n = len(singles)
    known = [x for x in nlls if x is not None]
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(sum(matches) / n, 4), token_match=round(sum(tokens) / n, 4),
                max_logit_error=max(errors), full_forwards=full, positions_per_prompt=round(positions / n, 1),
                tokens_per_step=round(n * gen_length / forwards, 3), seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(sequential_seconds(inputs) / sides.seconds, 2),
                hmm_nll_per_token=round(sum(known) / len(known), 4) if known else None, logit_tolerance=tolerance)


EVENT_KINDS = {decoder: tuple(RowKind(variant, tier, event_sides, events_compared)
                              for variant, tier in variants.items()) for decoder, variants in EVENT_DECODERS.items()}


def _logit_error(ours: list, theirs: list, divergent: float) -> float:
    """Max |logit difference| of call k on both sides, at the positions the variant computed, k <= ``divergent``."""
    worst = 0.0
    for k, ((_, want), (where, got)) in enumerate(zip(ours, theirs)):
        if k > divergent:  # call k (k <= the divergent step) was fed the same canvas on both sides
            break
        worst = max(worst, _difference(want[where].double(), got.double()))
    return worst


def _difference(want: torch.Tensor, got: torch.Tensor) -> float:
    """Max |want - got| over entries finite on both sides; inf where only one side is finite (-inf: banned)."""
    finite_want, finite_got = torch.isfinite(want), torch.isfinite(got)
    if not torch.equal(finite_want, finite_got):
        return math.inf
    both = finite_want & finite_got
    return (want[both] - got[both]).abs().max().item() if both.any() else 0.0
