"""Compare two decode traces: commit order, first divergence (tie-aware), token match, logit error, TV.

A divergence is a *tie*, not a failure, when the decision that differs was within the measured numeric error
``numeric_error`` of going either way: a token divergence whose logit margin (top1 - top2) is at most the
error, or a position divergence whose selection gap (confidence of the weakest committed position minus the
strongest one left masked) is at most the error (a logit error of d moves a probability by at most d / 2,
so using d for confidences is conservative).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .trace import StepRecord, Trace


@dataclass
class Divergence:
    step: int  # the step index in trace a (in b when only b committed)
    row: int
    position: int
    token_a: int | None  # what each trace committed at ``position`` in that step (None: nothing)
    token_b: int | None
    kind: str  # "token": same position, different tokens; "position": committed by one only
    margin: float  # the logit margin (token) or selection gap (position) that decided it
    tie: bool


@dataclass
class TraceComparison:
    same_commit_order: bool
    first_divergence: Divergence | None
    steps: tuple[int, int]
    full_forwards: tuple[int, int]
    token_match_rate: float | None = None
    max_logit_error: float | None = None  # over positions both committed at the same step, before divergence
    max_tv: float | None = None
    commit_order_match_rate: float = 1.0  # share of batch rows whose commit order is the same

    @property
    def equivalent(self) -> bool:
        """Same commit order, or the first difference is a numeric tie."""
        return self.same_commit_order or (self.first_divergence is not None and self.first_divergence.tie)

    def to_dict(self) -> dict:
        return asdict(self)


def compare_traces(a: Trace, b: Trace, canvas_a: torch.Tensor | None = None, canvas_b: torch.Tensor | None = None,
                   numeric_error: float = 0.0) -> TraceComparison:
    """Hold trace ``b`` against trace ``a`` (the reference). Canvases give the token match rate."""
    if a.batch_size != b.batch_size:
        raise ValueError(f"batch sizes differ: {a.batch_size} vs {b.batch_size}")
    divergences, logit_errors, tvs = [], [], []
    for row in range(a.batch_size):
        steps_a, steps_b = _committing(a, row), _committing(b, row)
        for (step, sa), (_, sb) in zip(steps_a, steps_b):
            if sa.committed(row) != sb.committed(row):
                divergences.append(_divergence(step, row, sa, sb, numeric_error))
                break
            _logit_differences(sa, sb, row, logit_errors, tvs)
        else:  # one trace may go on committing after the other stopped
            if len(steps_a) != len(steps_b):
                longer_is_a = len(steps_a) > len(steps_b)
                step, extra = (steps_a if longer_is_a else steps_b)[min(len(steps_a), len(steps_b))]
                divergences.append(_one_sided(step, row, extra, longer_is_a))
    first = min(divergences, key=lambda d: (d.step, d.row), default=None)
    return TraceComparison(
        same_commit_order=not divergences, first_divergence=first, steps=(len(a.steps), len(b.steps)),
        full_forwards=(a.counters.full_forwards, b.counters.full_forwards),
        token_match_rate=None if canvas_a is None else token_match_rate(canvas_a, canvas_b, a.prompt_length),
        max_logit_error=max(logit_errors) if logit_errors else None, max_tv=max(tvs) if tvs else None,
        commit_order_match_rate=1 - len(divergences) / a.batch_size)


def token_match_rate(canvas_a: torch.Tensor, canvas_b: torch.Tensor, prompt_length: int) -> float:
    """Share of generated positions (after the prompt) where the two canvases agree."""
    if canvas_a.shape != canvas_b.shape:
        raise ValueError(f"canvas shapes differ: {tuple(canvas_a.shape)} vs {tuple(canvas_b.shape)}")
    return (canvas_a[:, prompt_length:] == canvas_b[:, prompt_length:]).double().mean().item()


def _committing(trace: Trace, row: int) -> list[tuple[int, StepRecord]]:
    """(step index, record) of the steps in which ``row`` committed something: the commit order ignores
    steps that commit nothing (a schedule's empty steps, a forward after a block is already done)."""
    return [(i, step) for i, step in enumerate(trace.steps) if step.positions[row]]


def _divergence(step: int, row: int, sa: StepRecord, sb: StepRecord, numeric_error: float) -> Divergence:
    tokens_a = dict(zip(sa.positions[row], sa.tokens[row]))
    tokens_b = dict(zip(sb.positions[row], sb.tokens[row]))
    differing = {p for p in tokens_a.keys() | tokens_b.keys() if tokens_a.get(p) != tokens_b.get(p)}
    position = min(differing)
    if position in tokens_a and position in tokens_b:
        margin = _observed_min(_margin_at(sa, row, position), _margin_at(sb, row, position))
        kind = "token"
    else:
        margin = _observed_min(abs(sa.selection_gaps[row]), abs(sb.selection_gaps[row]))
        kind = "position"
    return Divergence(step, row, position, tokens_a.get(position), tokens_b.get(position), kind, margin,
                      tie=margin <= numeric_error)


def _observed_min(a: float, b: float) -> float:
    """The smaller margin of the two sides that observed one (a recorded trace holds NaN: not observed)."""
    observed = [m for m in (a, b) if not math.isnan(m)]
    return min(observed) if observed else math.nan


def _one_sided(step: int, row: int, extra: StepRecord, in_a: bool) -> Divergence:
    position, token = extra.positions[row][0], extra.tokens[row][0]
    return Divergence(step, row, position, token if in_a else None, None if in_a else token, "position",
                      float("inf"), tie=False)


def _margin_at(step: StepRecord, row: int, position: int) -> float:
    return step.margins[row][step.positions[row].index(position)]


def _logit_differences(sa: StepRecord, sb: StepRecord, row: int, errors: list, tvs: list) -> None:
    if sa.logits is None or sb.logits is None:
        return
    order_b = {p: i for i, p in enumerate(sb.positions[row])}
    for i, position in enumerate(sa.positions[row]):
        la = torch.tensor(sa.logits[row][i], dtype=torch.float64, device="cpu")  # traces hold lists
        lb = torch.tensor(sb.logits[row][order_b[position]], dtype=torch.float64, device="cpu")
        finite = torch.isfinite(la) & torch.isfinite(lb)
        errors.append((la[finite] - lb[finite]).abs().max().item() if finite.any() else 0.0)
        tvs.append(0.5 * (la.softmax(-1) - lb.softmax(-1)).abs().sum().item())
