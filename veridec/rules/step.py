"""One parallel decoding step: propose tokens, score them, let the rule choose (spec/parallel.md P1).

Shared by every reference and optimized decoder; only how ``logits`` were obtained differs between them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import gumbel_noisy_logits, top_k_indices
from .llada import StepResult
from .parallel import COUNT_RULES
from .view import StepView


def parallel_step(rule, logits: torch.Tensor, x: torch.Tensor, candidates: torch.Tensor, *,
                  temperature: float = 0.0, remasking: str = "low_confidence", ties: str = "lowest",
                  generator: torch.Generator | None = None, **view_fields) -> StepResult:
    """logits [B, W, V] token-aligned over a canvas window x [B, W]; candidates [B, W] bool.

    Proposal x̂ = argmax of LLaDA's float64 Gumbel-max (the logits themselves at temperature 0); confidence
    softmax(float64 logits)[x̂] ("low_confidence") or U(0, 1) ("random"). ``view_fields`` go to StepView
    (offset, block bookkeeping, dependency, state)."""
    noisy = gumbel_noisy_logits(logits, temperature, generator)
    x0 = noisy.argmax(dim=-1)  # [B, W], first maximum on ties
    probs = F.softmax(logits.to(torch.float64), dim=-1)  # [B, W, V]
    token_probs = probs.gather(-1, x0[..., None])[..., 0]  # [B, W]
    if remasking == "low_confidence":
        x0_p = token_probs
    else:
        x0_p = torch.rand(x0.shape, device=x0.device, generator=generator)
    x0 = torch.where(candidates, x0, x)
    confidence = torch.where(candidates, x0_p.double(), -torch.inf)  # [B, W]
    ranking, rank = stable_ranking(confidence)
    view = StepView(confidence, candidates, probs, ranking, rank, token_probs=token_probs, **view_fields)
    if isinstance(rule, COUNT_RULES):
        counts = rule.counts(view)  # [B]
        if ties == "torch":
            ranking, rank = torch_ranking(confidence, counts)
        selected = (rank < counts[:, None]) & candidates
        score = confidence
    else:
        selected = rule.select(view)
        score = rule.score(view) if hasattr(rule, "score") else confidence
        ranking, _ = stable_ranking(score)
    new_x = torch.where(selected, x0, x)
    order = [r[s[r]].tolist() for r, s in zip(ranking, selected)]  # committed positions in rank order
    choice_logits = logits if temperature == 0 else noisy.log()
    return StepResult(new_x, score, order, choice_logits)


def stable_ranking(score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions by decreasing score [B, W] (ties: lowest position first, N5) and each position's rank."""
    ranking = torch.sort(score, dim=1, descending=True, stable=True).indices
    return ranking, _inverse(ranking)


def torch_ranking(confidence: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The official code's order: torch.topk(count) row by row, unranked positions after (ties="torch")."""
    length = confidence.shape[1]
    ranking = torch.stack([torch.cat([top, _rest(top, length)]) for top in
                           (top_k_indices(c, int(k), "torch") for c, k in zip(confidence, counts))])
    return ranking, _inverse(ranking)


def _inverse(ranking: torch.Tensor) -> torch.Tensor:
    batch, length = ranking.shape
    positions = torch.arange(length, device=ranking.device).expand(batch, -1)
    return torch.empty_like(ranking).scatter_(1, ranking, positions)


def _rest(top: torch.Tensor, length: int) -> torch.Tensor:
    keep = torch.ones(length, dtype=torch.bool, device=top.device)
    keep[top] = False
    return torch.arange(length, device=top.device)[keep]
