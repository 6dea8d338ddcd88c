"""The recording proxy (veridec.recording): from a decoder's model calls alone it gives the counters (N8) and the
commit order a veridec trace records. Held against our own decoders, whose traces are the truth here: every
preset on every path, both layouts, a left-padded batch, LLaDA's and Dream's samplers."""

import pytest
import torch

from veridec.compare import compare_traces
from veridec.optimized.parallel import decode as optimized
from veridec.optimized.speculative import decode as speculative
from veridec.recording import RecordingModel
from veridec.reference.dream import diffusion_generate
from veridec.reference.llada import generate as llada
from veridec.reference.parallel import decode as reference
from veridec.rules.parallel import Threshold
from veridec.rules.presets import PRESETS

PROMPT = torch.tensor([[0, 0, 11, 12], [21, 22, 23, 24]])
MASK = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
PATHS = {"reference": lambda m, **kw: reference(m, PROMPT, MASK, **kw),
         **{cache: (lambda c: lambda m, **kw: optimized(m, PROMPT, MASK, cache=c, **kw))(cache)
            for cache in ("none", "prefix", "dual")}}


def same_as_recorded(decoded, proxy) -> None:
    recorded = proxy.trace(decoded.canvas, PROMPT.shape[1])
    assert compare_traces(decoded.trace, recorded).same_commit_order
    mine, theirs = decoded.trace.counters, proxy.counters()
    assert (mine.model_calls, mine.full_forwards, mine.query_positions) == \
        (theirs.model_calls, theirs.full_forwards, theirs.query_positions)


@pytest.mark.parametrize("layout", ["llada", "dream"])
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_calls_show_every_decoders_commit_order_and_counters(small_model, layout, path, name):
    proxy = RecordingModel(small_model(layout, 1))
    same_as_recorded(PATHS[path](proxy, rule=PRESETS[name], gen_length=8, block_length=4), proxy)


@pytest.mark.parametrize("layout", ["llada", "dream"])
def test_the_official_samplers_too(small_model, layout):
    proxy = RecordingModel(small_model(layout, 2))
    same_as_recorded(llada(proxy, PROMPT, MASK, steps=4, gen_length=8, block_length=4), proxy)
    proxy = RecordingModel(small_model(layout, 2))
    same_as_recorded(diffusion_generate(proxy, PROMPT, MASK, max_new_tokens=8, steps=4, alg="entropy"), proxy)


def test_a_commit_the_calls_did_not_see_in_order_would_show(small_model):
    """The reconstruction is not a copy of the decoder's trace: skipping a call (as if it were not made)
    merges two steps, and the commit order differs."""
    proxy = RecordingModel(small_model("llada", 3))
    decoded = reference(proxy, PROMPT, MASK, rule=PRESETS["sequential"], gen_length=8, block_length=4)
    del proxy.calls[2]
    assert not compare_traces(decoded.trace, proxy.trace(decoded.canvas, PROMPT.shape[1])).same_commit_order


def test_drafts_are_measured_by_counters_only(small_model):
    proxy = RecordingModel(small_model("llada", 4))
    decoded = speculative(proxy, PROMPT[1:], rule=Threshold(0.1), cache="dual", width=2, depth=2, gen_length=8,
                          block_length=4)
    assert proxy.counters().model_calls == decoded.trace.counters.model_calls
    assert proxy.counters().query_positions == decoded.trace.counters.query_positions
    with pytest.raises(ValueError, match="drafts or stacked states"):
        proxy.trace(decoded.canvas, 4)



@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_logit_error_is_rounding_where_the_cache_is_exact_and_not_where_it_is_stale(small_model, cache):
    """A one-layer model's cache is exact (a layer-0 key or value depends on its own token alone), so every cached
    call's logits equal a full forward of the canvas the decoder held to float64 rounding; with two layers the
    keys cached before a block's commits are stale and the error is real. Without a cache nothing is measured."""
    errors = {}
    for layers in (1, 2):
        proxy = RecordingModel(small_model("llada", 5, num_layers=layers), keep_logits=True)
        decoded = optimized(proxy, PROMPT, MASK, cache=cache, rule=Threshold(0.3), gen_length=8, block_length=4)
        measured = proxy.logit_errors(decoded.canvas, PROMPT.shape[1], MASK)
        assert len(measured) == sum(call.kind == "cached" for call in proxy.calls) > 0
        errors[layers] = max(measured)
    assert errors[1] < 1e-12 < 1e-6 < errors[2], errors
    proxy = RecordingModel(small_model("llada", 5), keep_logits=True)
    decoded = optimized(proxy, PROMPT, MASK, cache="none", rule=Threshold(0.3), gen_length=8, block_length=4)
    assert proxy.logit_errors(decoded.canvas, PROMPT.shape[1], MASK) == []


def test_logit_error_holds_a_call_against_the_canvas_the_decoder_held_then(small_model):
    """A decoder that prefills the all-mask canvas once and then decodes the block one token per cached call,
    feeding only the masks left (its committed tokens never reach the model again): the one-layer model is exact
    for what it is fed, but the canvas it held had those commits, so every call after the first commit errs."""
    model = small_model("llada", 6, num_layers=1)
    proxy = RecordingModel(model, keep_logits=True)
    mask_id = model.special.mask_id
    canvas = torch.cat([PROMPT[1:], torch.full((1, 4), mask_id)], dim=1)  # [1, 8]
    _, cache = proxy.prefill(canvas)
    for step in range(4):
        positions = torch.arange(4 + step, 8)[None]  # [1, Q] the masks left
        logits = proxy.forward_cached(canvas[:, 4 + step:], positions, cache).logits  # [1, Q, V]
        canvas[0, 4 + step] = logits[0, 0].argmax()
    errors = proxy.logit_errors(canvas, 4)
    assert errors[0] < 1e-12 and min(errors[1:]) > 1e-6, errors
