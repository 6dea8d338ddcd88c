"""What a parallel rule sees of one decoding step (spec/parallel.md P1)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class StepView:
    """One step as a rule sees it; tensors cover a window of the canvas starting at canvas position ``offset``.

    confidence [B, W] float64, -inf off the candidates; probs [B, W, V] float64, softmax of the model's logits;
    ranking/rank [B, W]: positions by decreasing confidence (stable: ties to the lowest position) and inverse.
    """

    confidence: torch.Tensor
    candidates: torch.Tensor  # [B, W] bool
    probs: torch.Tensor
    ranking: torch.Tensor
    rank: torch.Tensor
    offset: int = 0
    block_step: int = 0  # steps already taken in the current block
    block_masks_at_start: torch.Tensor | None = None  # [B] masks in the block when it started
    block_masks: torch.Tensor | None = None  # [B] masks left in the block now
    block_length: int = 1
    dependency: torch.Tensor | None = None  # [B, W, W] attention scores between window positions (DAPD)
    state: dict = field(default_factory=dict)  # per-decode memory of stateful rules (KLASS)
    token_probs: torch.Tensor | None = None  # [B, W] float64 p(x̂) under softmax(logits), whatever the remasking

    @property
    def count(self) -> torch.Tensor:
        return self.candidates.sum(dim=1)  # [B]
