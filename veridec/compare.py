"""Compare two decode traces: commit order, first divergence (tie-aware), token match, logit error, TV.

A divergence is a *tie*, not a failure, when the decision that differs was within the measured numeric error
``numeric_error`` of going either way: a token divergence whose logit margin (top1 - top2) is at most the
error, or a position divergence whose selection gap (confidence of the weakest committed position minus the
strongest one left masked) is at most the error (a logit error of d moves a probability by at most d / 2,
so using d for confidences is conservative).

Traces with events (decoders whose commits are not final, spec/wino.md WN5) are compared by their events: the
same set of (kind, position, old, new) at every step (a step without events, or past a trace's end, is the
empty set: extra forwards that change nothing are the counters' to catch); the first step that differs is the
divergence, at its lowest differing position, a tie when that step's decision margin (the step record's
selection gap; none past a trace's records) is at most the error. An event that changes no token (a commit of
the mask token itself) is not compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import zip_longest

import torch

from .trace import Event, StepRecord, Trace


@dataclass
class Divergence:
    step: int  # the step index in trace a (in b when only b committed)
    row: int
    position: int
    token_a: int | None  # what each trace committed at ``position`` in that step (None: nothing)
    token_b: int | None
    kind: str  # "token": same position, different tokens; "position": committed by one only; event traces:
    # the kind ("commit", "revoke", "edit") of the first differing event at ``position`` (a's when both have one)
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
    """Hold trace ``b`` against trace ``a`` (the reference). Canvases give the token match rate. A reference with
    events is compared by events (``b`` must have them too); one without, by commit order."""
    for name, trace in (("a", a), ("b", b)):
        if not isinstance(trace, Trace):
            raise ValueError(f"compare_traces: {name} must be a Trace (a decode's .trace), got {type(trace).__name__}")
    if a.batch_size != b.batch_size:
        raise ValueError(f"batch sizes differ: {a.batch_size} vs {b.batch_size}")
    if a.events is not None:  # the reference's commits are not final: its events are what it did
        if b.events is None:
            raise ValueError("trace a has events (revocable commits) and trace b has none: an event trace is "
                             "compared with an event trace")
        return _compare_events(a, b, canvas_a, canvas_b, numeric_error)
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


def _compare_events(a: Trace, b: Trace, canvas_a, canvas_b, numeric_error: float) -> TraceComparison:
    divergences = []
    for row in range(a.batch_size):
        steps_a, steps_b = _event_steps(a.events, row), _event_steps(b.events, row)
        for step, (ea, eb) in enumerate(zip_longest(steps_a, steps_b, fillvalue={})):
            if set(ea) != set(eb):  # a step without events on one side (or past its end) is an empty set
                margin = _observed_min(_decision_margin(a, step, row), _decision_margin(b, step, row))
                divergences.append(_event_divergence(step, row, ea, eb, margin, numeric_error))
                break
    first = min(divergences, key=lambda d: (d.step, d.row), default=None)
    return TraceComparison(
        same_commit_order=not divergences, first_divergence=first, steps=(len(a.steps), len(b.steps)),
        full_forwards=(a.counters.full_forwards, b.counters.full_forwards),
        token_match_rate=None if canvas_a is None else token_match_rate(canvas_a, canvas_b, a.prompt_length),
        commit_order_match_rate=1 - len(divergences) / a.batch_size)


def _event_steps(events: list[Event], row: int) -> list[dict[tuple, Event]]:
    """Row ``row``'s events per step, keyed by (kind, position, old, new); steps 0 .. its last. An event that
    changes no token (a commit of the mask token itself) is left out: no recording of the calls can see it."""
    mine = [e for e in events if e.row == row and e.old != e.new]
    steps = [{} for _ in range(max((e.step for e in mine), default=-1) + 1)]
    for event in mine:
        steps[event.step][event.key()] = event
    return steps


def _decision_margin(trace: Trace, step: int, row: int) -> float:
    """The step's decision margin (its record's selection gap); NaN where the trace has no record of it."""
    return trace.steps[step].selection_gaps[row] if step < len(trace.steps) else math.nan


def _event_divergence(step: int, row: int, ea: dict, eb: dict, margin: float, numeric_error: float) -> Divergence:
    """The first position whose events differ in a step, with the token each side leaves there (None: no
    event there on that side)."""
    differing = [e for key, e in ea.items() if key not in eb] + [e for key, e in eb.items() if key not in ea]
    position = min(e.position for e in differing)
    at = lambda events: next((e for e in events.values() if e.position == position), None)
    event_a, event_b = at(ea), at(eb)
    kind = (event_a or event_b).kind
    return Divergence(step, row, position, None if event_a is None else event_a.new,
                      None if event_b is None else event_b.new, kind, margin, margin <= numeric_error)


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
