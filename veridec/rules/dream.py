"""Dream's decoding rule (Dream-org ``diffusion_generate``, the per-row version), shared by both paths.

spec/sequential.md SQ2. Logits arrive token-aligned (the model adapter undoes Dream's shift).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_choice, check_range
from .common import TIES, StepResult, dream_negative_entropy, top_k_indices
from .filters import top_k_filter, top_p_filter

ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")


@dataclass(frozen=True)
class DreamParams:
    """``diffusion_generate``'s sampling parameters (official names and defaults) plus ``tokens_per_step``
    (fixed top-k "Conf" baseline: k tokens per step by confidence until no mask is left) and ``ties``."""

    steps: int = 512
    eps: float = 1e-3
    alg: str = "origin"
    alg_temp: float | None = None
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    tokens_per_step: int | None = None
    ties: str = "lowest"

    def __post_init__(self):
        check_range("steps", self.steps, low=1, integer=True)
        check_range("eps", self.eps, low=0, high=1, low_open=True, high_open=True)
        check_choice("alg", self.alg, ALGS)
        if self.alg_temp is not None:
            check_range("alg_temp", self.alg_temp, low=0)
        check_range("temperature", self.temperature, low=0)
        if self.top_p is not None:
            check_range("top_p", self.top_p, low=0, high=1, low_open=True)
        if self.top_k is not None:
            check_range("top_k", self.top_k, low=1, integer=True)
        if self.tokens_per_step is not None:
            check_range("tokens_per_step", self.tokens_per_step, low=1, integer=True)
            if self.alg == "origin":
                raise ValueError("tokens_per_step ranks positions by confidence: use alg maskgit_plus, topk_margin "
                                 "or entropy, not origin")
        check_choice("ties", self.ties, TIES)


def top_p_logits(logits: torch.Tensor, top_p: float, ties: str = "lowest") -> torch.Tensor:
    """Dream's nucleus filter (SQ2.5): ``top_p_filter`` with the dtype's minimum for a dropped token; equal logits
    in the prefix lowest id first (N5), or with ``ties="torch"`` in the official code's unstable ``torch.sort``
    order."""
    return top_p_filter(logits, top_p, torch.finfo(logits.dtype).min, stable=ties == "lowest")


def filtered_probs(logits: torch.Tensor, temperature: float = 0.0, top_p: float | None = None,
                   top_k: int | None = None, ties: str = "lowest") -> torch.Tensor:
    """SQ2.5's distribution [N, V]: divide by T (T > 0), then top-p, then top-k, then softmax."""
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        logits = top_p_logits(logits, top_p, ties)
    if top_k is not None:
        logits = top_k_filter(logits, top_k, torch.finfo(logits.dtype).min)
    return torch.softmax(logits, dim=-1)


def sample_tokens(logits: torch.Tensor, temperature: float = 0.0, top_p: float | None = None,
                  top_k: int | None = None, margin_confidence: bool = False, neg_entropy: bool = False,
                  generator: torch.Generator | None = None, ties: str = "lowest"):
    """logits [N, V] -> (confidence [N], tokens [N]) as Dream's ``sample_tokens`` (SQ2.5).

    Sampling draws exactly what the official ``Categorical(probs).sample()`` draws (one multinomial over the
    renormalised probabilities) but never falls back silently to greedy decoding, as the official bare
    ``except`` does when bf16 probabilities fail Categorical's validation.
    """
    probs = filtered_probs(logits, temperature, top_p, top_k, ties)
    if temperature > 0:  # what Categorical(probs).sample() draws, with an optional generator
        tokens = torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, True, generator=generator)[:, 0]
        confidence = probs.gather(-1, tokens[:, None])[:, 0]
    else:
        confidence, tokens = probs.max(dim=-1)
    if margin_confidence:
        top2 = torch.sort(probs, dim=-1, descending=True).values
        confidence = top2[:, 0] - top2[:, 1]
    if neg_entropy:
        confidence = dream_negative_entropy(probs)
    return confidence, tokens


def dream_step(logits: torch.Tensor, x: torch.Tensor, *, step: int, timesteps: torch.Tensor, params: DreamParams,
               mask_id: int, generator: torch.Generator | None = None) -> StepResult:
    """One step of ``diffusion_generate`` (SQ2.3-SQ2.4). logits [B, L, V] token-aligned; timesteps [steps + 1]."""
    mask_index = x == mask_id
    mask_logits = logits[mask_index]  # [M, V], row-major over (batch, position)
    scheduled = params.tokens_per_step is None
    t, s = (timesteps[step], timesteps[step + 1]) if scheduled else (None, None)
    last = scheduled and step == params.steps - 1
    full_confidence = torch.full(x.shape, -torch.inf, dtype=logits.dtype, device=x.device)
    if params.alg == "origin":
        new_x, order = _origin(x, mask_index, mask_logits, 1 if last else 1 - s / t, params, mask_id, full_confidence,
                               generator)
        return StepResult(new_x, full_confidence, order, logits)
    confidence, x0 = sample_tokens(mask_logits, params.temperature, params.top_p, params.top_k,
                                   margin_confidence=params.alg == "topk_margin",
                                   neg_entropy=params.alg == "entropy", generator=generator, ties=params.ties)
    full_confidence[mask_index] = confidence.to(full_confidence.dtype)
    proposals = torch.full_like(x, mask_id)
    proposals[mask_index] = x0
    k = _transfer_count(mask_index, t, s, last, params)
    counts = mask_index.sum(dim=1).tolist()  # [B]
    new_x = x.clone()
    if k <= 0:
        return StepResult(new_x, full_confidence, [[] for _ in counts], logits)
    if min(counts) >= k:  # the normal case: one batched selection, as the official code
        chosen = _choose(full_confidence, k, params, generator).tolist()  # [B][k]
    else:  # a row has fewer masks than k: clamp, never re-mask committed tokens (SQ2.4, deviation)
        chosen = [_choose(full_confidence[row: row + 1], min(k, c), params, generator)[0].tolist() if c else []
                  for row, c in enumerate(counts)]
    for row, positions in enumerate(chosen):
        new_x[row, positions] = proposals[row, positions]
    return StepResult(new_x, full_confidence, chosen, logits)


def _choose(full_confidence: torch.Tensor, k: int, params: DreamParams, generator) -> torch.Tensor:
    """[B, L] scores -> [B, k] positions: top-k (alg_temp None or 0) or k draws without replacement from
    softmax(score / alg_temp)."""
    if params.alg_temp is None or params.alg_temp == 0:
        return torch.stack([top_k_indices(row, k, params.ties) for row in full_confidence])
    weights = F.softmax(full_confidence / params.alg_temp, dim=-1)
    return torch.multinomial(weights, num_samples=k, generator=generator)


def _transfer_count(mask_index, t, s, last, params) -> int:
    """Official per-step count: int(mean masks per row * (1 - s/t)), everything on the last step (SQ2.4)."""
    if params.tokens_per_step is not None:
        return params.tokens_per_step
    mean_masks = mask_index.sum() / mask_index.shape[0]
    return int(mean_masks) if last else int(mean_masks * (1 - s / t))


def _origin(x, mask_index, mask_logits, p_transfer, params, mask_id, full_confidence, generator):
    """'origin': each masked position is revealed with probability 1 - s/t (SQ2.3)."""
    proposals = torch.full((mask_logits.shape[0],), mask_id, dtype=torch.long, device=x.device)
    reveal = torch.rand(proposals.shape, device=x.device, generator=generator) < p_transfer
    if reveal.any():
        confidence, proposals[reveal] = sample_tokens(mask_logits[reveal], params.temperature, params.top_p,
                                                      params.top_k, generator=generator, ties=params.ties)
        revealed_conf = torch.full(proposals.shape, -torch.inf, dtype=full_confidence.dtype, device=x.device)
        revealed_conf[reveal] = confidence.to(full_confidence.dtype)
        full_confidence[mask_index] = revealed_conf
    new_x = x.clone()
    new_x[mask_index] = proposals
    order = [torch.nonzero(reveal_row).flatten().tolist() for reveal_row in
             _scatter_rows(reveal, mask_index)]
    return new_x, order


def _scatter_rows(flat: torch.Tensor, mask_index: torch.Tensor) -> torch.Tensor:
    """Put a flat [M] bool vector (row-major over masked positions) back on the [B, L] canvas."""
    canvas = torch.zeros_like(mask_index)
    canvas[mask_index] = flat
    return canvas
