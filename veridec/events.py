"""Event traces for decoders whose commits are not final (spec/wino.md WN5): a step may commit a token to a
masked position, revoke a committed token (back to the mask) or edit one (replace it). Two decodes agree when
their events agree step by step as sets (the order inside a step is a ranking, compared tie-aware, SQ0.4)."""

from __future__ import annotations

from itertools import zip_longest
from typing import NamedTuple

import torch

from .trace import KINDS, Counters, Event, StepRecord, Trace

__all__ = ["KINDS", "Event", "EventDecoded", "event_trace", "first_divergence", "replay", "step_events", "steps_of",
           "visible_changes"]


class EventDecoded(NamedTuple):
    """What a decoder with revocable commits returns (spec/wino.md WN5)."""

    canvas: torch.Tensor  # [R, P + G]
    events: list[Event]  # every row's, in order
    forwards: list[int]  # [R] forwards per row
    margins: list[list[float]]  # [R][steps] each step's smallest decision margin
    counters: Counters


def step_events(step: int, row: int, mask_id: int, commits, revokes=(), edits=(), offset: int = 0) -> list[Event]:
    """One step's events (WN5, spec/editing.md ED4): its commits [(position, token, confidence)], then its
    revocations [(position, old token, confidence)], then its edits [(position, old, new, confidence)], an edit
    that writes the mask token being a revocation; positions counted from canvas position ``offset``."""
    return ([Event("commit", step, row, offset + p, mask_id, token, c) for p, token, c in commits]
            + [Event("revoke", step, row, offset + p, old, mask_id, b) for p, old, b in revokes]
            + [Event("revoke" if new == mask_id else "edit", step, row, offset + p, old, new, q)
               for p, old, new, q in edits])


def event_trace(decoded: EventDecoded, decoder: str, params: dict, prompt_length: int) -> Trace:
    """``decoded`` as a Trace (veridec.trace): its events, counters with the revocations and edits counted, and
    one step record per forward index whose commits are that step's and whose selection gap is the step's
    decision margin (+inf for a row whose decode has ended; the block is not recorded, -1)."""
    rows = decoded.canvas.shape[0]
    trace = Trace(decoder, params, prompt_length, rows, counters=_counted(decoded.counters, decoded.events),
                  events=list(decoded.events))
    commits = {}  # (step, row) -> [(position, token, confidence)] in the step's order
    for e in decoded.events:
        if e.kind == "commit":
            commits.setdefault((e.step, e.row), []).append((e.position, e.new, e.confidence))
    for step in range(max(decoded.forwards, default=0)):
        mine = [commits.get((step, row), []) for row in range(rows)]
        gaps = [decoded.margins[row][step] if step < decoded.forwards[row] else float("inf") for row in range(rows)]
        trace.steps.append(StepRecord(-1, [[p for p, _, _ in m] for m in mine], [[t for _, t, _ in m] for m in mine],
                                      [[c for _, _, c in m] for m in mine],
                                      [[float("nan")] * len(m) for m in mine], gaps))
    return trace


def _counted(counters: Counters, events: list[Event]) -> Counters:
    """``counters`` with its revocations and edits counted from ``events``."""
    kinds = [e.kind for e in events]
    return Counters(**{**counters.__dict__, "revocations": kinds.count("revoke"), "edits": kinds.count("edit")})


def steps_of(events: list[Event], row: int = 0) -> list[set[tuple[str, int, int, int]]]:
    """Row ``row``'s events as one set of (kind, position, old, new) per step, steps 0 .. last."""
    mine = [e for e in events if e.row == row]
    sets = [set() for _ in range(max((e.step for e in mine), default=-1) + 1)]
    for event in mine:
        sets[event.step].add(event.key())
    return sets


def first_divergence(ours: list[Event], theirs: list[Event], row: int = 0) -> str | None:
    """None when both decodes have the same event set at every step, else where and how they first differ."""
    for step, (a, b) in enumerate(zip_longest(steps_of(ours, row), steps_of(theirs, row))):
        if a != b:
            if a is None or b is None:
                return f"row {row}: step {step} exists on one side only ({'ours' if b is None else 'theirs'})"
            only_ours, only_theirs = sorted(a - b), sorted(b - a)
            return f"row {row}, step {step}: only ours {only_ours}, only theirs {only_theirs}"
    return None


def visible_changes(events: list[Event], forwards: int, row: int = 0) -> list[list[list[int]]]:
    """Per forward, the sorted [position, old, new] a canvas diff between calls shows: every event of ``row``
    that changes a token (a commit of the mask token itself changes nothing and is not seen)."""
    steps = [[] for _ in range(forwards)]
    for e in events:
        if e.row == row and e.old != e.new and e.step < forwards:
            steps[e.step].append([e.position, e.old, e.new])
    return [sorted(s) for s in steps]


def replay(events: list[Event], canvas: list[int], row: int = 0) -> list[int]:
    """Apply row ``row``'s events in order to a copy of ``canvas``; each event's ``old`` must be what it finds."""
    canvas = list(canvas)
    for event in (e for e in events if e.row == row):
        if canvas[event.position] != event.old:
            raise ValueError(f"event {event} finds token {canvas[event.position]} at position {event.position}")
        canvas[event.position] = event.new
    return canvas
