"""Every parallel rule over the model's K/V cache API (spec/parallel.md P11, spec/fastdllm.md F5-F7).

Per block [s, e): one full forward refreshes the cache and decodes the block's first step; then, until the
block has no mask:
- cache="none": a full forward per step (Tier E against the reference, batched, no cache);
- cache="prefix": feed x[s - shift:], recomputing their K/V against the cached prefix;
- cache="dual": feed x[s - shift:e], recomputing the block's K/V against the cached prefix and (stale) suffix.
shift is the model's logit shift (Dream 1: the query scoring token s sits at s - 1). The rule is the
reference's (``parallel_step``); counters have the reference's meaning.
"""

from __future__ import annotations

import torch

from veridec.canvas import initial_canvas
from veridec.decoding import check_decode_args, check_model_supports, check_progress, decode_params, step_budget
from veridec.rules.common import check_choice, gumbel_noisy_logits
from veridec.rules.parallel import new_state, symmetrized_dependency
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_step

CACHES = ("none", "prefix", "dual")


@torch.no_grad()
def decode(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, rule, cache: str = "dual",
           gen_length: int = 128, block_length: int = 32, temperature: float = 0.0,
           remasking: str = "low_confidence", mask_id: int | None = None, ties: str = "lowest",
           generator: torch.Generator | None = None, record_logits: bool = False, name: str | None = None,
           legacy_loop: bool = False, unused_draw: bool = False) -> Decoded:
    """As ``veridec.reference.parallel.decode`` with a cache policy. ``legacy_loop``: the June 2025 official
    loop (a cached forward even after the refresh step completed the block); ``unused_draw``: the official
    prefix path's extra Gumbel draw per cached step (both only to reproduce official seeds; no effect without
    a cache)."""
    check_decode_args(gen_length, block_length, temperature, remasking, ties)
    check_choice("cache", cache, CACHES)
    check_model_supports(model, rule, cache)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    batch, prompt_len = prompt.shape
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    length, shift = x.shape[1], model.logit_shift
    trace = Trace(name or f"{rule.name}-{cache}-cache",
                  decode_params(rule, gen_length, block_length, temperature, remasking, mask_id), prompt_len, batch)
    state = new_state(rule, batch, length, x.device)
    needs_attention = getattr(rule, "needs_attention", False)
    canvas_positions = torch.arange(length, device=x.device)  # [L]

    def step(logits, attentions, rows, cols, window_start, block, start, end, block_step, at_start):
        nonlocal x
        window = x[:, window_start:window_start + logits.shape[1]]
        tokens = canvas_positions[window_start:window_start + logits.shape[1]]
        candidates = (window == mask_id) & (tokens < end)[None]
        dependency = symmetrized_dependency(attentions, rule, rows, cols) if needs_attention else None
        result = parallel_step(rule, logits, window, candidates, temperature=temperature, remasking=remasking,
                               ties=ties, generator=generator, offset=window_start, block_step=block_step,
                               block_masks_at_start=at_start, block_masks=(x[:, start:end] == mask_id).sum(dim=1),
                               block_length=block_length, dependency=dependency, state=state)
        record_step(trace, block, window, result.x, mask_id, result.confidence, result.choice_logits,
                    result.order, record_logits, offset=window_start)
        x = torch.cat([x[:, :window_start], result.x, x[:, window_start + logits.shape[1]:]], dim=1)

    full_query = (canvas_positions - shift).clamp_min(0)  # [L] the query scoring each token
    for block in range(gen_length // block_length):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        at_start = (x[:, start:end] == mask_id).sum(dim=1)  # [B]
        budget = step_budget((x == mask_id) & (canvas_positions < end)[None], rule)
        window_end = end if cache == "dual" else length
        fed = torch.arange(start - shift, window_end, device=x.device).expand(batch, -1)  # [B, W + shift]
        i = 0
        while i == 0 or (x[:, start:end] == mask_id).any() or (legacy_loop and cache != "none" and i == 1):
            check_progress(i, block, budget)
            if i == 0 or cache == "none":  # refresh: a full forward of the canvas as it is now
                if cache == "none":
                    attention = {"output_attentions": True} if needs_attention else {}
                    out = model(x, attention_mask=attention_mask, **attention)
                else:
                    out, kv = model.prefill(x, attention_mask, output_attentions=needs_attention)
                trace.counters.add_forward(rows=batch, queries=length)
                step(out.logits, out.attentions, full_query, full_query, 0, block, start, end, i, at_start)
            else:
                out = model.forward_cached(x[:, start - shift:window_end], fed, kv, output_attentions=needs_attention)
                trace.counters.add_forward(rows=batch, queries=fed.shape[1], full=False)
                logits = out.logits[:, :window_end - start]  # [B, W, V]: query j scores token j + shift
                if unused_draw:
                    gumbel_noisy_logits(logits, temperature, generator)
                rows = torch.arange(window_end - start, device=x.device)
                step(logits, out.attentions, rows, rows + start - shift, start, block, start, end, i, at_start)
            i += 1
    return Decoded(x, trace)
