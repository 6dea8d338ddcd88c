"""``RecordingModel.events`` (spec/wino.md WN5): the commits, revocations and edits a decoder's model calls show,
held against the events WINO's reference decoder reports from its rule, and against hand-written decoders whose
events are known."""

import math

import pytest
import torch

from veridec.recording import RecordingModel
from veridec.reference.wino import generate

MASK = 97


@pytest.fixture
def model(wino_llada):
    return wino_llada


def keys(events):
    return [(e.kind, e.step, e.row, e.position, e.old, e.new) for e in events]


@pytest.mark.parametrize("threshold, threshold_back, prompt, block", [(0.2, 0.99, [5, 6], 12),
                                                                      (0.05, 0.9, [9, 3, 4], 4), (0.6, 0.9, [7], 4)])
def test_wino_events_are_seen_in_its_calls(model, threshold, threshold_back, prompt, block):
    """The reference's events that change a token (a commit of the mask token itself is invisible) are exactly
    what the recording reconstructs from the canvases its forwards were fed, step by step, revocations included."""
    proxy = RecordingModel(model)
    result = generate(proxy, torch.tensor([prompt]), 12, block, threshold=threshold, threshold_back=threshold_back)
    seen = proxy.events(result.canvas)
    want = sorted(keys(e for e in result.events if e.old != e.new), key=lambda k: (k[1], k[3]))
    assert sorted(keys(seen), key=lambda k: (k[1], k[3])) == want
    assert len(proxy.calls) == result.forwards[0]
    assert all(math.isnan(e.confidence) for e in seen)
    if threshold == 0.2:
        assert any(e.kind == "revoke" for e in seen)


class Scripted:
    """A decoder that calls the model once per scripted step and then applies that step's writes."""

    def __init__(self, script):
        self.script = script  # per step: {position: token}

    def __call__(self, model, canvas):
        canvas = canvas.clone()
        for writes in self.script:
            model(canvas)
            for position, token in writes.items():
                canvas[0, position] = token
        return canvas


def test_each_kind_of_event_is_named(model):
    """Commit (mask -> token), revocation (token -> mask), edit (token -> other token), each at the step of the
    call whose canvas it followed; the writes after the last call are read from the final canvas."""
    proxy = RecordingModel(model)
    canvas = torch.tensor([[5, MASK, MASK, MASK]])
    final = Scripted([{1: 8, 2: 9}, {1: MASK, 2: 10}, {}, {1: 11, 3: 12}])(proxy, canvas)
    assert keys(proxy.events(final)) == [("commit", 0, 0, 1, MASK, 8), ("commit", 0, 0, 2, MASK, 9),
                                         ("revoke", 1, 0, 1, 8, MASK), ("edit", 1, 0, 2, 9, 10),
                                         ("commit", 3, 0, 1, MASK, 11), ("commit", 3, 0, 3, MASK, 12)]
    kinds = [e.kind for e in proxy.events(final, mask_id=9)]  # an explicit mask id is honoured: 9 is "the mask"
    assert kinds[:4] == ["edit", "revoke", "edit", "commit"]


def test_the_final_canvas_may_drop_the_verification_block(model):
    """Calls one block wider than the returned canvas (WINO's layout): the last step is read on the canvas."""
    proxy = RecordingModel(model)
    final = Scripted([{1: 8}, {1: MASK, 2: 4}])(proxy, torch.tensor([[5, MASK, MASK, MASK, MASK]]))
    assert keys(proxy.events(final[:, :3])) == [("commit", 0, 0, 1, MASK, 8), ("revoke", 1, 0, 1, 8, MASK),
                                                ("commit", 1, 0, 2, MASK, 4)]


def test_calls_that_do_not_show_the_canvas_are_refused(model):
    proxy = RecordingModel(model)
    with pytest.raises(ValueError, match="no model call"):
        proxy.events(torch.tensor([[5, MASK]]))
    Scripted([{}])(proxy, torch.tensor([[5, MASK, MASK]]))
    with pytest.raises(ValueError, match=r"full forwards over the batch of the final canvas \(2 rows\)"):
        proxy.events(torch.tensor([[5, MASK, MASK], [5, MASK, MASK]]))


class Windowed:
    """The editing sampler's calls: each step sees the canvas up to its block's end (a growing prefix)."""

    def __init__(self, script):
        self.script = script  # per step: (window end, {position: token})

    def __call__(self, model, canvas):
        canvas = canvas.clone()
        for end, writes in self.script:
            model(canvas[:, :end])
            for position, token in writes.items():
                canvas[0, position] = token
        return canvas


def test_a_growing_window_shows_its_new_positions_as_masks(model):
    """Calls over a canvas prefix that grows block by block: positions a call does not show count as masked, so
    a commit is placed at the step whose call preceded it, and the final canvas' tail (never shown) as well."""
    proxy = RecordingModel(model)
    canvas = torch.tensor([[5, MASK, MASK, MASK, MASK]])
    final = Windowed([(3, {1: 8, 2: 9}), (3, {2: 6}), (5, {3: 7, 1: MASK}), (5, {4: 2})])(proxy, canvas)
    assert keys(proxy.events(final)) == [("commit", 0, 0, 1, MASK, 8), ("commit", 0, 0, 2, MASK, 9),
                                         ("edit", 1, 0, 2, 9, 6), ("revoke", 2, 0, 1, 8, MASK),
                                         ("commit", 2, 0, 3, MASK, 7), ("commit", 3, 0, 4, MASK, 2)]
    trace = proxy.trace(final, prompt_length=1, mask_id=MASK)
    assert (trace.counters.revocations, trace.counters.edits) == (1, 1)
    assert keys(trace.events) == keys(proxy.events(final))
    shorter = RecordingModel(model)  # a decode that stops before its last block: the tail stays masked
    stopped = Windowed([(3, {1: 8, 2: 9})])(shorter, canvas)
    assert keys(shorter.events(stopped)) == [("commit", 0, 0, 1, MASK, 8), ("commit", 0, 0, 2, MASK, 9)]
