"""LLaDA2.1's block step with token edits (spec/editing.md ED3-ED4): commit masks above ``threshold``, replace
placed tokens the model now gives another token above ``editing_threshold``. Pure, one block of one row."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..checks import check_choice, check_range
from .common import TIES, token_probability, top_k_indices
from .filters import top_k_filter, top_p_filter


@dataclass(frozen=True)
class EditParams:
    max_new_tokens: int = 128
    block_size: int = 32
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    threshold: float = 0.95
    editing_threshold: float = 0.9
    max_post_steps: int = 16
    num_to_transfer: int = 1
    eos_early_stop: bool = False
    ties: str = "lowest"

    def __post_init__(self):
        check_range("max_new_tokens", self.max_new_tokens, low=1, integer=True)
        check_range("block_size", self.block_size, low=1, integer=True)
        check_range("temperature", self.temperature, low=0)
        if self.top_p is not None:
            check_range("top_p", self.top_p, low=0, high=1, low_open=True)
        if self.top_k is not None:
            check_range("top_k", self.top_k, low=1, integer=True)
        check_range("threshold", self.threshold, low=0, high=1)
        check_range("editing_threshold", self.editing_threshold, low=0, high=1)
        check_range("max_post_steps", self.max_post_steps, low=0, integer=True)
        check_range("num_to_transfer", self.num_to_transfer, low=1, integer=True)
        check_choice("eos_early_stop", self.eos_early_stop, (False, True))
        check_choice("ties", self.ties, TIES)


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """ED3's top-k, then top-p, on [.., V]: dropped tokens get -inf."""
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1:
        logits = top_p_filter(logits, top_p)
    return logits


def propose(logits: torch.Tensor, params: EditParams, generator=None) -> tuple[torch.Tensor, torch.Tensor]:
    """ED3: block logits [b, V] -> proposed tokens [b] and their probabilities q [b]."""
    if params.temperature == 0:
        probs = torch.softmax(logits, dim=-1)  # the logits' dtype, as the official sampler
        tokens = probs.argmax(dim=-1)
    else:
        probs = torch.softmax(filter_logits(logits / params.temperature, params.top_k, params.top_p), dim=-1)
        tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return tokens, token_probability(probs[None], tokens[None])[0]


class EditStep(NamedTuple):
    tokens: torch.Tensor  # [b] the block after the step
    commits: list[tuple[int, int, float]]  # (offset, token, q), by decreasing q
    edits: list[tuple[int, int, int, float]]  # (offset, old, new, q), by offset
    had_masks: bool
    margin: float  # the smallest distance of a decision from flipping


def edit_step(logits: torch.Tensor, block: torch.Tensor, is_prompt: torch.Tensor, *, params: EditParams,
              mask_id: int, generator=None) -> EditStep:
    """ED4 on one block: logits [b, V], block [b] tokens, is_prompt [b] bool."""
    tokens, q = propose(logits, params, generator)
    active = block == mask_id  # [b]
    transfer = torch.zeros_like(active)
    if active.any():
        confidence = q.masked_fill(~active, -math.inf)
        high = (confidence > params.threshold) & active
        if int(high.sum()) >= params.num_to_transfer:
            transfer = high
        else:
            count = min(params.num_to_transfer, int(active.sum()))
            transfer[top_k_indices(confidence, count, params.ties)] = True
    editable = ~active & ~is_prompt
    edit = editable & (q > params.editing_threshold) & (tokens != block)
    new = torch.where(transfer | edit, tokens, block)
    order = torch.sort(q.masked_fill(~transfer, -math.inf), descending=True, stable=True).indices
    commits = [(int(i), int(tokens[i]), float(q[i])) for i in order[: int(transfer.sum())]]
    edits = [(int(i), int(block[i]), int(tokens[i]), float(q[i])) for i in edit.nonzero()[:, 0]]
    return EditStep(new, commits, edits, bool(active.any()), _margin(logits, q, active, editable, tokens, block,
                                                                     params))


def _margin(logits, q, active, editable, tokens, block, params) -> float:
    gaps = [(q[active] - params.threshold).abs(), (q[editable & (tokens != block)] - params.editing_threshold).abs()]
    if params.temperature == 0:
        top2 = torch.softmax(logits.double(), dim=-1).topk(min(2, logits.shape[-1]), dim=-1).values  # [b, 2]
        if top2.shape[-1] == 2:
            gaps.append(top2[:, 0] - top2[:, 1])
    below = active & (q <= params.threshold)
    if active.any() and int((active & ~below).sum()) < params.num_to_transfer and below.sum() > 1:
        ordered = torch.sort(q[active], descending=True).values
        count = min(params.num_to_transfer, int(active.sum()))
        if count < ordered.numel():
            gaps.append((ordered[count - 1] - ordered[count]).reshape(1))
    every = torch.cat([g.reshape(-1).double() for g in gaps])
    return float(every.min()) if every.numel() else math.inf
