"""Packed verification forwards (spec/speculative.md SPV1-SPV3): logits for many draft states in one model call.

- ``packed_window_logits``: K branches, each a version of the same window of the canvas (a block), packed
  along the sequence as [cache | branch 1 | ... | branch K]: every branch's queries attend to the cached
  entries outside the window (prefix and suffix) and to the branch's own fresh keys, never to another
  branch's nor to the cache's stale window slots. Positions repeat per branch. The cache is read only.
  Each branch gets what a dual-cache step (``forward_cached`` with write=True on that window) would compute.
- ``stacked_canvas_logits``: K whole canvases as K x B batch rows of one full forward (the no-cache policy).
"""

from __future__ import annotations

import torch


def packed_window_logits(model, branches: torch.Tensor, positions: torch.Tensor, cache,
                         lookahead_from: int | None = None) -> torch.Tensor:
    """branches [K, B, Q] tokens of the fed window in each branch; positions [B, Q] their canvas positions
    (the window, identical for every branch) -> raw logits [K, B, Q, V] (query j scores token j + shift).

    ``lookahead_from`` = e splits the window for inter-block speculation: queries before e see exactly what a
    dual-cache step on [s, e) sees (their branch's keys before e, the cache from e on), so their logits stay
    R's; queries from e on also see their branch's fresh keys from e on instead of the cache's stale ones."""
    k, batch, width = branches.shape
    if cache.length + k * width > model.max_length:
        raise ValueError(f"packing {k} branches of {width} positions after a cache of {cache.length} needs "
                         f"{cache.length + k * width} positions, more than the model's max_length {model.max_length}")
    tokens = branches.permute(1, 0, 2).reshape(batch, k * width)  # [B, K*Q], branch-major
    fed = positions.repeat(1, k)  # [B, K*Q]
    bias = packing_bias(positions, cache.length, k, model.dtype, lookahead_from)  # [B, 1, K*Q, L + K*Q]
    raw = model.forward_cached(tokens, fed, cache, write=False, attn_bias=bias, check=False).logits  # [B, K*Q, V]
    return raw.reshape(batch, k, width, -1).permute(1, 0, 2, 3)


def packing_bias(positions: torch.Tensor, cache_length: int, branches: int, dtype,
                 lookahead_from: int | None = None) -> torch.Tensor:
    """Additive mask [B, 1, K*Q, L + K*Q]: cache columns open except the window's own slots; new columns
    open only within the query's branch (block diagonal). With ``lookahead_from`` = e, queries before e keep
    the cache's slots from e on and do not see their branch's keys from e on."""
    batch, width = positions.shape
    device = positions.device
    stale = torch.zeros(batch, cache_length, dtype=torch.bool, device=device)
    stale.scatter_(1, positions, True)  # [B, L] the window's slots in the cache
    fed = positions.repeat(1, branches)  # [B, K*Q] canvas position of each query and each new key
    cache_part = stale[:, None, :].expand(batch, branches * width, cache_length).clone()  # [B, K*Q, L]
    branch_of = torch.arange(branches, device=device).repeat_interleave(width)  # [K*Q]
    new_part = (branch_of[:, None] != branch_of[None, :]).expand(batch, -1, -1).clone()  # [B, K*Q, K*Q]
    if lookahead_from is not None:
        early = fed < lookahead_from  # [B, K*Q]
        late_slot = torch.arange(cache_length, device=device)[None] >= lookahead_from  # [1, L]
        cache_part &= ~(early[:, :, None] & late_slot[:, None, :])  # early queries: cache from e on, as R
        new_part |= early[:, :, None] & ~early[:, None, :]  # early queries: no fresh keys from e on
    blocked = torch.cat([cache_part, new_part], dim=2)  # [B, K*Q, L + K*Q]
    return torch.zeros(blocked.shape, dtype=dtype, device=positions.device).masked_fill(blocked, float("-inf"))[:, None]


def stacked_canvas_logits(model, canvases: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """canvases [K, B, L] -> token-aligned logits [K, B, L, V] from one full forward of K*B rows."""
    k, batch, length = canvases.shape
    mask = None if attention_mask is None else attention_mask.repeat(k, 1)
    logits = model(canvases.reshape(k * batch, length), attention_mask=mask).logits
    return logits.reshape(k, batch, length, -1)


def window_from_raw(raw: torch.Tensor, shift: int, width: int) -> torch.Tensor:
    """Raw window logits [..., Q, V] fed from s - shift -> token-aligned logits of tokens s .. s + width."""
    return raw[..., :width, :] if shift else raw
