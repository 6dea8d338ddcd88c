"""The exactness table's rows on a Fast-dLLM v2 model (spec/exactness.md E7, spec/fastdllm_v2.md V2.8, V2.10).
No Fast-dLLM v2 checkpoint ships, so the table builds one: ``tiny-fastdllm-v2``, the tiny check model of
veridec.testing (random weights in the official Qwen2 layout with the token shift, its LM head scaled so that
thresholds decide something; built in well under a second). Two kinds of row, blocks of ``SETTINGS``:

- ``prefix-cache`` (tier E): the optimized decoder with the exact cache of finished blocks, on the table's
  left-padded batch, against the reference (a full block-causal forward per step, each row alone): the same
  commit order and tokens, logits at the commits within the measured rounding of a block-causal forward
  (cached and full forwards have other shapes).
- ``block-cache`` (tier A): ``use_block_cache=True`` (the published approximate block cache: stale keys and
  values of the block's other sub-blocks; one row at a time) against the reference, each row alone: its drift
  (commit order match, token match, largest logit difference before the first divergence).

The speedup column is against the reference's decode of the same prompts.
"""

from __future__ import annotations

import copy
import math
import random
import time

import torch

from veridec.canvas import left_pad
from veridec.compare import compare_traces
from veridec.numerics import HIGHER, tolerance
from veridec.optimized.fastdllm_v2 import generate as cached_generate
from veridec.reference.fastdllm_v2 import generate as reference_generate
from veridec.rules.fastdllm_v2 import V2Params, v2_canvas
from veridec.testing.models import load_check_model

from .rows import RowKind, Sides, TableInputs
from .workloads import row_tokens_per_step

DECODER = "fastdllm-v2"
MODEL = "tiny-fastdllm-v2"
SETTINGS = dict(block_size=8, small_block_size=4, threshold=0.9)  # greedy (temperature 0), blocks of 8
PROMPT_LENGTHS = (3, 12)  # a prompt's length is drawn in this range: shorter than, equal to, longer than a block


def load(name: str, dtype: torch.dtype, device) -> object:
    """The tiny check model of the v2 layout, in ``dtype`` on ``device``."""
    return load_check_model(MODEL).to(device=device, dtype=dtype)


def prompts(model, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts [n, P] of random ordinary tokens (no mask, pad or EOS), seeded."""
    rng = random.Random(seed)
    special = {model.special.mask_id, model.special.pad_id, model.special.eos_id}
    tokens = [t for t in range(model.vocab_size) if t not in special]
    rows = [[rng.choice(tokens) for _ in range(rng.randint(*PROMPT_LENGTHS))] for _ in range(n)]
    prompt, mask = left_pad(rows, model.special.pad_id)
    return prompt.to(model.device), mask.to(model.device)


def kinds(model) -> tuple[RowKind, ...]:
    return (RowKind("prefix-cache", "E", prefix_sides, compared), RowKind("block-cache", "A", block_sides, compared))


def _reference(inputs: TableInputs):
    """The reference on the table's batch (each row alone, one after the other) -> (Decoded, seconds)."""
    def run():
        start = time.perf_counter()
        out = reference_generate(inputs.model, inputs.prompt, inputs.mask, max_new_tokens=inputs.gen_length,
                                 record_logits=True, **SETTINGS)
        return out, time.perf_counter() - start

    return inputs.once("fastdllm-v2 reference", run)


def prefix_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The reference, and the prefix-cached decoder on the whole batch (timed)."""
    start = time.perf_counter()
    out = cached_generate(inputs.model, inputs.prompt, inputs.mask, max_new_tokens=inputs.gen_length,
                          record_logits=True, **SETTINGS)
    return Sides([_reference(inputs)[0]], [out], time.perf_counter() - start)


def block_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """Each row alone: the reference, and the block cache (one row at a time, timed together)."""
    expected, measured, seconds = [], [], 0.0
    for row in range(inputs.prompt.shape[0]):
        prompt, mask = inputs.prompt[row:row + 1], inputs.mask[row:row + 1]
        settings = dict(max_new_tokens=inputs.gen_length, record_logits=True, **SETTINGS)
        expected.append(reference_generate(inputs.model, prompt, mask, **settings))
        start = time.perf_counter()
        measured.append(cached_generate(inputs.model, prompt, mask, use_block_cache=True, **settings))
        seconds += time.perf_counter() - start
    return Sides(expected, measured, seconds)


def block_rounding(inputs: TableInputs) -> float:
    """Measured rounding of a block-causal forward (numerics.tolerance against a copy one precision up) of the
    first prompt's canvas, its generation masked."""
    def measure() -> float:
        model = inputs.model
        params = V2Params(inputs.gen_length, SETTINGS["block_size"], SETTINGS["small_block_size"],
                          SETTINGS["threshold"], 0.0, 0.95, None)
        x, _, _ = v2_canvas(model, inputs.prompt[:1], inputs.mask[:1], params, model.special.mask_id)  # [1, T]
        higher = copy.deepcopy(model).to(HIGHER[model.dtype])
        size = SETTINGS["block_size"]
        low, high = model(x, block_size=size).logits, higher(x, block_size=size).logits  # [1, T, V]
        finite = torch.isfinite(high)  # the check model's mask token scores -inf on both sides
        tol = tolerance(low[finite], high[finite])
        del higher
        return tol

    return inputs.once("fastdllm-v2 rounding", measure)


def compared(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """Each measured decode against its expected one (compare_traces, ties within the measured rounding), the
    rows pooled: commit order match and token match over all rows, the largest logit difference."""
    tol = block_rounding(inputs)
    found = [compare_traces(e.trace, m.trace, e.canvas, m.canvas, numeric_error=tol)
             for e, m in zip(sides.expected, sides.measured)]
    rows = [out.trace.batch_size for out in sides.measured]
    n = sum(rows)
    reference = _reference(inputs)[1]
    counters = [out.trace.counters for out in sides.measured]
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(sum(c.commit_order_match_rate * r for c, r in zip(found, rows)) / n, 4),
                token_match=round(sum(c.token_match_rate * r for c, r in zip(found, rows)) / n, 4),
                max_logit_error=max(c.max_logit_error or 0.0 for c in found),
                full_forwards=sum(c.full_forwards for c in counters),
                positions_per_prompt=round(sum(c.query_positions for c in counters) / n, 1),
                tokens_per_step=round(sum(row_tokens_per_step(o.trace) * r for o, r in zip(sides.measured, rows)) / n,
                                      3),
                seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(reference / sides.seconds, 2) if sides.seconds else math.inf,
                hmm_nll_per_token=None, logit_tolerance=tol)
