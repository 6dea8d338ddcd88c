"""LLaDA's decoding rule (ML-GSAI/LLaDA generate.py semantics), shared by the reference and optimized paths.

spec/sequential.md S1. The rule maps one step's logits and canvas to the next canvas; how the logits were
obtained (full forward, cache) is the caller's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..models.interface import SpecialTokens
from .common import TIES, BlockSchedule, check_blocks, check_choice, check_range, gumbel_noisy_logits, top_k_indices

REMASKING = ("low_confidence", "random")


@dataclass(frozen=True)
class LLaDAParams(BlockSchedule):
    """The official ``generate`` parameters (names and defaults), plus ``tokens_per_step`` (the fixed top-k
    "Conf" baseline: k tokens per step, replacing the ``steps`` schedule) and ``ties``. Validated here."""

    steps: int = 128
    gen_length: int = 128
    block_length: int = 128
    temperature: float = 0.0
    cfg_scale: float = 0.0
    remasking: str = "low_confidence"
    logits_eos_inf: bool = False
    confidence_eos_eot_inf: bool = False
    tokens_per_step: int | None = None
    ties: str = "lowest"

    def __post_init__(self):
        check_blocks(self.gen_length, self.block_length, self.steps, steps_split=self.tokens_per_step is None)
        if self.tokens_per_step is not None:
            check_range("tokens_per_step", self.tokens_per_step, low=1, integer=True)
        check_range("temperature", self.temperature, low=0)
        check_range("cfg_scale", self.cfg_scale, low=0)
        check_choice("remasking", self.remasking, REMASKING)
        check_choice("ties", self.ties, TIES)


def check_special(params: LLaDAParams, special: SpecialTokens) -> None:
    if params.logits_eos_inf and special.eos_id is None:
        raise ValueError("logits_eos_inf needs the model's EOS id (special.eos_id is None)")
    if params.confidence_eos_eot_inf and (special.eos_id is None or special.eot_id is None):
        raise ValueError("confidence_eos_eot_inf needs the model's EOS and EoT ids")


def transfer_schedule(mask_counts: torch.Tensor, params: LLaDAParams) -> torch.Tensor:
    """Tokens to commit per row and step of one block, [B, n_steps] (S1.3).

    Official schedule: k_i = floor(M / S) + [i < M mod S] over S = steps per block. With ``tokens_per_step``
    = k: k per step, the last step taking the remainder, ceil(max M / k) steps.
    """
    counts = mask_counts.long()[:, None]  # [B, 1]
    if params.tokens_per_step is None:
        steps = params.steps_per_block
        index = torch.arange(steps, device=counts.device)[None]  # [1, S]
        return counts // steps + (index < counts % steps).long()
    k = params.tokens_per_step
    n_steps = max(1, math.ceil(int(counts.max()) / k))
    done_before = k * torch.arange(n_steps, device=counts.device)[None]  # [1, n]
    return (counts - done_before).clamp(0, k)


class StepResult(NamedTuple):
    x: torch.Tensor  # [B, L] the canvas after this step
    confidence: torch.Tensor  # [B, L] ranking score (-inf for non-candidates)
    order: list[list[int]]  # per row, the selected positions in rank order
    choice_logits: torch.Tensor  # [B, L, V] the scores the token choice was an argmax of


def llada_step(logits: torch.Tensor, x: torch.Tensor, *, block_end: int, num_transfer: torch.Tensor,
               params: LLaDAParams, special: SpecialTokens, mask_id: int,
               generator: torch.Generator | None = None) -> StepResult:
    """One step of LLaDA's sampler (S1.4-S1.7). logits [B, L, V] token-aligned; num_transfer [B]."""
    logits = logits.clone()  # the edits below stay local
    if params.logits_eos_inf:
        logits[:, :, special.eos_id] = -torch.inf
    noisy = gumbel_noisy_logits(logits, params.temperature, generator)  # aliases logits when T = 0
    x0 = noisy.argmax(dim=-1)  # [B, L], first maximum on ties
    choice_logits = logits.clone() if params.temperature == 0 else noisy.log()
    if params.confidence_eos_eot_inf:  # the official chained assignment, kept with its aliasing (S1.6)
        noisy[:, :, special.eos_id] = -torch.inf
        logits[:, :, special.eot_id] = -torch.inf
    if params.remasking == "low_confidence":
        x0_p = F.softmax(logits, dim=-1).gather(-1, x0[..., None])[..., 0]  # [B, L], in the logits dtype
    else:
        x0_p = torch.rand(x0.shape, device=x0.device, generator=generator)
    x0_p[:, block_end:] = -torch.inf
    mask_index = x == mask_id
    x0 = torch.where(mask_index, x0, x)
    confidence = torch.where(mask_index, x0_p, -torch.inf)
    new_x, order = x.clone(), []
    for row in range(x.shape[0]):
        selected = top_k_indices(confidence[row], int(num_transfer[row]), params.ties)
        new_x[row, selected] = x0[row, selected]
        order.append(selected.tolist())
    return StepResult(new_x, confidence, order, choice_logits)
