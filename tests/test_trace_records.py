"""veridec.trace and veridec.events on inputs worked by hand (spec/sequential.md SQ0, spec/wino.md WN5): one step's
record over a window of the canvas, per-row commit orders, tokens per step over a batch, and where two event
decodes first differ."""

import math

import torch

from veridec.events import first_divergence
from veridec.trace import Event, StepRecord, Trace, record_step

MASK = 7


def test_a_windowed_step_records_canvas_positions_margins_and_gaps():
    """Two rows over a window starting at canvas position 10. Row 0 commits columns 2 then 0 (ranked); column 1
    stays masked with confidence 0.3, so the gap is the weakest commit 0.6 minus 0.3. Row 1 commits column 1
    alone; nothing is left, so its gap is +inf."""
    before = torch.tensor([[MASK, MASK, MASK], [4, MASK, 5]])  # [B, W]
    after = torch.tensor([[1, MASK, 2], [4, 3, 5]])
    confidence = torch.tensor([[0.6, 0.3, 0.9], [-math.inf, 0.8, -math.inf]], dtype=torch.float64)
    logits = torch.zeros(2, 3, 4)  # [B, W, V]
    logits[0, 2] = torch.tensor([0.0, 1.0, 3.5, 0.0])  # margin 2.5
    logits[0, 0] = torch.tensor([0.0, 2.0, 1.5, 0.0])  # margin 0.5
    logits[1, 1] = torch.tensor([0.0, 0.0, 0.0, 4.0])  # margin 4.0
    trace = Trace("t", {}, 10, 2)
    record_step(trace, 3, before, after, MASK, confidence, logits, [[2, 0], [1]], offset=10)
    step = trace.steps[0]
    assert step.block == 3
    assert step.positions == [[12, 10], [11]] and step.tokens == [[2, 1], [3]]
    assert step.confidences == [[0.9, 0.6], [0.8]] and step.margins == [[2.5, 0.5], [4.0]]
    assert step.selection_gaps[0] == 0.6 - 0.3 and step.selection_gaps[1] == math.inf


def _step(positions, tokens):
    rows = len(positions)
    return StepRecord(0, positions, tokens, [[1.0] * len(p) for p in positions], [[1.0] * len(p) for p in positions],
                      [math.inf] * rows)


def test_commit_orders_and_tokens_per_step_are_per_row():
    trace = Trace("t", {}, 2, 2, steps=[_step([[2, 3], []], [[5, 6], []]), _step([[], [2]], [[], [9]]),
                                        _step([[4], [3, 4]], [[1], [1, 2]])])
    assert trace.commit_order(0) == [{(2, 5), (3, 6)}, {(4, 1)}]  # row 0 committed nothing at step 1
    assert trace.commit_order(1) == [{(2, 9)}, {(3, 1), (4, 2)}]
    assert trace.tokens_committed() == 6
    assert trace.tokens_per_step() == 6 / (3 * 2)  # per step and row


def _commit(step, position, token, row=0):
    return Event("commit", step, row, position, MASK, token, 0.9)


def test_an_extra_step_on_one_side_is_a_divergence():
    ours = [_commit(0, 2, 5), _commit(1, 3, 6)]
    assert first_divergence(ours, list(ours)) is None
    assert first_divergence(ours + [_commit(2, 4, 1)], ours) == "row 0: step 2 exists on one side only (ours)"
    assert first_divergence(ours, ours + [_commit(2, 4, 1)]) == "row 0: step 2 exists on one side only (theirs)"
    assert first_divergence(ours, [_commit(0, 2, 5), _commit(1, 3, 4)]) == \
        "row 0, step 1: only ours [('commit', 3, 7, 6)], only theirs [('commit', 3, 7, 4)]"


def test_visible_changes_skip_a_commit_of_the_mask_token_and_later_forwards():
    from veridec.events import visible_changes

    events = [_commit(0, 4, 1), _commit(0, 2, MASK), Event("revoke", 1, 0, 4, 1, MASK, 0.2), _commit(1, 3, 2, row=1),
              _commit(2, 5, 3)]
    assert visible_changes(events, forwards=2) == [[[4, MASK, 1]], [[4, 1, MASK]]]
