"""What every decoding rule shares: the step's result, the proposal (LLaDA's Gumbel-max), LLaDA's quota
formula, ranking and top-k selection with a stated tie rule, and the semi-autoregressive blocks' check (the other
argument checks: ``veridec.checks``)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..checks import check_range
from .view import StepView

TIES = ("lowest", "torch")
REMASKING = ("low_confidence", "random")


class RankedSelection(NamedTuple):
    """A step's commits left on the device (no host read): ``selected`` [B, W] bool and the ``ranking`` [B, W]
    whose order they are recorded in; ``ranked_positions(ranking, selected)`` is the host list."""

    ranking: torch.Tensor
    selected: torch.Tensor


class StepResult(NamedTuple):
    """One step of any rule: the next canvas and what the trace records of the decision."""

    x: torch.Tensor  # [B, W] the canvas (or window of it) after this step
    confidence: torch.Tensor  # [B, W] ranking score (-inf for non-candidates)
    order: list[list[int]] | RankedSelection  # per row, the selected positions in rank order (or on the device)
    choice_logits: torch.Tensor  # [B, W, V] the scores the token choice was an argmax of
    view: StepView | None = None  # what a parallel rule saw (probabilities, confidences, their ranking)


# ------------------------------------------------------------------------------------------ the proposal
class Proposal(NamedTuple):
    """A step's proposed tokens (spec/sequential.md SQ1.4): x̂ = argmax of the Gumbel-perturbed logits."""

    noisy: torch.Tensor  # [B, W, V] the perturbed scores (the logits tensor itself at temperature 0)
    tokens: torch.Tensor  # [B, W] x̂, first maximum on ties
    choice_logits: torch.Tensor  # [B, W, V] the logits the choice was an argmax of (log of ``noisy``)


def gumbel_noisy_logits(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None):
    """LLaDA's Gumbel-max in float64: exp(l) / (-log u)^T, u ~ U(0, 1) of shape [..., V]; argmax samples
    softmax(l / T). Temperature 0 returns ``logits`` itself (the same tensor object, as the official code:
    spec/sequential.md SQ1.6 relies on it)."""
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)
    return logits.exp() / (-torch.log(noise)) ** temperature


def propose(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> Proposal:
    """logits [B, W, V] -> the proposal every LLaDA-style rule commits from."""
    noisy = gumbel_noisy_logits(logits, temperature, generator)
    return Proposal(noisy, noisy.argmax(dim=-1), logits if temperature == 0 else noisy.log())


def token_probability(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """probs [B, W, V], tokens [B, W] -> p(token) [B, W]."""
    return probs.gather(-1, tokens[..., None])[..., 0]


def remasking_score(token_probs: torch.Tensor, remasking: str, generator: torch.Generator | None = None):
    """What candidates are ranked by (SQ1.6): p(x̂) ("low_confidence") or one U(0, 1) draw per position
    ("random"), [B, W]."""
    if remasking == "low_confidence":
        return token_probs
    return torch.rand(token_probs.shape, device=token_probs.device, generator=generator)


def entropy(probs: torch.Tensor, floor: float | None = None) -> torch.Tensor:
    """probs [..., V] -> each distribution's entropy -sum p log p in nats [...]. 0 log 0 = 0: the logarithm is
    taken of max(p, ``floor``), by default the dtype's smallest normal number (SDAR's entropy_bounded, BD6.3);
    EB-Sampler (spec/parallel.md P6) keeps its 1e-300 and EntRGi's weight (spec/guidance.md G4) its 1e-30, floors
    that decide their results' last bits."""
    floor = torch.finfo(probs.dtype).tiny if floor is None else floor
    return -(probs * probs.clamp_min(floor).log()).sum(dim=-1)


def dream_negative_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Dream's ``alg="entropy"`` confidence [...] of probs [..., V] (spec/sequential.md SQ2.5): the official
    sum p log(p + 1e-10), a negative entropy whose 1e-10 shifts every term (kept: it ranks the positions)."""
    return torch.sum(probs * torch.log(probs + 1e-10), dim=-1)


# --------------------------------------------------------------------------------- counts and selection
def quota(masks: torch.Tensor, steps: int, index) -> torch.Tensor:
    """LLaDA's tokens per step (spec/sequential.md SQ1.3): k_i = floor(M / S) + [i < M mod S] for M masks
    spread over S steps; ``index`` i an int or a tensor that broadcasts against ``masks``."""
    masks = masks.long()
    return masks // steps + (index < masks % steps).long()


def top_k_indices(scores: torch.Tensor, k: int, ties: str, largest: bool = True) -> torch.Tensor:
    """Indices of the k largest (``largest=False``: smallest) entries of a 1-D ``scores``, best first.

    ties="lowest": equal scores rank by lowest index (spec N5), via a stable sort.
    ties="torch": ``torch.topk``'s own (implementation-defined) choice among equal scores, which is what the
    official LLaDA, Dream, WINO and SDAR code get; use it to reproduce them bit for bit when exact ties occur
    (e.g. bf16 confidences).
    """
    if ties == "torch":
        return torch.topk(scores, k, largest=largest).indices
    return torch.sort(scores, descending=largest, stable=True).indices[:k]


def top_k_mask(scores: torch.Tensor, k: int, ties: str) -> torch.Tensor:
    """[N] bool: True at ``top_k_indices(scores, k, ties)``."""
    return torch.zeros_like(scores, dtype=torch.bool).index_fill(0, top_k_indices(scores, k, ties), True)


def stable_ranking(score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions by decreasing score [B, W] (ties: lowest position first, N5) and each position's rank."""
    ranking = torch.sort(score, dim=1, descending=True, stable=True).indices
    return ranking, inverse_permutation(ranking)


def torch_ranking(score: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The official code's order: torch.topk(count) row by row, unranked positions after (ties="torch")."""
    length = score.shape[1]
    ranking = torch.stack([torch.cat([top, _rest(top, length)]) for top in
                           (top_k_indices(row, int(k), "torch") for row, k in zip(score, counts))])
    return ranking, inverse_permutation(ranking)


def rank_positions(score: torch.Tensor, ties: str = "lowest",
                   counts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``stable_ranking``, or with ties="torch" the official ``torch_ranking`` of the top ``counts``."""
    return stable_ranking(score) if ties == "lowest" else torch_ranking(score, counts)


def select_top(ranking: torch.Tensor, rank: torch.Tensor, counts: torch.Tensor,
               candidates: torch.Tensor) -> tuple[torch.Tensor, list[list[int]]]:
    """The ``counts`` [B] first-ranked ``candidates`` [B, W] per row -> (selected [B, W] bool, the selected
    positions per row in rank order)."""
    selected = (rank < counts[:, None]) & candidates
    return selected, ranked_positions(ranking, selected)


def ranked_positions(ranking: torch.Tensor, selected: torch.Tensor) -> list[list[int]]:
    """Per row, the ``selected`` [B, W] positions in ``ranking`` [B, W] order (one host read for the batch)."""
    in_order = selected.gather(1, ranking)  # [B, W] whether the position ranked r is selected
    rankings, keeps = torch.stack([ranking, in_order.long()]).tolist()
    return [[p for p, keep in zip(r, k) if keep] for r, k in zip(rankings, keeps)]


def inverse_permutation(ranking: torch.Tensor) -> torch.Tensor:
    batch, length = ranking.shape
    positions = torch.arange(length, device=ranking.device).expand(batch, -1)
    return torch.empty_like(ranking).scatter_(1, ranking, positions)


def _rest(top: torch.Tensor, length: int) -> torch.Tensor:
    keep = torch.ones(length, dtype=torch.bool, device=top.device)
    keep[top] = False
    return torch.arange(length, device=top.device)[keep]


# ------------------------------------------------------------------------------------------- the checks
def check_blocks(gen_length: int, block_length: int, steps: int, steps_split: bool = True) -> None:
    """Semi-autoregressive blocks (SQ1.2): gen_length a multiple of block_length, steps >= 1 and (when the
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
    """Mixin for parameter classes with ``gen_length``, ``block_length`` and ``steps`` (SQ1.2)."""

    @property
    def num_blocks(self) -> int:
        return self.gen_length // self.block_length

    @property
    def steps_per_block(self) -> int:
        return self.steps // self.num_blocks
