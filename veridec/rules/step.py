"""One parallel decoding step: propose tokens, score them, let the rule choose (spec/parallel.md P1).

Shared by every reference and optimized decoder; only how ``logits`` were obtained differs between them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import (RankedSelection, StepResult, propose, rank_positions, ranked_positions, remasking_score,
                     stable_ranking, token_probability)
from .parallel import COUNT_RULES
from .view import StepView


def parallel_step(rule, logits: torch.Tensor, x: torch.Tensor, candidates: torch.Tensor, *,
                  temperature: float = 0.0, remasking: str = "low_confidence", ties: str = "lowest",
                  generator: torch.Generator | None = None, **view_fields) -> StepResult:
    """logits [B, W, V] token-aligned over a canvas window x [B, W]; candidates [B, W] bool.

    Proposal x̂ = argmax of LLaDA's float64 Gumbel-max (the logits themselves at temperature 0); confidence
    softmax(float64 logits)[x̂] ("low_confidence") or U(0, 1) ("random"). ``view_fields`` go to StepView
    (offset, block bookkeeping, dependency, state)."""
    proposal = propose(logits, temperature, generator)
    return decide(rule, logits, x, candidates, proposal.tokens, proposal.choice_logits, remasking=remasking,
                  ties=ties, generator=generator, **view_fields)


def decide(rule, logits: torch.Tensor, x: torch.Tensor, candidates: torch.Tensor, tokens: torch.Tensor,
           choice_logits: torch.Tensor, *, remasking: str = "low_confidence", ties: str = "lowest",
           generator: torch.Generator | None = None, on_device: bool = False, **view_fields) -> StepResult:
    """The step after its proposal: ``tokens`` [B, W] proposed (by ``propose``, or every proposal in turn when
    a law is enumerated: proofs_checks.laws) are scored and the rule commits some of them. ``on_device``: the
    order stays a ``RankedSelection`` on the device (no host read; the optimized loop reads it once per block)."""
    view = step_view(logits, tokens, candidates, remasking, generator, **view_fields)
    if isinstance(rule, COUNT_RULES):
        counts = rule.counts(view)  # [B]
        ranking, rank = (view.ranking, view.rank) if ties == "lowest" else rank_positions(view.confidence, ties, counts)
        selected = (rank < counts[:, None]) & candidates  # ``select_top``'s selection
        score = view.confidence
    else:
        selected = rule.select(view)
        score = rule.score(view) if hasattr(rule, "score") else view.confidence
        ranking = stable_ranking(score)[0]
    order = RankedSelection(ranking, selected) if on_device else ranked_positions(ranking, selected)
    return StepResult(torch.where(selected, tokens, x), score, order, choice_logits, view)


def step_view(logits: torch.Tensor, tokens: torch.Tensor, candidates: torch.Tensor, remasking: str = "low_confidence",
              generator: torch.Generator | None = None, **view_fields) -> StepView:
    """What a rule sees of proposals ``tokens`` [B, W] under ``logits`` [B, W, V]: float64 probabilities,
    the candidates' confidences (-inf elsewhere) and their stable ranking."""
    probs = F.softmax(logits.to(torch.float64), dim=-1)  # [B, W, V]
    token_probs = token_probability(probs, tokens)  # [B, W]
    score = remasking_score(token_probs, remasking, generator)
    confidence = torch.where(candidates, score.double(), -torch.inf)  # [B, W]
    ranking, rank = stable_ranking(confidence)
    return StepView(confidence, candidates, probs, ranking, rank, token_probs=token_probs, **view_fields)
