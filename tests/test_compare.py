"""Trace comparison (veridec.compare): commit order, tie-aware first divergence, token match, logit error."""

import torch

from veridec.compare import compare_traces, token_match_rate
from veridec.models import random_model
from veridec.numerics import assert_close_measured, tolerance
from veridec.reference.llada import generate
from veridec.trace import StepRecord, Trace


def trace_of(steps, **counters):
    trace = Trace("test", {}, prompt_length=2, batch_size=1)
    for positions, tokens, margins, gap in steps:
        trace.steps.append(StepRecord(0, [positions], [tokens], [[0.9] * len(positions)], [margins], [gap]))
    trace.counters.full_forwards = counters.get("forwards", len(steps))
    return trace


def test_identical_runs_compare_equal():
    model = random_model("llada", 0)
    prompt = torch.randint(0, 90, (2, 4))
    a = generate(model, prompt, gen_length=8, block_length=4, steps=4, record_logits=True)
    b = generate(model, prompt, gen_length=8, block_length=4, steps=4, record_logits=True)
    result = compare_traces(a.trace, b.trace, a.canvas, b.canvas)
    assert result.same_commit_order and result.equivalent and result.first_divergence is None
    assert result.token_match_rate == 1.0 and result.max_logit_error == 0.0 and result.max_tv == 0.0


def visited_canvases(trace, prompt: torch.Tensor, gen_length: int, mask_id: int) -> torch.Tensor:
    """The canvases a decode's forwards saw, one per step and row, from its trace -> [steps * B, L]."""
    x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
    seen = []
    for step in trace.steps:
        seen.append(x.clone())
        for row, (positions, tokens) in enumerate(zip(step.positions, step.tokens)):
            x[row, positions] = torch.tensor(tokens, dtype=x.dtype)
    return torch.cat(seen)


def test_float32_vs_float64_differ_at_most_by_ties():
    """Same weights in two precisions: equal commit order, or a first divergence within the logit error. The
    numeric error is measured (veridec.numerics): the float32 model's logits on every canvas the float64 decode
    visited against its float64 rerun, tolerance(low, high) = 2 x 2 x their difference + a float32 ulp."""
    m32, m64 = random_model("llada", 1), random_model("llada", 1, dtype=torch.float64)
    prompt = torch.randint(0, 90, (3, 5), generator=torch.Generator().manual_seed(0))
    a = generate(m64, prompt, gen_length=12, block_length=4, steps=12, record_logits=True)
    b = generate(m32, prompt, gen_length=12, block_length=4, steps=12, record_logits=True)
    canvases = visited_canvases(a.trace, prompt, 12, m64.special.mask_id)  # [12 * 3, 17]
    with torch.no_grad():
        tol = tolerance(m32(canvases).logits, m64(canvases).logits)
    result = compare_traces(a.trace, b.trace, a.canvas, b.canvas, numeric_error=tol)
    assert result.max_logit_error is not None and result.max_logit_error > 0
    assert_close_measured(torch.tensor(result.max_logit_error), torch.tensor(0.0), tol, "float32 trace logits")
    assert result.equivalent, result.first_divergence


def test_token_divergence_reports_position_tokens_and_margin():
    a = trace_of([([3], [7], [2.0], 0.5), ([4], [1], [0.01], 0.1)])
    b = trace_of([([3], [7], [2.0], 0.5), ([4], [2], [0.02], 0.1)])
    result = compare_traces(a, b, numeric_error=0.05)
    d = result.first_divergence
    assert not result.same_commit_order
    assert (d.step, d.position, d.token_a, d.token_b, d.kind, d.margin, d.tie) == (1, 4, 1, 2, "token", 0.01, True)
    assert not compare_traces(a, b, numeric_error=0.001).equivalent


def test_position_divergence_uses_the_selection_gap():
    a = trace_of([([3, 5], [7, 8], [1.0, 1.0], 0.2)])
    b = trace_of([([3, 6], [7, 8], [1.0, 1.0], 0.3)])
    d = compare_traces(a, b, numeric_error=0.1).first_divergence
    assert (d.position, d.token_a, d.token_b, d.kind, d.margin, d.tie) == (5, 8, None, "position", 0.2, False)


def test_a_trace_that_goes_on_committing_diverges():
    a = trace_of([([3], [7], [1.0], 0.2)])
    b = trace_of([([3], [7], [1.0], 0.2), ([4], [1], [1.0], 0.2)])
    d = compare_traces(a, b).first_divergence
    assert (d.step, d.position, d.token_a, d.token_b) == (1, 4, None, 1)


def test_token_match_rate_counts_generated_positions_only():
    a = torch.tensor([[1, 2, 3, 4, 5, 6]])
    b = torch.tensor([[9, 9, 3, 4, 0, 6]])
    assert token_match_rate(a, b, prompt_length=2) == 0.75


def test_commit_order_skips_steps_that_commit_nothing():
    a = trace_of([([3], [7], [1.0], 0.2), ([], [], [], float("inf")), ([4], [1], [1.0], 0.2)])
    b = trace_of([([3], [7], [1.0], 0.2), ([4], [1], [1.0], 0.2)])
    assert a.commit_order() == b.commit_order() == [{(3, 7)}, {(4, 1)}]
    assert compare_traces(a, b).same_commit_order


def test_a_divergence_whose_margin_equals_the_numeric_error_is_a_tie():
    """SQ0.5: the first divergence is a tie when its deciding margin is <= the numeric error (inclusive): a
    selection gap of exactly 0.25 against an error of 0.25 is a tie, against 0.2499 it is not."""
    a = trace_of([([2], [7], [1.0], 0.25)])
    b = trace_of([([3], [7], [1.0], 0.25)])
    at = compare_traces(a, b, numeric_error=0.25)
    below = compare_traces(a, b, numeric_error=0.2499)
    assert at.first_divergence.kind == "position" and at.first_divergence.margin == 0.25
    assert at.first_divergence.tie and at.equivalent
    assert not below.first_divergence.tie and not below.equivalent


def test_tokens_per_step_counts_per_row():
    """The mean tokens committed per step and row (SQ0.1): 2 rows, 2 steps, 2 + 1 and 1 + 0 tokens -> 4 / 4."""
    trace = Trace("test", {}, prompt_length=2, batch_size=2)
    trace.steps.append(StepRecord(0, [[2, 3], [2]], [[5, 6], [5]], [[0.9, 0.8], [0.9]], [[1.0, 1.0], [1.0]],
                                  [0.1, 0.1]))
    trace.steps.append(StepRecord(0, [[4], []], [[5], []], [[0.9], []], [[1.0], []], [0.1, float("inf")]))
    assert trace.tokens_committed() == 4 and trace.tokens_per_step() == 1.0


def test_the_first_divergence_is_the_earliest_step_whatever_the_row():
    """Row 1 diverges at step 0 and row 0 only at step 1: the first divergence is row 1's."""
    def two_rows(first, second):
        trace = Trace("test", {}, prompt_length=2, batch_size=2)
        for positions in (first, second):
            trace.steps.append(StepRecord(0, [[p] for p in positions], [[7], [7]], [[0.9], [0.9]], [[1.0], [1.0]],
                                          [0.5, 0.5]))
        return trace

    d = compare_traces(two_rows([3, 3], [4, 4]), two_rows([3, 5], [6, 4])).first_divergence
    assert (d.step, d.row) == (0, 1)


def test_logit_errors_pair_commits_by_position_not_by_list_order():
    """The same commits listed in another order: each position's logits are compared with the same position's."""
    def with_logits(positions, logits):
        trace = Trace("test", {}, prompt_length=2, batch_size=1)
        trace.steps.append(StepRecord(0, [positions], [[7] * len(positions)], [[0.9] * len(positions)],
                                      [[1.0] * len(positions)], [0.5], [logits]))
        return trace

    a = with_logits([3, 4], [[0.0, 1.0], [0.0, 5.0]])
    b = with_logits([4, 3], [[0.0, 5.0], [0.0, 1.0]])
    assert compare_traces(a, b).max_logit_error == 0.0
