"""Parallel decoding rules: which masked positions one step commits (spec/parallel.md P1-P9).

Every rule sees the same ``StepView`` of one step (proposed tokens, their confidences, the model's predictive
distribution, optionally attention) and returns the positions to commit. Two kinds:

- count rules (``TopK``, ``Threshold``, ``Factor``, ``Quota``) commit the ``count`` most confident candidates,
  so they can reproduce the official code's ``torch.topk`` order (ties="torch");
- set rules (``LocalLeap``, ``EntropyBounded``, ``KLASS``, ``DAPD``) return a mask; commits are recorded in the
  rule's ranking order (confidence, or entropy for EB-Sampler), ties to the lowest position.

Every rule commits at least one candidate per step when there is one. Rules are frozen dataclasses whose
``__post_init__`` validates every hyperparameter with its allowed range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_range
from .common import entropy, quota
from .view import StepView


def passes(value: torch.Tensor, bound: float, inclusive: bool) -> torch.Tensor:
    return value >= bound if inclusive else value > bound


# ------------------------------------------------------------------------------------------- count rules
@dataclass(frozen=True)
class TopK:
    """Conf top-k: the k most confident candidates (P2). k = 1 is sequential decoding."""

    k: int = 1
    name = "topk"

    def __post_init__(self):
        check_range("k", self.k, low=1, integer=True)

    def counts(self, view: StepView) -> torch.Tensor:
        return view.count.clamp(max=self.k)


def certified(view: StepView, selected: torch.Tensor) -> torch.Tensor:
    """TC1 (spec/theorems.md): of ``selected`` [B, W], the longest prefix in ranking order whose errors
    e = 1 - p(x̂) satisfy sum(e) + max(e) < 1 (T1), and always the first selected position."""
    in_order = selected.gather(1, view.ranking)  # [B, W]
    errors = torch.where(in_order, 1 - view.token_probs.gather(1, view.ranking), 0.0)
    keep = in_order & (errors.cumsum(dim=1) + errors.cummax(dim=1).values < 1)
    first = in_order & (in_order.cumsum(dim=1) == 1)
    return torch.zeros_like(selected).scatter(1, view.ranking, keep | first)


@dataclass(frozen=True, kw_only=True)
class LevelOptions:
    """Keyword options of the rules that compare confidences with levels and can be certified (P3, P5):
    ``inclusive``: c >= level passes (False: c > level, the papers' wording); ``certified``: commit only the
    prefix, in confidence order, that the general certificate allows (spec/theorems.md TC1)."""

    inclusive: bool = True
    certified: bool = False


@dataclass(frozen=True)
class Threshold(LevelOptions):
    """Fast-dLLM threshold (P3): the top-1 and every candidate with c >= threshold (``LevelOptions``).
    Passing candidates form a prefix of the ranking."""

    threshold: float = 0.9
    name = "threshold"

    def __post_init__(self):
        check_range("threshold", self.threshold, low=0, high=1, low_open=True)

    def counts(self, view: StepView) -> torch.Tensor:
        passing = (passes(view.confidence, self.threshold, self.inclusive) & view.candidates).sum(dim=1)
        count = torch.minimum(passing.clamp(min=1), view.count)
        if self.certified:
            count = certified(view, (view.rank < count[:, None]) & view.candidates).sum(dim=1)
        return count


@dataclass(frozen=True)
class Factor:
    """Fast-dLLM factor rule (P4), NVlabs/Fast-dLLM ``get_transfer_index_dynamic``: over confidences sorted
    c_1 >= ... >= c_N, rank n >= 2 passes when c_n >= 1 - factor / (n + 1) (the paper: (n+1)(1-c_n) < factor,
    i.e. strict; ``inclusive=False``). The leading run of passing ranks is committed (rank 1 always).
    ``last_rank``: the official code commits all N when the first failure is the last rank ("commit");
    "reject" stops there like at every other rank."""

    factor: float = 1.0
    inclusive: bool = True
    last_rank: str = "commit"
    name = "factor"

    def __post_init__(self):
        check_range("factor", self.factor, low=0, low_open=True)
        if self.last_rank not in ("commit", "reject"):
            raise ValueError(f"last_rank must be one of ['commit', 'reject'], got {self.last_rank!r}")

    def counts(self, view: StepView) -> torch.Tensor:
        sorted_conf = view.confidence.gather(1, view.ranking)  # [B, W] descending, -inf past N
        n = torch.arange(1, sorted_conf.shape[1] + 1, device=sorted_conf.device, dtype=torch.float64)[None]  # [1, W]
        levels = 1 - torch.full_like(n, self.factor) / (n + 1)  # [1, W] correctly rounded, as Python's floats
        ok = passes(sorted_conf, levels, self.inclusive) | (n == 1)  # rank 1 is forced
        failed = ~ok & (n <= view.count[:, None])
        first_fail = torch.where(failed.any(dim=1), failed.float().argmax(dim=1), view.count)  # 0-based, or N
        if self.last_rank == "commit":
            first_fail = torch.where(first_fail == view.count - 1, view.count, first_fail)
        return torch.minimum(first_fail, view.count)


@dataclass(frozen=True)
class Quota:
    """LLaDA's schedule inside a block (SQ1.3, ``quota``): k_i = floor(M / S) + [i < M mod S] at step i of S, M
    the block's masks at its start; the last quota repeats if a block outlives its schedule (Fast-dLLM FD3)."""

    steps_per_block: int = 1
    name = "quota"

    def __post_init__(self):
        check_range("steps_per_block", self.steps_per_block, low=1, integer=True)

    def counts(self, view: StepView) -> torch.Tensor:
        i = min(view.block_step, self.steps_per_block - 1)
        return torch.minimum(quota(view.block_masks_at_start, self.steps_per_block, i), view.count)


# --------------------------------------------------------------------------------------------- set rules
@dataclass(frozen=True)
class LocalLeap(LevelOptions):
    """LocalLeap (seed 002 §3, P5): anchors are candidates with c >= kappa; candidates within ``radius`` W
    canvas positions of an anchor commit when c >= tau; the top-1 always commits (no anchor: sequential).
    Comparisons and certification as ``LevelOptions``."""

    kappa: float = 0.9
    radius: int = 4
    tau: float = 0.75
    name = "localleap"

    def __post_init__(self):
        check_range("kappa", self.kappa, low=0, high=1, low_open=True)
        check_range("tau", self.tau, low=0, high=1, low_open=True)
        if self.kappa < self.tau:
            raise ValueError(f"kappa must be >= tau (anchors are at least as confident as neighbours), "
                             f"got kappa={self.kappa}, tau={self.tau}")
        check_range("radius", self.radius, low=0, integer=True)

    def select(self, view: StepView) -> torch.Tensor:
        anchors = passes(view.confidence, self.kappa, self.inclusive) & view.candidates  # [B, W]
        near = F.max_pool1d(anchors.double()[:, None], 2 * self.radius + 1, stride=1, padding=self.radius)[:, 0] > 0
        neighbours = near & passes(view.confidence, self.tau, self.inclusive) & view.candidates
        selected = anchors | neighbours | ((view.rank == 0) & view.candidates)
        return certified(view, selected) if self.certified else selected


@dataclass(frozen=True)
class EntropyBounded:
    """EB-Sampler (Ben-Hamu et al. 2025; seed 000 B.2, P6): candidates sorted by increasing entropy H; the
    longest prefix whose entropy sum without its largest entry is <= gamma. gamma = 0 is sequential
    (lowest entropy first)."""

    gamma: float = 1.0
    name = "eb"

    def __post_init__(self):
        check_range("gamma", self.gamma, low=0)

    def score(self, view: StepView) -> torch.Tensor:
        """The ranking score: -entropy [B, W] (higher commits first), -inf off the candidates."""
        return torch.where(view.candidates, -entropy(view.probs, floor=1e-300), -torch.inf)  # [B, W] nats

    def select(self, view: StepView) -> torch.Tensor:
        score = self.score(view)
        order = torch.sort(score, dim=1, descending=True, stable=True).indices  # [B, W]
        entropy = (-score.gather(1, order)).masked_fill(~view.candidates.gather(1, order), 0.0)
        before = F.pad(entropy.cumsum(dim=1)[:, :-1], (1, 0))  # [B, W] H_(1) + ... + H_(j-1), summed left to right
        keep_sorted = (before <= self.gamma) & view.candidates.gather(1, order)
        return torch.zeros_like(view.candidates).scatter(1, order, keep_sorted)


@dataclass(frozen=True)
class KLASS:
    """KLASS (Kim et al. 2025b; seed 000 B.2, P7): commit candidates with c > ``confidence`` whose KL
    divergence KL(p_t || p_{t-1}) between consecutive steps' predictions stayed below ``kl_threshold`` for the
    last ``history`` steps; if none qualifies, the top-1. Memory per decode in ``view.state``."""

    confidence: float = 0.9
    kl_threshold: float = 0.01
    history: int = 2
    name = "klass"
    remembers_window = True  # its memory covers every position a step shows it, candidates or not

    def __post_init__(self):
        check_range("confidence", self.confidence, low=0, high=1, high_open=True)
        check_range("kl_threshold", self.kl_threshold, low=0)
        check_range("history", self.history, low=1, integer=True)

    def select(self, view: StepView) -> torch.Tensor:
        stable = self._update(view)
        ok = view.candidates & (view.confidence > self.confidence) & (stable >= self.history)
        fallback = (view.rank == 0) & view.candidates & ~ok.any(dim=1, keepdim=True)
        return ok | fallback

    @staticmethod
    def new_state(batch: int, length: int, device) -> dict:
        return {"probs": None, "stable": torch.zeros(batch, length, dtype=torch.long, device=device),
                "seen": torch.zeros(batch, length, dtype=torch.bool, device=device)}

    def _update(self, view: StepView) -> torch.Tensor:
        """Record this step's predictions; return each window position's run of stable steps [B, W]. A row
        without candidates takes no step (its block is done while others decode theirs): not updated."""
        state, window = view.state, slice(view.offset, view.offset + view.probs.shape[1])
        if state["probs"] is None:
            batch, length = state["stable"].shape
            state["probs"] = view.probs.new_zeros(batch, length, view.probs.shape[-1])  # [B, L, V]
        live = view.candidates.any(dim=1, keepdim=True)  # [B, 1]
        log_p, log_prev = (t.clamp_min(1e-300).log() for t in (view.probs, state["probs"][:, window]))
        kl = (view.probs * (log_p - log_prev)).sum(dim=-1)  # [B, W] KL(p_t || p_{t-1})
        stable, seen = state["stable"][:, window], state["seen"][:, window]
        updated = torch.where(seen & (kl < self.kl_threshold), stable + 1, 0)
        state["stable"][:, window] = torch.where(live, updated, stable)
        state["probs"][:, window] = torch.where(live[..., None], view.probs, state["probs"][:, window])
        state["seen"][:, window] = seen | live
        return state["stable"][:, window]


@dataclass(frozen=True)
class DAPD:
    """DAPD (Kim et al. 2026a; seed 000 B.2, P8): an edge joins two candidates whose symmetrized attention
    (heads and the top ``top_layers`` fraction of layers averaged) exceeds tau = scale * (tau_min + (tau_max -
    tau_min) * progress), progress = share of the block already decoded; commit a greedy independent set in
    confidence order; once fewer than half the block is masked, also every candidate with c > late_confidence."""

    scale: float = 1.0
    tau_min: float = 0.005
    tau_max: float = 0.05
    top_layers: float = 0.3
    late_confidence: float = 0.9
    name = "dapd"
    needs_attention = True

    def __post_init__(self):
        check_range("scale", self.scale, low=0, low_open=True)
        check_range("tau_min", self.tau_min, low=0)
        check_range("tau_max", self.tau_max, low=self.tau_min)
        check_range("top_layers", self.top_layers, low=0, high=1, low_open=True)
        check_range("late_confidence", self.late_confidence, low=0, high=1)

    def layers_used(self, num_layers: int) -> range:
        """The deepest ceil(top_layers * num_layers) layers."""
        return range(num_layers - max(1, math.ceil(self.top_layers * num_layers)), num_layers)

    def select(self, view: StepView) -> torch.Tensor:
        progress = 1 - view.block_masks.double() / view.block_length  # [B]
        tau = self.scale * (self.tau_min + (self.tau_max - self.tau_min) * progress)  # [B]
        both = view.candidates[:, :, None] & view.candidates[:, None, :]  # [B, W, W]
        edges = both & (view.dependency > tau[:, None, None])
        edges &= ~torch.eye(edges.shape[1], dtype=torch.bool, device=edges.device)
        selected = torch.zeros_like(view.candidates)
        rows = torch.arange(selected.shape[0], device=selected.device)
        for r in range(int(view.count.max())):  # greedy independent set, one rank at a time for all rows
            position = view.ranking[:, r]  # [B]
            free = ~(edges[rows, position] & selected).any(dim=1)  # [B] no edge to a selected position
            selected[rows, position] |= free & (r < view.count)
        late = (2 * view.block_masks < view.block_length)[:, None] & (view.confidence > self.late_confidence)
        return selected | (late & view.candidates)


COUNT_RULES = (TopK, Threshold, Factor, Quota)


def new_state(rule, batch: int, length: int, device) -> dict:
    """The per-decode memory a rule keeps across steps (empty for stateless rules)."""
    return rule.new_state(batch, length, device) if hasattr(rule, "new_state") else {}


def symmetrized_dependency(attentions, rule: DAPD, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Per-layer attentions [B, H, Q, K] -> DAPD's scores [B, W, W] between window positions.

    rows [W] or [B, W] (query index of each window position, per row when padding moves a row's first query),
    cols likewise (its key index); heads and the deepest layers averaged, then symmetrized (A + A^T) / 2."""
    layers = [attentions[i] for i in rule.layers_used(len(attentions))]
    mean = torch.stack(layers).double().mean(dim=(0, 2))  # [B, Q, K]
    batch, width = mean.shape[0], rows.shape[-1]
    rows, cols = rows.expand(batch, width), cols.expand(batch, width)  # [B, W]
    square = mean.gather(1, rows[:, :, None].expand(-1, -1, mean.shape[2]))  # [B, W, K]
    square = square.gather(2, cols[:, None, :].expand(-1, width, -1))  # [B, W, W]
    return (square + square.transpose(1, 2)) / 2
