"""The exactness table's rows on a block-diffusion model (spec/exactness.md E4, spec/block_diffusion.md BD8, BD11):
each decoder's cached, batched decoder on the table's left-padded prompts against its reference decoding each
prompt alone (a full block-causal forward per step). The decoders are veridec's parallel rules inside blocks
(BD11) and the published samplers' strategies at temperature 0 (``sdar-*``, BD5-BD6). The logits of a block
against the cache and of the full forward differ in rounding (other shapes), so rows are held to the measured
rounding of a block-causal forward (``block_tolerance``), as speculative rows are. ``block_kinds``: the kinds of
row, one per block length.
"""

from __future__ import annotations

import copy
import math
import time
from functools import partial

import torch

from veridec.compare import compare_traces
from veridec.numerics import HIGHER, tolerance
from veridec.optimized.block_diffusion import generate as sdar_cached
from veridec.optimized.block_parallel import parallel_generate as parallel_cached
from veridec.reference.block_diffusion import block_diffusion_generate as sdar_reference
from veridec.reference.block_diffusion import one_row_canvas
from veridec.reference.block_diffusion import parallel_generate as parallel_reference
from veridec.rules.presets import PRESETS
from veridec.trace import StepRecord, Trace

from .rows import RowKind, Sides, TableInputs
from .workloads import row_tokens_per_step, single_prompts

SDAR_DECODERS = {  # name -> the published sampler's settings, greedy (BD6.1), denoising steps = block length / 2
    "sdar-static": dict(remasking_strategy="low_confidence_static"),
    "sdar-dynamic": dict(remasking_strategy="low_confidence_dynamic", confidence_threshold=0.9),
}
VARIANT = "blocks-cached"
BLOCK_ROWS_SMALL = 4  # block-diffusion models get rows at this block length besides the table's
BLOCK_SEQUENTIAL = "block sequential seconds"  # TableInputs.measured: the sequential rule's block reference's time


def block_decoders(decoders) -> list[str]:
    """The table's decoders that run on a block-diffusion model: rules without attention weights (BD11) and the
    published samplers' strategies (``SDAR_DECODERS``)."""
    return [d for d in decoders if d in SDAR_DECODERS or d in PRESETS and not getattr(PRESETS[d], "needs_attention",
                                                                                        False)]


def decoder_pair(name: str, block_length: int):
    """(reference, cached) decode functions of ``name`` with its settings bound (greedy, logits recorded):
    ``reference(model, prompt, gen_length=)``, ``cached(model, prompt, mask, gen_length=)``."""
    if name in SDAR_DECODERS:
        settings = dict(block_length=block_length, denoising_steps=max(1, block_length // 2), temperature=0.0,
                        **SDAR_DECODERS[name])
        return (partial(sdar_reference, record_logits=True, **settings),
                partial(sdar_cached, record_logits=True, **settings))
    kw = dict(rule=PRESETS[name], block_length=block_length, record_logits=True)
    return partial(parallel_reference, **kw), partial(parallel_cached, **kw)


def block_tolerance(model, prompt: torch.Tensor, gen_length: int, block_length: int) -> float:
    """Measured rounding of a block-causal forward (numerics.tolerance against a copy one precision up) of the
    first prompt's canvas, its generation masked."""
    x = one_row_canvas(model, prompt, gen_length, block_length, model.special.mask_id)  # [1, T]
    higher = copy.deepcopy(model).to(HIGHER[model.dtype])
    tol = tolerance(model(x, block_size=block_length).logits, higher(x, block_size=block_length).logits)
    del higher
    return tol


def block_kinds(block_length: int) -> tuple[RowKind, ...]:
    """A block-diffusion model's kinds of row: the cached batch against the reference on each prompt alone, at each
    of ``block_row_lengths``."""
    return tuple(RowKind(f"{VARIANT} b{b}", "E", block_sides, block_compared, {"block_length": b})
                 for b in block_row_lengths(block_length))


def block_row_lengths(block_length: int) -> list[int]:
    """The block lengths of a block-diffusion model's rows: BLOCK_ROWS_SMALL and the table's (once if equal)."""
    return sorted({BLOCK_ROWS_SMALL, block_length})


def block_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The reference on each prompt alone and the cached decoder on the batch [B, P] (timed), at the kind's block
    length."""
    reference, cached = decoder_pair(decoder, kind.settings["block_length"])
    alone = [reference(inputs.model, single, gen_length=inputs.gen_length) for single in inputs.singles()]
    start = time.perf_counter()
    batch = cached(inputs.model, inputs.prompt, inputs.mask, gen_length=inputs.gen_length)
    return Sides(alone, batch, time.perf_counter() - start)


def block_compared(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The block row: the single decodes as one batch against the cached batch, within the measured rounding of a
    block-causal forward at the kind's block length."""
    model, prompt, mask, b = inputs.model, inputs.prompt, inputs.mask, kind.settings["block_length"]
    tol = inputs.once(f"block tolerance b{b}",
                      lambda: block_tolerance(model, inputs.singles()[0], inputs.gen_length, b))
    alone, batch, seconds = sides
    expected, expected_canvas = batch_of(alone, prompt, mask, batch.canvas.shape[1], model.special.mask_id)
    comparison = compare_traces(expected, batch.trace, expected_canvas, batch.canvas, numeric_error=tol)
    counters, n = batch.trace.counters, prompt.shape[0]
    sequential = inputs.once(BLOCK_SEQUENTIAL, lambda: sequential_seconds(model, prompt, mask, inputs.gen_length,
                                                                           inputs.block_length))
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(comparison.commit_order_match_rate, 4),
                token_match=round(comparison.token_match_rate, 4), max_logit_error=comparison.max_logit_error or 0.0,
                full_forwards=counters.full_forwards, positions_per_prompt=round(counters.query_positions / n, 1),
                tokens_per_step=round(row_tokens_per_step(batch.trace), 3), seconds=round(seconds, 3),
                speedup_vs_sequential=round(sequential / seconds, 2) if seconds else math.inf,
                hmm_nll_per_token=None, logit_tolerance=tol)


def batch_of(alone, prompt, mask, width: int, mask_id: int) -> tuple[Trace, torch.Tensor]:
    """The single decodes ``alone`` (one per row of ``prompt`` [B, P]) as one batch in the cached decoder's output
    layout: each row's canvas after its padding as given, masks after; each single step a batch step in which
    only its row commits."""
    rows = prompt.shape[0]
    canvas = torch.full((rows, width), mask_id, dtype=torch.long, device=prompt.device)  # [B, W]
    trace = Trace(alone[0].trace.decoder, alone[0].trace.params, prompt.shape[1], rows)
    for row, decoded in enumerate(alone):
        pad = int((mask[row] == 0).sum())
        canvas[row, :pad] = prompt[row, :pad]
        canvas[row, pad:pad + decoded.canvas.shape[1]] = decoded.canvas[0]
        for step in decoded.trace.steps:
            trace.steps.append(_row_step(step, row, rows, pad))
    return trace, canvas


def _row_step(step: StepRecord, row: int, rows: int, pad: int) -> StepRecord:
    """A one-row step as row ``row`` of a batch of ``rows``, its positions shifted by ``pad``."""
    def place(value, empty):
        return [value if r == row else empty for r in range(rows)]

    return StepRecord(step.block, place([p + pad for p in step.positions[0]], []), place(step.tokens[0], []),
                      place(step.confidences[0], []), place(step.margins[0], []),
                      place(step.selection_gaps[0], math.inf),
                      None if step.logits is None else place(step.logits[0], []))


def sequential_seconds(model, prompt, mask, gen_length: int, block_length: int) -> float:
    """Wall time of the sequential rule's block reference on each prompt alone (after one warm-up decode)."""
    reference, _ = decoder_pair("sequential", block_length)
    singles = single_prompts(prompt, mask)
    reference(model, singles[0], gen_length=gen_length)
    start = time.perf_counter()
    for single in singles:
        reference(model, single, gen_length=gen_length)
    return time.perf_counter() - start
