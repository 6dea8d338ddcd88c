"""Block diffusion's step, SDAR / TraDo style (spec/block_diffusion.md BD3-BD6): sample every position of the
block, then commit masked positions by the remasking strategy under the block's transfer schedule.

Shared by the reference and the optimized decoder. Where the published ``block_diffusion_generate`` fails or
overwrites (temperature 0, a quota larger than the masks left, ``entropy_bounded``), this rule does what the
code intends (BD6): greedy at temperature 0, never more commits than masks, a real entropy bound;
``official_overwrites`` says where the published code would differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_choice, check_integer, check_range
from .common import TIES, entropy, top_k_mask
from ..trace import RowStep
from .filters import top_k_filter, top_p_filter

STRATEGIES = ("sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded")
AFTER_SCHEDULE = ("commit", "leave")  # masks left past the schedule: one more step commits them, or they stay


@dataclass(frozen=True)
class SDARParams:
    """``block_diffusion_generate``'s settings (official names and defaults), validated on construction."""

    gen_length: int = 128
    block_length: int = 8
    denoising_steps: int = 8
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    remasking_strategy: str = "low_confidence_dynamic"
    confidence_threshold: float = 0.85
    eb_threshold: float | None = None
    stopping_criteria_idx: tuple[int, ...] | None = None
    ties: str = "lowest"
    after_schedule: str = "commit"  # BD6.2 (veridec's intent) or "leave": LLaDA2.0's loop (BD12)

    def __post_init__(self):
        for name in ("gen_length", "block_length", "denoising_steps"):
            check_integer(name, getattr(self, name), 1)
        check_integer("top_k", self.top_k, 0)
        check_range("temperature", self.temperature, low=0)
        check_range("top_p", self.top_p, low=0, high=1, low_open=True)
        check_range("confidence_threshold", self.confidence_threshold)
        check_choice("remasking_strategy", self.remasking_strategy, STRATEGIES)
        check_choice("ties", self.ties, TIES)
        check_choice("after_schedule", self.after_schedule, AFTER_SCHEDULE)
        if self.remasking_strategy == "entropy_bounded":
            if self.eb_threshold is None:
                raise ValueError("eb_threshold must be a number > 0 with remasking_strategy='entropy_bounded'")
            check_range("eb_threshold", self.eb_threshold, low=0, low_open=True)
        object.__setattr__(self, "stopping_criteria_idx", check_stops(self.stopping_criteria_idx))

    @property
    def schedule(self) -> list[int]:
        return transfer_schedule(self.block_length, self.denoising_steps)


def check_stops(stops) -> tuple[int, ...] | None:
    """``stopping_criteria_idx``: None or token ids >= 0 -> None or a tuple (BD2)."""
    if stops is None:
        return None
    if isinstance(stops, (str, bytes)) or not hasattr(stops, "__iter__"):
        raise ValueError(f"stopping_criteria_idx must be None or a list of token ids, got {stops!r}")
    stops = tuple(stops)
    for token in stops:
        check_integer("stopping_criteria_idx entry", token, 0)
    return stops


def transfer_schedule(block_length: int, steps: int) -> list[int]:
    """BD3: tokens to commit at each of a block's ``steps`` steps: b // S, the first b mod S steps one more."""
    return [block_length // steps + (i < block_length % steps) for i in range(steps)]


# ------------------------------------------------------------------------------------------------ sampling
def filtered_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """BD4: logits [N, V] divided by the temperature (unless 1), then top-k (every token tied with the k-th
    kept), then top-p (the smallest prefix of the sorted distribution whose mass exceeds p, the first always
    kept), as the official ``sample_with_temperature_topk_topp``; banned tokens are -inf."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_k > 0:
        logits = top_k_filter(logits, top_k)
    if top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    return logits


def sample_block(logits: torch.Tensor, temperature: float, top_k: int, top_p: float,
                 generator: torch.Generator | None = None,
                 banned: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """logits [b, V] of one row's block -> (x0 [b], x0_p [b], probs [b, V]) for every position, masked or not.
    Temperature > 0: one ``torch.multinomial`` draw per position from the filtered distribution, x0_p its
    probability there (BD4). Temperature 0 (BD6.1): x0 the argmax of the logits (lowest id on ties), x0_p its
    probability under softmax(logits) (unscaled, unfiltered: the confidence a greedy rule ranks by).
    ``banned``: a token given the logit -inf first (BD6.2: the mask token past the schedule)."""
    if banned is not None:
        logits = logits.clone()
        logits[:, banned] = -math.inf
        if not torch.isfinite(logits).any(dim=-1).all():
            raise ValueError(f"a position has no finite logit besides token {banned}: nothing to draw there")
    if temperature == 0:
        probs = F.softmax(logits, dim=-1)  # [b, V]
        x0 = _argmax_lowest(logits)
    else:
        probs = F.softmax(filtered_logits(logits, temperature, top_k, top_p), dim=-1)  # [b, V]
        x0 = torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
    return x0, probs.gather(-1, x0[:, None])[:, 0], probs


def _argmax_lowest(logits: torch.Tensor) -> torch.Tensor:
    """argmax over the last axis, the lowest index among equal maxima (spec SQ0.4)."""
    best = logits.max(dim=-1, keepdim=True).values
    ids = torch.arange(logits.shape[-1], device=logits.device)
    return torch.where(logits == best, ids, logits.shape[-1]).min(dim=-1).values


# ----------------------------------------------------------------------------------------------- selection
def select(params: SDARParams, masked: torch.Tensor, x0_p: torch.Tensor, probs: torch.Tensor,
           quota: int) -> torch.Tensor:
    """BD5/BD6: which positions [b] (bool) of one row's block commit at a schedule step, never more than its masks
    ``masked`` [b]: ``quota`` is capped at the masks left. (Past the schedule every mask left commits, BD6.2.)"""
    n = min(quota, int(masked.sum()))
    strategy = params.remasking_strategy
    if strategy == "sequential":
        return masked & (masked.cumsum(0) <= n)  # the first n masked positions
    confidence = torch.where(masked, x0_p, torch.full_like(x0_p, -math.inf))  # [b]
    if strategy == "entropy_bounded":
        return _entropy_bounded(masked, entropy(probs), params.eb_threshold, params.ties)
    if strategy == "low_confidence_dynamic":
        high = confidence > params.confidence_threshold  # strict, as published
        if int(high.sum()) >= n:
            return high
    return top_k_mask(confidence, n, params.ties)


def _entropy_bounded(masked: torch.Tensor, entropy: torch.Tensor, bound: float, ties: str) -> torch.Tensor:
    """BD6.3: the masked positions by increasing entropy (lowest position first on ties); commit the k whose
    running sum stays below ``bound``, at least one."""
    scores = torch.where(masked, entropy, torch.full_like(entropy, math.inf))
    order = torch.sort(scores, stable=True).indices[: int(masked.sum())]
    k = max(1, int((scores[order].cumsum(0) < bound).sum()))
    return torch.zeros_like(masked).index_fill(0, order[:k], True)


def official_select(params: SDARParams, masked: torch.Tensor, x0_p: torch.Tensor, step: int) -> torch.Tensor:
    """BD10: the published selection at schedule step ``step``, defects included: the quota uncapped,
    ``sequential`` the range [first mask, first + n) whatever it holds, the others ``torch.topk`` over confidences
    that are -inf off the masks (so an over-quota step picks unmasked positions). Raises IndexError past the
    schedule, as the published loop does (BD7.4)."""
    if step >= params.denoising_steps:
        raise IndexError(f"index {step} is out of bounds for dimension 0 with size {params.denoising_steps} (the "
                         "published loop past its schedule, BD7.4)")
    n = params.schedule[step]
    chosen = torch.zeros_like(masked)
    if params.remasking_strategy == "sequential":
        first = int(masked.nonzero()[0])
        chosen[first:first + n] = True
        return chosen
    confidence = torch.where(masked, x0_p, torch.full_like(x0_p, -math.inf))  # [b]
    if params.remasking_strategy == "low_confidence_dynamic":
        high = confidence > params.confidence_threshold
        if int(high.sum()) >= n:
            return high
    return top_k_mask(confidence, n, "torch")


def official_overwrites(params: SDARParams, masked: torch.Tensor, step: int) -> bool:
    """BD7.3: whether the published code's selection at schedule step ``step`` writes a position that is not
    masked: a quota above the masks left under low_confidence_static (and _dynamic, whose threshold branch
    then cannot hold), or a sequential range [first mask, first + quota) that runs over a committed position."""
    quota, count = params.schedule[step], int(masked.sum())
    if params.remasking_strategy == "sequential":
        first = int(masked.nonzero()[0])
        return not bool(masked[first:first + quota].all())
    return params.remasking_strategy != "entropy_bounded" and quota > count


# ----------------------------------------------------------------------------------------------- the trace
def row_record(masked: torch.Tensor, transfer: torch.Tensor, x0: torch.Tensor, x0_p: torch.Tensor,
               logits: torch.Tensor, offset: int, mask_id: int, keep_logits: bool = False) -> RowStep:
    """One row's part of a step record (``veridec.trace.RowStep``): the positions committed (masked, selected, and
    not drawn as the mask token, which leaves them masked: BD6.2), as canvas positions (block position + ``offset``)
    by decreasing confidence (lowest position first on ties), their tokens, confidences x0_p, logit margins (top1 -
    top2 of the raw logits [b, V]), and the selection gap: the weakest commit's confidence minus the strongest mask
    left's (inf when none is left); with ``keep_logits`` also the raw logits [n][V] at those positions (else
    None)."""
    committed = transfer & masked & (x0 != mask_id)  # [b]
    chosen = committed.nonzero().flatten()
    chosen = chosen[torch.sort(-x0_p[chosen].double(), stable=True).indices]
    top2 = logits[chosen].double().topk(min(2, logits.shape[-1]), dim=-1).values  # [n, 2]
    left = masked & ~committed
    weakest = x0_p[chosen].double().min().item() if chosen.numel() else math.inf
    strongest = x0_p[left].double().max().item() if left.any() else -math.inf
    return RowStep([int(p) + offset for p in chosen], x0[chosen].tolist(), x0_p[chosen].double().tolist(),
                   (top2[:, 0] - top2[:, -1]).tolist(), weakest - strongest,
                   logits[chosen].float().tolist() if keep_logits else None)
