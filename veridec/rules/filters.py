"""Top-k and top-p (nucleus) filters of logits [.., V], one definition each (spec/sequential.md SQ2.5,
spec/block_diffusion.md BD4, spec/editing.md ED3).

What a decoder composes is its own, as its official code does: which filter runs first (Dream: top-p, then top-k;
SDAR and LLaDA2.1: top-k, then top-p), what a dropped token's logit becomes (``fill``: Dream the dtype's minimum,
the others -inf), and how equal logits are sorted for top-p (``stable``: lowest id first, spec N5; else
``torch.sort``'s own order, as the official code)."""

from __future__ import annotations

import math

import torch


def top_k_filter(logits: torch.Tensor, top_k: int, fill: float = -math.inf) -> torch.Tensor:
    """Keep the logits >= the k-th largest (every token tied with it survives); the others become ``fill``."""
    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1:]  # [.., 1]
    return logits.masked_fill(logits < kth, fill)


def top_p_filter(logits: torch.Tensor, top_p: float, fill: float = -math.inf, stable: bool = False) -> torch.Tensor:
    """Keep the smallest prefix of the tokens by descending logit whose probability exceeds ``top_p``, the token
    crossing it included (a token is dropped once the mass before it exceeds top_p); the others become ``fill``."""
    ordered, order = torch.sort(logits, descending=True, stable=stable)  # [.., V]
    beyond = torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1) > top_p  # [.., V] in sorted order
    drop = torch.zeros_like(beyond)
    drop[..., 1:] = beyond[..., :-1]  # the mass before the token exceeds top_p
    return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), fill)
