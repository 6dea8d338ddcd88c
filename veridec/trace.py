"""Decode traces: what every decoder returns next to its canvas (spec/sequential.md SQ0).

Per step and batch row: the positions committed (mask -> token), their tokens, their confidences, the logit
margin top1 - top2 of the token choice at each, and the selection gap (confidence of the weakest committed
position minus that of the strongest candidate left masked; +inf when none is left). Counters are
deterministic (full forwards, query positions computed, reward passes), so they can gate CI.

A decoder whose commits are not final (WINO, the edit rule: spec/wino.md WN5) also returns its ``events``:
every commit, revocation (a token back to the mask) and edit (a token replaced), step by step; its step
records then hold each step's commits and, as the selection gap, the step's decision margin. ``events`` is
None for a decoder whose commits are final (its step records say everything).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch

from .files import write_text_atomic


@dataclass
class Counters:
    full_forwards: int = 0  # model calls over the whole canvas (one per call, whatever the batch)
    query_positions: int = 0  # query rows evaluated, summed over the batch (B * L for a full forward)
    reward_forwards: int = 0
    reward_backwards: int = 0
    model_calls: int = 0  # every model call: full, cached or packed
    revocations: int = 0  # committed tokens sent back to the mask (WN5)
    edits: int = 0  # committed tokens replaced by another token (ED)

    def add_forward(self, rows: int, queries: int, full: bool = True) -> None:
        self.full_forwards += int(full)
        self.query_positions += rows * queries
        self.model_calls += 1


KINDS = ("commit", "revoke", "edit", "accept", "renoise")  # the last two: uniform-state canvases (DG3.6)


@dataclass(frozen=True)
class Event:
    kind: str  # one of KINDS
    step: int  # forward index of the row's decode, from 0 across blocks
    row: int
    position: int  # canvas position
    old: int  # token before (the mask token for a commit)
    new: int  # token after (the mask token for a revocation)
    confidence: float  # what decided it: the draft confidence of a commit, the verified one of a revocation, the
    # entropy of an acceptance or a renoising (DG3.6)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")

    def key(self) -> tuple[str, int, int, int]:
        return self.kind, self.position, self.old, self.new


@dataclass
class StepRecord:
    block: int
    positions: list[list[int]]  # [B][n_b], in the order the rule ranked them
    tokens: list[list[int]]
    confidences: list[list[float]]
    margins: list[list[float]]  # logit top1 - top2 at each committed position
    selection_gaps: list[float]  # [B]
    logits: list[list[list[float]]] | None = None  # [B][n_b][V], only when recording logits

    def committed(self, row: int) -> set[tuple[int, int]]:
        return set(zip(self.positions[row], self.tokens[row]))


class Progress(NamedTuple):
    """How far a decode has got, as a refusal names it: the steps taken and the model calls made."""

    steps: int
    model_calls: int


@dataclass
class Trace:
    decoder: str
    params: dict
    prompt_length: int
    batch_size: int
    steps: list[StepRecord] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)
    events: list[Event] | None = None  # None: commits are final (no revocation or edit can happen)

    @property
    def progress(self) -> Progress:
        return Progress(len(self.steps), self.counters.model_calls)

    def commit_order(self, row: int = 0) -> list[set[tuple[int, int]]]:
        """The non-empty (position, token) sets committed step by step (equal for equal decoders)."""
        return [step.committed(row) for step in self.steps if step.positions[row]]

    def tokens_committed(self) -> int:
        return sum(len(p) for step in self.steps for p in step.positions)

    def tokens_per_step(self) -> float:
        """Mean tokens committed per step and row (steps that committed nothing in a row count too)."""
        return self.tokens_committed() / max(1, len(self.steps) * self.batch_size)

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        write_text_atomic(path, json.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, data: dict) -> "Trace":
        steps = [StepRecord(**s) for s in data["steps"]]
        events = data.get("events")
        return cls(data["decoder"], data["params"], data["prompt_length"], data["batch_size"], steps,
                   Counters(**data["counters"]), None if events is None else [Event(**e) for e in events])

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_dict(json.loads(Path(path).read_text()))


class Decoded(NamedTuple):
    canvas: torch.Tensor  # [B, L] prompt + generation
    trace: Trace


def logit_margins(logits: torch.Tensor) -> torch.Tensor:
    """[..., V] -> top1 - top2 of the logits [...] (inf where the runner-up is -inf)."""
    top2 = logits.topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def record_step(trace: Trace, block: int, before: torch.Tensor, after: torch.Tensor, mask_id: int,
                confidence: torch.Tensor, logits: torch.Tensor, order: list[list[int]],
                record_logits: bool = False, offset: int | list[int] = 0) -> None:
    """Append one step: positions of ``order`` (per row, ranked) that went from mask to token.

    before/after [B, W]; confidence [B, W] (the rule's ranking score, -inf for non-candidates);
    logits [B, W, V] the logits the token choice was made from. The arrays may cover a window of the canvas
    starting at canvas position ``offset`` (cached decoders; one per row where rows are laid out apart, BD8.2);
    recorded positions are canvas positions. Only the ranked positions are read (their margins from their own
    logits rows), in one host read.
    """
    rows = [row for row, ranked in enumerate(order) for _ in ranked]
    cols = [p for ranked in order for p in ranked]
    at = (torch.tensor(rows, dtype=torch.long, device=after.device),
          torch.tensor(cols, dtype=torch.long, device=after.device))
    conf = confidence.double()
    left = (after == mask_id) & torch.isfinite(conf)  # [B, W] candidates left masked
    strongest = torch.where(left, conf, -torch.inf).amax(dim=1)  # [B], -inf when none is left
    picked = logits[at]  # [n, V]
    values = torch.cat([before[at].double(), after[at].double(), conf[at], logit_margins(picked.float()).double(),
                        strongest]).tolist()  # one read: token ids are exact in float64
    n = len(cols)
    was, now, confs, margs, strongest = (values[:n], values[n:2 * n], values[2 * n:3 * n], values[3 * n:4 * n],
                                         values[4 * n:])
    kept = picked.float().tolist() if record_logits else None
    offsets = offset if isinstance(offset, list) else [offset] * len(order)
    positions, tokens, confidences, margins, gaps, kept_logits = [], [], [], [], [], []
    for row, offset in enumerate(offsets):
        mine = [i for i, r in enumerate(rows) if r == row and was[i] == mask_id and now[i] != mask_id]
        positions.append([cols[i] + offset for i in mine])
        tokens.append([int(now[i]) for i in mine])
        confidences.append([confs[i] for i in mine])
        margins.append([margs[i] for i in mine])
        weakest = min(confidences[-1]) if mine else float("inf")
        strongest_left = strongest[row]
        gaps.append(weakest - strongest_left)
        if record_logits:
            kept_logits.append([kept[i] for i in mine])
    trace.steps.append(StepRecord(block, positions, tokens, confidences, margins, gaps,
                                  kept_logits if record_logits else None))


class PendingStep(NamedTuple):
    """One step's record left on the device (``pending_step``), read back with others by ``append_pending``:
    ``values`` [B, 6W + 1] float64 per row: the ranking, whether each ranked position is committed, the tokens
    before and after, the confidences and logit margins at each window column, and the strongest candidate left."""

    block: int
    offset: int  # canvas position of the window's first column
    values: torch.Tensor


def pending_step(block: int, before: torch.Tensor, after: torch.Tensor, mask_id: int, confidence: torch.Tensor,
                 logits: torch.Tensor, ranking: torch.Tensor, selected: torch.Tensor, offset: int = 0) -> PendingStep:
    """``record_step``'s record of one step computed on the device, with no host read: the same arrays (before,
    after [B, W]; confidence [B, W]; logits [B, W, V]) and the commits as a ranking [B, W] and a selection [B, W]
    (a ``RankedSelection``). Margins are taken at every column (one top-2 over [B, W, V])."""
    conf = confidence.double()
    left = (after == mask_id) & torch.isfinite(conf)  # [B, W] candidates left masked
    strongest = torch.where(left, conf, -torch.inf).amax(dim=1, keepdim=True)  # [B, 1]
    ids = torch.cat([ranking, selected.gather(1, ranking), before, after], dim=1)  # [B, 4W] long
    values = torch.cat([ids.double(), conf, logit_margins(logits.float()).double(), strongest], dim=1)  # [B, 6W + 1]
    return PendingStep(block, offset, values)


def append_pending(trace: Trace, pending: list[PendingStep], mask_id: int) -> None:
    """Appends the pending steps' records to ``trace`` in one host read: what ``record_step`` records."""
    if not pending:
        return
    flat = torch.cat([step.values.reshape(-1) for step in pending]).tolist()  # token ids are exact in float64
    start = 0
    for step in pending:
        batch, width = step.values.shape[0], (step.values.shape[1] - 1) // 6
        rows = [flat[start + r * (6 * width + 1):start + (r + 1) * (6 * width + 1)] for r in range(batch)]
        start += batch * (6 * width + 1)
        trace.steps.append(StepRecord(step.block, *_row_records(rows, width, mask_id, step.offset)))


def _row_records(rows: list[list[float]], width: int, mask_id: int, offset: int) -> tuple:
    positions, tokens, confidences, margins, gaps = [], [], [], [], []
    for values in rows:
        ranking, kept, before, after, conf, margin = (values[k * width:(k + 1) * width] for k in range(6))
        ranked = [int(p) for p, keep in zip(ranking, kept) if keep]
        mine = [p for p in ranked if before[p] == mask_id and after[p] != mask_id]
        positions.append([p + offset for p in mine])
        tokens.append([int(after[p]) for p in mine])
        confidences.append([conf[p] for p in mine])
        margins.append([margin[p] for p in mine])
        gaps.append((min(confidences[-1]) if mine else float("inf")) - values[-1])
    return positions, tokens, confidences, margins, gaps


class RowStep(NamedTuple):
    """One row's part of a step record, for a decoder that decides row by row (block diffusion, BD9)."""

    positions: list[int]  # canvas positions committed, in rank order
    tokens: list[int]
    confidences: list[float]
    margins: list[float]  # logit top1 - top2 at each
    selection_gap: float
    logits: list[list[float]] | None = None  # [n][V] at those positions, when recording logits


IDLE_ROW = RowStep([], [], [], [], float("inf"), [])  # a row with nothing to decide in the step


def record_rows(trace: Trace, block: int, rows: list[RowStep], record_logits: bool = False) -> None:
    """Append one step made of each row's ``RowStep`` (the logits kept only with ``record_logits``)."""
    trace.steps.append(StepRecord(block, [r.positions for r in rows], [r.tokens for r in rows],
                                  [r.confidences for r in rows], [r.margins for r in rows],
                                  [r.selection_gap for r in rows], [r.logits for r in rows] if record_logits else None))
