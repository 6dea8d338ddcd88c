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


def check_blocks(gen_length: int, block_length: int, steps: int, steps_split: bool = True) -> None:
    """Semi-autoregressive blocks (S1.2): gen_length a multiple of block_length, steps >= 1 and (when the
    steps are split over blocks) a multiple of the number of blocks."""
    check_range("gen_length", gen_length, low=1, integer=True)
    check_range("block_length", block_length, low=1, integer=True)
    if gen_length % block_length:
        raise ValueError(f"gen_length ({gen_length}) must be divisible by block_length ({block_length})")
    check_range("steps", steps, low=1, integer=True)
    if steps_split and steps % (gen_length // block_length):
        raise ValueError(f"steps ({steps}) must be divisible by the number of blocks "
                         f"gen_length / block_length = {gen_length // block_length}")


class BlockSchedule:
    """Mixin for parameter classes with ``gen_length``, ``block_length`` and ``steps`` (S1.2)."""

    @property
    def num_blocks(self) -> int:
        return self.gen_length // self.block_length

    @property
    def steps_per_block(self) -> int:
        return self.steps // self.num_blocks
