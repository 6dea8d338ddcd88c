"""Fast-dLLM's confidence-aware parallel rule (NVlabs/Fast-dLLM llada/generate.py ``get_transfer_index``).

spec/fastdllm.md. In threshold mode a step commits the most confident candidate and every other candidate
whose confidence passes the threshold (``c >= threshold`` as the official code; ``inclusive=False`` gives the
paper's strict ``c > threshold``). Without a threshold it commits a quota per step (LLaDA's schedule).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .common import TIES, BlockSchedule, check_blocks, check_choice, check_range, gumbel_noisy_logits, top_k_indices
from .llada import REMASKING, LLaDAParams, StepResult, transfer_schedule


@dataclass(frozen=True)
class FastDLLMParams(BlockSchedule):
    steps: int = 128
    gen_length: int = 128
    block_length: int = 128
    temperature: float = 0.0
    remasking: str = "low_confidence"
    threshold: float | None = None
    inclusive: bool = True
    ties: str = "lowest"

    def __post_init__(self):
        check_blocks(self.gen_length, self.block_length, self.steps)
        check_range("temperature", self.temperature, low=0)
        check_choice("remasking", self.remasking, REMASKING)
        if self.threshold is not None:
            check_range("threshold", self.threshold, low=0, high=1, low_open=True)
        check_choice("ties", self.ties, TIES)


def block_quota(mask_counts: torch.Tensor, params: FastDLLMParams) -> torch.Tensor | None:
    """Quota mode: LLaDA's schedule for a block with ``mask_counts`` [B] masks, [B, steps_per_block]
    (S1.3); threshold mode: None."""
    if params.threshold is not None:
        return None
    return transfer_schedule(mask_counts, LLaDAParams(steps=params.steps, gen_length=params.gen_length,
                                                      block_length=params.block_length))


def quota_at(schedule: torch.Tensor | None, step: int) -> torch.Tensor | None:
    """The quota [B] of a block's ``step``; the last quota repeats if a block outlives its schedule (F3)."""
    return None if schedule is None else schedule[:, min(step, schedule.shape[1] - 1)]


def passes(confidence: torch.Tensor, threshold: float, inclusive: bool) -> torch.Tensor:
    return confidence >= threshold if inclusive else confidence > threshold


def fastdllm_step(logits: torch.Tensor, x: torch.Tensor, candidates: torch.Tensor, params: FastDLLMParams,
                  num_transfer: torch.Tensor | None = None, generator: torch.Generator | None = None) -> StepResult:
    """One step. logits [B, L, V]; candidates [B, L] bool (masked positions the step may commit);
    num_transfer [B] the quota (quota mode only)."""
    noisy = gumbel_noisy_logits(logits, params.temperature, generator)
    x0 = noisy.argmax(dim=-1)  # [B, L]
    if params.remasking == "low_confidence":
        x0_p = F.softmax(logits.to(torch.float64), dim=-1).gather(-1, x0[..., None])[..., 0]  # float64
    else:
        x0_p = torch.rand(x0.shape, device=x0.device, generator=generator)
    x0 = torch.where(candidates, x0, x)
    confidence = torch.where(candidates, x0_p, -torch.inf)
    counts = candidates.sum(dim=1) if params.threshold is not None else num_transfer  # [B]
    ranking, rank = _ranking(confidence, counts, params.ties)  # [B, L] each
    selected = rank < counts[:, None]
    if params.threshold is not None:  # the most confident candidate is always committed
        selected &= passes(confidence, params.threshold, params.inclusive) | (rank == 0)
    new_x = torch.where(selected, x0, x)
    order = [r[s[r]].tolist() for r, s in zip(ranking, selected)]  # committed positions in rank order
    choice_logits = logits if params.temperature == 0 else noisy.log()
    return StepResult(new_x, confidence, order, choice_logits)


def _ranking(confidence: torch.Tensor, counts: torch.Tensor, ties: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions by decreasing confidence [B, L] and each position's rank [B, L]. ties="lowest": one stable
    sort of all rows; ties="torch": torch.topk row by row (the official order), unranked positions last."""
    batch, length = confidence.shape
    if ties == "torch":
        ranking = torch.stack([torch.cat([top, _rest(top, length)]) for top in
                               (top_k_indices(c, int(k), "torch") for c, k in zip(confidence, counts))])
    else:
        ranking = torch.sort(confidence, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(ranking).scatter_(1, ranking, torch.arange(length, device=ranking.device).expand(batch, -1))
    return ranking, rank


def _rest(top: torch.Tensor, length: int) -> torch.Tensor:
    keep = torch.ones(length, dtype=torch.bool, device=top.device)
    keep[top] = False
    return torch.arange(length, device=top.device)[keep]
