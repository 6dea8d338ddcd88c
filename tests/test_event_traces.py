"""Event traces in the shared floor (spec/wino.md WN5, WN10): a Trace holds a revocable decoder's events,
``compare_traces`` compares them step by step (tie-aware), the recording reconstructs them for a candidate whose
calls are wider than its output, and LLaDA's convention serves WINO's call (a [1, 1, N, N] boolean mask and
RoPE positions)."""

import json
import math

import pytest
import torch

from veridec.adapters import LLaDAConvention
from veridec.compare import compare_traces
from veridec.events import event_trace
from veridec.recording import RecordingModel
from veridec.reference.wino import generate
from veridec.rules.wino import WinoParams, forward_layout
from veridec.trace import Counters, Event, StepRecord, Trace

from oracles import wino as oracle

MASK = 97


@pytest.fixture
def model(wino_llada):
    return wino_llada


def decoded(model, prompt=(5, 6), gen=12, block=12, threshold=0.2, threshold_back=0.99):
    return generate(model, torch.tensor([list(prompt)]), gen, block, threshold=threshold,
                    threshold_back=threshold_back)


def traced(result, prompt_length=2):
    return event_trace(result, "wino", {"mask_id": MASK}, prompt_length)


def test_the_event_trace_counts_revocations_and_keeps_each_steps_margin(model):
    result = decoded(model)
    trace = traced(result)
    revokes = sum(e.kind == "revoke" for e in result.events)
    assert revokes > 0 and trace.counters.revocations == revokes and trace.counters.edits == 0
    assert len(trace.steps) == result.forwards[0] == trace.counters.full_forwards
    assert [s.selection_gaps[0] for s in trace.steps] == result.margins[0]
    commits = [(e.step, e.position, e.new) for e in result.events if e.kind == "commit"]
    assert [(k, p, t) for k, s in enumerate(trace.steps) for p, t in zip(s.positions[0], s.tokens[0])] == commits
    again = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.events == trace.events and again.counters == trace.counters


def test_equal_event_traces_compare_equal_and_a_changed_revocation_diverges_there(model):
    trace = traced(decoded(model))
    assert compare_traces(trace, traced(decoded(model))).first_divergence is None
    revoke = next(e for e in trace.events if e.kind == "revoke")
    other = Trace.from_dict(trace.to_dict())
    other.events = [e for e in other.events if e != revoke]  # the candidate kept the token
    found = compare_traces(trace, other).first_divergence
    assert (found.step, found.position, found.kind, found.token_a, found.token_b) == \
        (revoke.step, revoke.position, "revoke", MASK, None)
    margin = trace.steps[revoke.step].selection_gaps[0]
    assert found.margin == margin and not found.tie
    assert compare_traces(trace, other, numeric_error=margin).first_divergence.tie  # within the error: a tie


def test_the_recorded_side_has_no_margins_so_the_references_decides_the_tie():
    a, b = _two_traces(margin_a=0.25, margin_b=math.nan)
    assert compare_traces(a, b, numeric_error=0.3).first_divergence.tie
    assert not compare_traces(a, b, numeric_error=0.2).first_divergence.tie


def test_a_commit_of_the_mask_token_itself_is_not_compared():
    a, b = _two_traces(margin_a=1.0, margin_b=math.nan)
    b.events = list(a.events)
    a.events.append(Event("commit", 0, 0, 3, MASK, MASK, 0.7))  # no recording can see it
    assert compare_traces(a, b).first_divergence is None


def test_an_event_reference_needs_an_event_candidate_and_a_final_one_does_not():
    a, b = _two_traces(margin_a=1.0, margin_b=1.0)
    b.events = None
    with pytest.raises(ValueError, match="an event trace is compared with an event trace"):
        compare_traces(a, b)
    assert compare_traces(b, a).same_commit_order is not None  # a commit-order reference ignores b's events


def _two_traces(margin_a, margin_b):
    """Two one-step event traces: a commits positions 2 and 3, b only 2."""
    traces = []
    for commits, margin in (([2, 3], margin_a), ([2], margin_b)):
        trace = Trace("t", {"mask_id": MASK}, 2, 1, counters=Counters(), events=[])
        trace.events = [Event("commit", 0, 0, p, MASK, 10 + p, 0.9) for p in commits]
        trace.steps = [StepRecord(-1, [commits], [[10 + p for p in commits]], [[0.9] * len(commits)],
                                  [[math.nan] * len(commits)], [margin])]
        traces.append(trace)
    return traces


def test_the_recording_of_a_wider_decode_gives_its_events_and_counts_revocations(model):
    """WINO's calls hold the canvas and its verification block; the output only the canvas: the recorded trace
    covers the calls' width, its counters count the revocations, its events are the reference's visible ones."""
    proxy = RecordingModel(model)
    result = generate(proxy, torch.tensor([[5, 6]]), 12, 12, threshold=0.2, threshold_back=0.99)
    trace = proxy.trace(result.canvas, prompt_length=2, mask_id=MASK)
    revokes = [e for e in result.events if e.kind == "revoke"]
    assert trace.counters.revocations == len(revokes) > 0
    assert compare_traces(traced(result), trace).first_divergence is None
    assert len(trace.steps) == len(proxy.calls)


def test_a_decode_with_cached_calls_has_no_events_to_reconstruct(model):
    """WINO with a prefix cache: its calls after a block's first do not show the whole canvas, so no events (the
    check then compares its tokens and counters, tests/test_wino_check.py)."""
    from veridec.optimized.wino import generate as optimized

    proxy = RecordingModel(model)
    out = optimized(proxy, torch.tensor([[5, 6]]), 8, 4, threshold=0.05, threshold_back=0.99, cache="prefix")
    with pytest.raises(ValueError, match="cached"):
        proxy.events(out.canvas)


def test_llada_convention_serves_winos_call_with_the_official_layout(model):
    """The adapter fed the oracle's boolean layout (spec-derived) and positions gives the reference's forward
    bit for bit; a mask that lets each verification slot see its own token gives other logits there (negative
    control: the mask is applied)."""
    prompt_len, gen, width, block = 2, 8, 4, 1
    positions, sees = oracle.forward_layout(prompt_len, gen, width, block)
    x = torch.randint(0, 90, (1, prompt_len + gen + width))
    x[0, prompt_len + gen:] = MASK
    adapter = LLaDAConvention(model)
    got = adapter(x, attention_mask=torch.tensor(sees)[None, None], position_ids=torch.tensor(positions)).logits
    ours, bias = forward_layout(prompt_len, WinoParams(gen, width), block)
    want = model.raw_forward(x, ours[None], attn_bias=bias[None, None]).logits
    assert torch.equal(got, want)
    seeing = torch.ones(1, 1, x.shape[1], x.shape[1], dtype=torch.long)  # 0/1 accepted, as the official asserts
    open_slots = adapter(x, attention_mask=seeing, position_ids=torch.tensor(positions)).logits
    assert not torch.equal(open_slots[0, prompt_len + gen:], want[0, prompt_len + gen:])


@pytest.mark.parametrize("mask, positions, message", [
    (torch.ones(1, 1, 3, 3, dtype=torch.bool), None, r"attention_mask must be .* \[B or 1, 1, L, L\]"),
    (torch.full((1, 1, 4, 4), 0.5), None, "booleans or 0/1"),
    (None, torch.arange(3), "position_ids must be"),
])
def test_bad_explicit_calls_are_refused_by_name(model, mask, positions, message):
    with pytest.raises(ValueError, match=message):
        LLaDAConvention(model)(torch.zeros(1, 4, dtype=torch.long), attention_mask=mask, position_ids=positions)


def test_a_decode_that_runs_past_the_references_steps_is_never_a_tie():
    """Past the reference's last step there is no decision margin to excuse a difference with, whatever the
    numeric error."""
    a, b = _two_traces(margin_a=1.0, margin_b=math.nan)
    b.events = list(a.events) + [Event("edit", 1, 0, 2, 12, 40, math.nan)]  # b goes on editing at step 1
    b.steps = b.steps + [StepRecord(-1, [[]], [[]], [[]], [[]], [math.nan])]
    found = compare_traces(a, b, numeric_error=0.5).first_divergence
    assert (found.step, found.kind, found.position) == (1, "edit", 2) and not found.tie


def test_a_mask_that_is_neither_zero_one_nor_additive_is_refused(model):
    mixed = torch.ones(1, 1, 4, 4)
    mixed[0, 0, 0, 1] = 0.5  # 0.5 among ones: not a 0/1 mask, not an additive one
    with pytest.raises(ValueError, match="booleans or 0/1"):
        LLaDAConvention(model)(torch.zeros(1, 4, dtype=torch.long), attention_mask=mixed)


def test_the_diagnosed_canvas_is_the_one_before_the_divergent_step():
    from veridec.testing.exact import _events_before

    trace = Trace("t", {}, 1, 1, events=[Event("commit", 0, 0, 1, MASK, 5, 0.9), Event("commit", 1, 0, 2, MASK, 6, 0.8),
                                         Event("revoke", 2, 0, 1, 5, MASK, 0.1)])
    final = torch.tensor([[3, MASK, 6]])
    assert _events_before(final, trace, 1, MASK).tolist() == [[3, 5, MASK]]
    assert _events_before(final, trace, 0, MASK).tolist() == [[3, MASK, MASK]]
    assert _events_before(final, trace, 3, MASK).tolist() == final.tolist()


def test_a_decode_mixing_full_and_cached_calls_has_no_events(model):
    """Fast-dLLM's prefix cache: one full forward per block, then cached calls that show only the block onwards;
    one full call is not enough to place events, so the trace has none and ``events`` refuses."""
    from veridec.optimized.fastdllm import generate_with_prefix_cache

    proxy = RecordingModel(model)
    out = generate_with_prefix_cache(proxy, torch.tensor([[5, 6]]), steps=4, gen_length=8, block_length=4)
    kinds = {call.kind for call in proxy.calls}
    assert kinds == {"full", "cached"}
    assert proxy.trace(out.canvas, prompt_length=2).events is None
    with pytest.raises(ValueError, match="cached or stacked"):
        proxy.events(out.canvas)
