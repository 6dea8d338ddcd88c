"""Pieces several decoding rules share: Gumbel-max sampling, top-k selection with a stated tie rule."""

from __future__ import annotations

import torch

TIES = ("lowest", "torch")


def gumbel_noisy_logits(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None):
    """LLaDA's Gumbel-max in float64: exp(l) / (-log u)^T, u ~ U(0, 1) of shape [..., V]; argmax samples
    softmax(l / T). Temperature 0 returns ``logits`` itself (the same tensor object, as the official code:
    spec/sequential.md S1.6 relies on it)."""
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)
    return logits.exp() / (-torch.log(noise)) ** temperature


def top_k_indices(scores: torch.Tensor, k: int, ties: str) -> torch.Tensor:
    """Indices of the k largest entries of a 1-D ``scores``.

    ties="lowest": equal scores rank by lowest index (spec N5), via a stable descending sort.
    ties="torch": ``torch.topk``'s own (implementation-defined) order, which is what the official LLaDA and
    Dream code get; use it to reproduce them bit for bit when exact ties occur (e.g. bf16 confidences).
    """
    if ties == "torch":
        return torch.topk(scores, k).indices
    return torch.sort(scores, descending=True, stable=True).indices[:k]


def check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def check_range(name: str, value, low=None, high=None, low_open=False, high_open=False, integer=False) -> None:
    """Raise ValueError naming ``name`` and the allowed range unless low <= value <= high (open ends optional)."""
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ValueError(f"{name} must lie in {span}, got {value!r}")
