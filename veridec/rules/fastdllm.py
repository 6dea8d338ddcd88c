"""Fast-dLLM's confidence-aware parallel rules (NVlabs/Fast-dLLM llada/generate.py ``get_transfer_index``
and ``get_transfer_index_dynamic``), spec/fastdllm.md FD3 and spec/parallel.md P3-P4.

``FastDLLMParams`` holds the official parameters and picks the rule: ``factor`` given -> the factor rule;
``threshold`` given -> the threshold rule; neither -> LLaDA's quota per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import check_choice, check_range
from .common import REMASKING, TIES, BlockSchedule, StepResult, check_blocks
from .parallel import Factor, Quota, Threshold
from .step import parallel_step


@dataclass(frozen=True)
class FastDLLMParams(BlockSchedule):
    steps: int = 128
    gen_length: int = 128
    block_length: int = 128
    temperature: float = 0.0
    remasking: str = "low_confidence"
    threshold: float | None = None
    factor: float | None = None
    inclusive: bool = True
    last_rank: str = "commit"
    ties: str = "lowest"

    def __post_init__(self):
        check_blocks(self.gen_length, self.block_length, self.steps)
        check_range("temperature", self.temperature, low=0)
        check_choice("remasking", self.remasking, REMASKING)
        if self.threshold is not None and self.factor is not None:
            raise ValueError("give threshold or factor, not both (the official code silently ignores threshold)")
        check_choice("ties", self.ties, TIES)
        self.rule  # validates threshold / factor / last_rank

    @property
    def rule(self):
        if self.factor is not None:
            return Factor(self.factor, self.inclusive, self.last_rank)
        if self.threshold is not None:
            return Threshold(self.threshold, inclusive=self.inclusive)
        return Quota(self.steps_per_block)


def fastdllm_step(logits: torch.Tensor, x: torch.Tensor, candidates: torch.Tensor, params: FastDLLMParams,
                  generator: torch.Generator | None = None, **view_fields) -> StepResult:
    """One step. logits [B, W, V]; candidates [B, W] bool (masked positions the step may commit); quota mode
    needs ``block_step`` and ``block_masks_at_start`` in ``view_fields``."""
    return parallel_step(params.rule, logits, x, candidates, temperature=params.temperature,
                         remasking=params.remasking, ties=params.ties, generator=generator, **view_fields)
