"""LLaDA's decoding rule (ML-GSAI/LLaDA generate.py semantics), shared by the reference and optimized paths.

spec/sequential.md SQ1. The rule maps one step's logits and canvas to the next canvas; how the logits were
obtained (full forward, cache) is the caller's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_choice, check_range
from ..models.interface import SpecialTokens
from .common import (REMASKING, TIES, BlockSchedule, StepResult, check_blocks, propose, quota, rank_positions,
                     remasking_score, select_top, token_probability)


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
    """Tokens to commit per row and step of one block, [B, n_steps] (SQ1.3).

    Official schedule: ``quota`` k_i = floor(M / S) + [i < M mod S] over S = steps per block. With
    ``tokens_per_step`` = k: k per step, the last step taking the remainder, ceil(max M / k) steps.
    """
    counts = mask_counts.long()[:, None]  # [B, 1]
    if params.tokens_per_step is None:
        steps = params.steps_per_block
        return quota(counts, steps, torch.arange(steps, device=counts.device)[None])  # [B, S]
    k = params.tokens_per_step
    n_steps = math.ceil(int(counts.max()) / k)  # 0 for a block without masks: no step, no forward
    done_before = k * torch.arange(n_steps, device=counts.device)[None]  # [1, n]
    return (counts - done_before).clamp(0, k)


def llada_step(logits: torch.Tensor, x: torch.Tensor, *, block_end: int, num_transfer: torch.Tensor,
               params: LLaDAParams, special: SpecialTokens, mask_id: int,
               generator: torch.Generator | None = None) -> StepResult:
    """One step of LLaDA's sampler (SQ1.4-SQ1.7). logits [B, L, V] token-aligned; num_transfer [B].

    Every masked position before ``block_end`` is a candidate; the schedule never asks for more commits than
    there are candidates (a block's quotas sum to its masks, and a position committed as the mask token stays
    a candidate), so the k_i best candidates are what the official top-k over all positions selects."""
    if params.logits_eos_inf:
        logits = logits.clone()  # the edit stays local
        logits[:, :, special.eos_id] = -torch.inf
    proposal = propose(logits, params.temperature, generator)
    probs = F.softmax(official_confidence_logits(logits, params, special), dim=-1)  # in the logits' dtype
    score = remasking_score(token_probability(probs, proposal.tokens), params.remasking, generator)
    candidates = (x == mask_id) & (torch.arange(x.shape[1], device=x.device) < block_end)[None]  # [B, L]
    confidence = torch.where(candidates, score, -torch.inf)
    selected, order = select_top(*rank_positions(confidence, params.ties, num_transfer), num_transfer, candidates)
    return StepResult(torch.where(selected, proposal.tokens, x), confidence, order, proposal.choice_logits)


def official_confidence_logits(logits: torch.Tensor, params: LLaDAParams, special: SpecialTokens) -> torch.Tensor:
    """The logits the confidence softmax reads (SQ1.6): the official chained assignment
    ``logits_with_noise[:, :, eos] = logits[:, :, eot] = -inf`` runs after the proposal, so it sets EoT to -inf
    and, at temperature 0 only (where the noisy logits are the logits tensor itself), EOS too."""
    if not params.confidence_eos_eot_inf:
        return logits
    edited = logits.clone()
    edited[:, :, special.eot_id] = -torch.inf
    if params.temperature == 0:
        edited[:, :, special.eos_id] = -torch.inf
    return edited
