"""Fast-dLLM with a prefix or dual K/V cache over the model's cache API (spec/fastdllm.md F5-F7).

Per block [s, e): one full forward (``prefill``) refreshes the cache and decodes the block's first step; then
- prefix cache: each step feeds x[s:] (the block and everything after it), recomputing their K/V against
  the cached prefix [0, s);
- dual cache: each step feeds only x[s:e], recomputing the block's K/V against the cached prefix and the
  cached (stale) suffix.
The rule is the reference's ``fastdllm_step``. Parameter names are Fast-dLLM's; the official loop order is
kept (including its forward after a block the first step already completed, and the prefix-cache path's
extra Gumbel draw), so seeds reproduce the official code.
"""

from __future__ import annotations

import torch

from veridec.canvas import initial_canvas
from veridec.rules.common import gumbel_noisy_logits
from veridec.rules.fastdllm import FastDLLMParams, block_quota, fastdllm_step, quota_at
from veridec.trace import Decoded, Trace, record_step

@torch.no_grad()
def generate_with_prefix_cache(model, prompt, attention_mask=None, steps=128, gen_length=128, block_length=128,
                               temperature=0.0, remasking="low_confidence", mask_id=None, threshold=None,
                               **options) -> Decoded:
    return _cached_generate("prefix", model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                            remasking, mask_id, threshold, **options)


@torch.no_grad()
def generate_with_dual_cache(model, prompt, attention_mask=None, steps=128, gen_length=128, block_length=128,
                             temperature=0.0, remasking="low_confidence", mask_id=None, threshold=None,
                             **options) -> Decoded:
    return _cached_generate("dual", model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                            remasking, mask_id, threshold, **options)


def _cached_generate(cache_kind, model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                     remasking, mask_id, threshold, *, inclusive: bool = True, ties: str = "lowest",
                     generator: torch.Generator | None = None, record_logits: bool = False) -> Decoded:
    params = FastDLLMParams(steps, gen_length, block_length, temperature, remasking, threshold, inclusive, ties)
    if model.logit_shift != 0:
        raise ValueError("the cached Fast-dLLM decoders need a model without logit shift (LLaDA layout); "
                         "Dream's shifted queries are not supported by this path yet")
    mask_id = model.special.mask_id if mask_id is None else mask_id
    batch, prompt_len = prompt.shape
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    length = x.shape[1]
    trace = Trace(f"fastdllm-{cache_kind}-cache", {**params.__dict__, "mask_id": mask_id}, prompt_len, batch)
    positions = torch.arange(length, device=x.device)[None]  # [1, L]

    def step(logits, window_start, window_end, candidates, schedule_column, block):
        nonlocal x
        window = x[:, window_start:window_end]
        result = fastdllm_step(logits, window, candidates, params, schedule_column, generator)
        record_step(trace, block, window, result.x, mask_id, result.confidence, result.choice_logits,
                    result.order, record_logits, offset=window_start)
        x = torch.cat([x[:, :window_start], result.x, x[:, window_end:]], dim=1)

    for block in range(params.num_blocks):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        schedule = block_quota((x[:, start:end] == mask_id).sum(dim=1), params)
        out, cache = model.prefill(x, attention_mask)  # refresh: K/V of the whole canvas as it is now
        trace.counters.add_forward(rows=batch, queries=length)
        step(out.logits, 0, length, (x == mask_id) & (positions < end), quota_at(schedule, 0), block)
        window_end = length if cache_kind == "prefix" else end
        query = torch.arange(start, window_end, device=x.device).expand(batch, -1)  # [B, W]
        i = 1
        while True:  # the official loop: forward, commit, then test the block
            if i > block_length + params.steps_per_block:
                raise RuntimeError(f"block {block} stalled after {i} steps: the model predicts the mask token")
            logits = model.forward_cached(x[:, start:window_end], query, cache).logits  # [B, W, V]
            trace.counters.add_forward(rows=batch, queries=query.shape[1], full=False)
            if cache_kind == "prefix":
                gumbel_noisy_logits(logits, temperature, generator)  # the official code's unused draw
            candidates = (x[:, start:window_end] == mask_id) & (query < end)
            step(logits, start, window_end, candidates, quota_at(schedule, i), block)
            if not (x[:, start:end] == mask_id).any():
                break
            i += 1
    return Decoded(x, trace)
