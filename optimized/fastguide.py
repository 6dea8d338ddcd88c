"""FastGuide with sparse recomputation (spec/guidance.md GF3): Algorithm 1 where each recomputation refreshes
K/V and queries only inside windows of radius w around the last committed token and the query that scores
the next candidate (LLaDA: the candidate itself; Dream: one position left), against the step's K/V cache.

With ``measure_tv`` the exact logits are computed as well (a full forward per candidate) and the total
variation between the sparse and exact guided distributions is returned in ``stats`` (Tier A, seed 000
Figure 9b); it costs what exact recomputation costs and is for measurement only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from veridec.guidance.fastguide import FastGuideParams, hybrid_step, start
from veridec.guidance.guide import GuidanceParams
from veridec.trace import Decoded


class SparseRecompute:
    """The step's full pass fills a K/V cache; each candidate's logits come from a windowed cached forward."""

    def __init__(self, model, attention_mask, prompt_len: int, window: int, counters, measure_tv: bool = False):
        self.model, self.attention_mask, self.prompt_len, self.counters = model, attention_mask, prompt_len, counters
        self.window, self.measure_tv, self.tvs = window, measure_tv, []

    def full(self, x: torch.Tensor) -> torch.Tensor:
        out, self.cache = self.model.prefill(x, self.attention_mask)
        self.counters.add_forward(rows=x.shape[0], queries=x.shape[1])
        return out.logits[:, self.prompt_len:]

    def candidate(self, x: torch.Tensor, previous: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] of each row's candidate ``slot`` after committing at ``previous`` (response indices)."""
        query = self.prompt_len + slot - self.model.logit_shift  # [B] the query scoring the candidate
        positions = window_positions(self.prompt_len + previous, query, self.window, x.shape[1])  # [B, n]
        raw = self.model.forward_cached(x.gather(1, positions), positions, self.cache, check=False).logits  # [B, n, V]
        self.counters.add_forward(rows=x.shape[0], queries=positions.shape[1], full=False)
        where = (positions == query[:, None]).float().argmax(dim=1)  # [B] the query's index in the window
        logits = raw[torch.arange(x.shape[0], device=x.device), where]
        if self.measure_tv:
            exact = self.model(x, attention_mask=self.attention_mask).logits[torch.arange(x.shape[0], device=x.device),
                                                                               self.prompt_len + slot]
            self.tvs.append((logits, exact))
        return logits


def window_positions(changed: torch.Tensor, query: torch.Tensor, radius: int, length: int) -> torch.Tensor:
    """[B, n] sorted canvas positions: the union of |p - changed| <= radius and |p - query| <= radius, padded per
    row with the next-nearest positions to the query so every row has the same count n (the largest union)."""
    positions = torch.arange(length, device=changed.device)[None]  # [1, L]
    member = ((positions - changed[:, None]).abs() <= radius) | ((positions - query[:, None]).abs() <= radius)
    n = int(member.sum(dim=1).max())
    score = torch.where(member, -1, (positions - query[:, None]).abs())  # members first, then nearest
    chosen = torch.sort(score, dim=1, stable=True).indices[:, :n]
    return chosen.sort(dim=1).values


@torch.no_grad()
def generate(model, prompt: torch.Tensor, reward, prompt_texts: list[str], attention_mask=None, *,
             gen_length: int = 128, params: FastGuideParams = FastGuideParams(),
             guidance: GuidanceParams = GuidanceParams(), generator: torch.Generator | None = None,
             measure_tv: bool = False, stats: dict | None = None) -> Decoded:
    """Decode ``prompt`` [B, P] with FastGuide, sparse recomputation (window radius ``params.window``); batches
    of trajectories share each call. ``stats`` receives "tv_mean" and "tv_max" when ``measure_tv``."""
    x, attention_mask, bound, trace = start("fastguide-sparse", model, prompt, reward, prompt_texts, attention_mask,
                                           gen_length, params, guidance, generator)
    mask_id, prompt_len = model.special.mask_id, prompt.shape[1]
    recomputer = SparseRecompute(model, attention_mask, prompt_len, params.window, trace.counters, measure_tv)
    while (x[:, prompt_len:] == mask_id).any():
        x = hybrid_step(x, prompt_len, recomputer, bound, params, guidance, mask_id, trace, generator)
    if stats is not None and recomputer.tvs:
        tvs = torch.cat([(F.softmax(a.double(), -1) - F.softmax(b.double(), -1)).abs().sum(-1) / 2
                         for a, b in recomputer.tvs])
        stats.update(tv_mean=tvs.mean().item(), tv_max=tvs.max().item(), candidates=len(tvs))
    return Decoded(x, trace)
