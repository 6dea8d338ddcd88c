"""Narrowed logits (spec/models.md M5.1, spec/parallel.md P11.1): a forward asked for a few tokens' logits runs its
last layer for their scoring queries only, and the optimized parallel decoder asks for the step's columns only.
The truth is the whole forward, sliced; float64 models, so the two differ by rounding alone (measured below)."""

from __future__ import annotations

import pytest
import torch

from veridec.models import random_model
from veridec.optimized.parallel import decode
from veridec.rules.parallel import KLASS, Threshold
from veridec.rules.presets import PRESETS

# measured: narrowed float64 logits differ from the whole forward's by at most 1.6e-15 here (a few ulps of
# logits of size ~1); a wrong row differs by O(1)
ROUNDING = 1e-12


def padded_canvas(layout: str, length: int = 12):
    """Two rows: one unpadded, one with 5 positions of left padding (its first real token at 5)."""
    model = random_model(layout, 3, dtype=torch.float64)
    x = torch.randint(0, model.special.mask_id, (2, length), generator=torch.Generator().manual_seed(1))
    x[:, 8:] = model.special.mask_id
    mask = torch.ones_like(x)
    mask[1, :5] = 0
    return model, x, mask


WINDOWS = [(0, 1), (0, 12), (1, 3), (4, 6), (5, 9), (8, 12), (11, 12)]


@pytest.mark.parametrize("layout", ["llada", "dream"])
@pytest.mark.parametrize("window", WINDOWS)
def test_a_narrowed_forward_returns_those_tokens_logits(layout, window):
    """Dream (shift 1) scores token t at t - 1, a row's first real token at itself: (1, 3) lies in row 1's
    padding, whose tokens are scored by position 5, past the window."""
    model, x, mask = padded_canvas(layout)
    logit_rows = slice(*window)
    whole = model(x, mask).logits[:, logit_rows]  # [B, W, V]
    narrow = model(x, mask, logit_rows=logit_rows).logits
    assert narrow.shape == whole.shape
    torch.testing.assert_close(narrow, whole, rtol=0, atol=ROUNDING)
    _, cache = model.prefill(x, mask)
    out, narrow_cache = model.prefill(x, mask, logit_rows=logit_rows)
    torch.testing.assert_close(out.logits, whole, rtol=0, atol=ROUNDING)
    for layer in range(model.cfg.num_layers):  # every key and value is still computed and cached
        assert torch.equal(narrow_cache.keys[layer], cache.keys[layer])
        assert torch.equal(narrow_cache.values[layer], cache.values[layer])


def test_the_comparison_fails_on_rows_one_off(monkeypatch):
    """Negative control: scoring rows shifted by one (Dream's rows read as LLaDA's) fail the comparison above."""
    model, x, mask = padded_canvas("dream")
    whole = model(x, mask).logits[:, 1:7]  # [B, 6, V]
    original = type(model).scoring_rows
    monkeypatch.setattr(type(model), "scoring_rows", lambda self, logit_rows, m: original(self, logit_rows, m) + 1)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(model(x, mask, logit_rows=slice(1, 7)).logits, whole, rtol=0, atol=ROUNDING)


def test_cached_logit_rows_return_those_queries_and_write_the_same_cache():
    model, x, mask = padded_canvas("llada")
    _, cache = model.prefill(x, mask)
    narrow_cache = cache.clone()
    positions = torch.arange(4, 12).expand(2, -1)  # [B, 8]
    whole = model.forward_cached(x[:, 4:], positions, cache).logits  # [B, 8, V]
    rows = torch.tensor([0, 1, 2])
    narrow = model.forward_cached(x[:, 4:], positions, narrow_cache, logit_rows=rows).logits
    torch.testing.assert_close(narrow, whole[:, :3], rtol=0, atol=ROUNDING)
    assert all(torch.equal(a, b) for a, b in zip(narrow_cache.keys + narrow_cache.values, cache.keys + cache.values))
    assert narrow_cache.writes == cache.writes


@pytest.mark.parametrize("logit_rows", [slice(3, 3), slice(5, 2), slice(-1, 4), slice(0, 13), slice(0, 4, 2),
                                    slice(True, 4), slice(0.0, 4), (0, 4), slice(None, 4)])
def test_a_bad_token_window_is_refused_by_name(logit_rows):
    model, x, mask = padded_canvas("llada")
    with pytest.raises(ValueError, match=r"logit_rows must be a slice of canvas positions \[start, stop\) with "
                                         r"0 <= start < stop <= 12"):
        model(x, mask, logit_rows=logit_rows)


def test_logit_rows_and_attention_weights_exclude_each_other():
    model, x, _ = padded_canvas("llada")
    with pytest.raises(ValueError, match="logit_rows and output_attentions exclude each other"):
        model.raw_forward(x, torch.arange(12).expand(2, -1), logit_rows=torch.tensor([0]), output_attentions=True)


def test_narrow_logits_must_be_a_bool():
    model, x, _ = padded_canvas("llada")
    with pytest.raises(ValueError, match="narrow_logits must be True or False, got 1"):
        decode(model, x[:1, :4], rule=Threshold(0.9), narrow_logits=1)


class RowCounter:
    """Wraps a model's core: records how many logit rows each forward returned."""

    def __init__(self, model):
        self.rows, inner = [], model.raw_forward

        def counted(*args, **kwargs):
            out = inner(*args, **kwargs)
            self.rows.append(out.logits.shape[1])
            return out

        model.raw_forward = counted


CASES = [("none", "llada"), ("prefix", "llada"), ("dual", "llada"), ("none", "dream"), ("prefix", "dream")]


@pytest.mark.parametrize("cache,layout", CASES)
def test_the_decoder_computes_the_block_rows_only_and_decodes_the_same(cache, layout):
    """Prompt 8, gen 16, block 4: a whole-window forward returns up to 24 rows; a narrowed one the block's 4 (Dream:
    5, the query before the block too). Same tokens, commit order, counters; confidences equal up to rounding."""
    model = random_model(layout, 0, dtype=torch.float64)
    prompt = torch.randint(0, model.special.mask_id, (2, 8), generator=torch.Generator().manual_seed(2))
    run = lambda narrow: decode(model, prompt, rule=Threshold(0.5), cache=cache, gen_length=16,  # noqa: E731
                                block_length=4, narrow_logits=narrow)
    counter = RowCounter(model)
    whole = run(False)
    whole_rows, counter.rows = counter.rows, []
    narrow = run(True)
    assert max(whole_rows) == 24 and max(counter.rows) == 4 + model.logit_shift, (whole_rows, counter.rows)
    assert torch.equal(narrow.canvas, whole.canvas)
    assert narrow.trace.counters == whole.trace.counters
    for a, b in zip(narrow.trace.steps, whole.trace.steps, strict=True):
        assert (a.block, a.positions, a.tokens) == (b.block, b.positions, b.tokens)
        torch.testing.assert_close(torch.tensor(sum(a.confidences, [])), torch.tensor(sum(b.confidences, [])),
                                   rtol=0, atol=ROUNDING)


@pytest.mark.parametrize("why,options", [
    ("KLASS remembers the whole window", dict(rule=KLASS(0.5, 0.5))),
    ("a temperature draws noise over the window", dict(rule=Threshold(0.5), temperature=0.7,
                                                       generator=torch.Generator().manual_seed(0))),
    ("random remasking draws over the window", dict(rule=PRESETS["fastdllm"], remasking="random",
                                                    generator=torch.Generator().manual_seed(0))),
    ("DAPD reads attention weights", dict(rule=PRESETS["dapd-hq"])),
])
def test_steps_that_read_more_than_their_columns_get_the_whole_window(why, options):
    model = random_model("llada", 0, dtype=torch.float64)
    counter = RowCounter(model)
    decode(model, torch.tensor([[5, 6, 7, 8]]), cache="prefix", gen_length=8, block_length=4, **options)
    assert max(counter.rows) == 12, why


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_a_compiled_decode_narrows_too_and_equals_eager(cache):
    """The compiled wrapper's forwards take ``logit_rows``: its graphs run the block's rows only, and
    under ``aot_eager`` (the eager kernels) record the eager narrowed decode exactly."""
    from veridec.optimized.compiled import compiled

    aot_eager = {"backend": "aot_eager"}
    model = random_model("llada", 0)
    wrapper, rows = compiled(model, aot_eager), []
    graph = wrapper._graph

    def counted(*args, **kwargs):
        out = graph(*args, **kwargs)
        rows.append(out.logits.shape[1])
        return out

    wrapper._graph = counted
    prompt = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    run = lambda compile: decode(model, prompt, rule=Threshold(0.5), cache=cache, gen_length=16,  # noqa: E731
                                 block_length=4, compile=compile)
    eager, fast = run(False), run(aot_eager)
    assert rows and max(rows) == 4, rows
    assert torch.equal(fast.canvas, eager.canvas) and fast.trace.to_dict() == eager.trace.to_dict()


def test_block_causal_and_per_query_biases_are_narrowed_with_their_queries():
    """A bias with a query axis (block-causal forwards; a cached forward's ``attn_bias``) is selected with the
    queries: the narrowed logits are the whole forward's."""
    model, x, _ = padded_canvas("llada")
    whole = model(x, block_size=4).logits[:, 4:9]  # [B, 5, V]
    torch.testing.assert_close(model(x, block_size=4, logit_rows=slice(4, 9)).logits, whole, rtol=0, atol=ROUNDING)
    _, cache = model.prefill(x)
    positions = torch.arange(4, 12).expand(2, -1)  # [B, 8]
    bias = torch.zeros(1, 1, 8, 12).masked_fill(torch.rand(1, 1, 8, 12, generator=torch.Generator().manual_seed(0))
                                                < 0.3, float("-inf"))
    bias[..., 0] = 0  # every query keeps a key
    whole = model.forward_cached(x[:, 4:], positions, cache.clone(), attn_bias=bias).logits  # [B, 8, V]
    rows = torch.tensor([1, 5, 6])
    narrow = model.forward_cached(x[:, 4:], positions, cache.clone(), attn_bias=bias, logit_rows=rows).logits
    torch.testing.assert_close(narrow, whole[:, rows], rtol=0, atol=ROUNDING)


@pytest.mark.parametrize("name", ["generate", "generate_with_prefix_cache", "generate_with_dual_cache"])
def test_the_fastdllm_decoders_narrow_by_default_and_not_when_told(name):
    from veridec.optimized import fastdllm

    model = random_model("dream", 0, dtype=torch.float64)  # Dream: a dual step cuts the query before the block
    counter = RowCounter(model)
    prompt = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    run = lambda **o: getattr(fastdllm, name)(model, prompt, steps=8, gen_length=16, block_length=4,  # noqa: E731
                                              threshold=0.5, **o)
    run()
    narrowed, counter.rows = counter.rows, []
    run(narrow_logits=False)
    # a refresh: the block and the query before it (5 rows) against the canvas (24); cached steps cut to 4
    assert max(narrowed) == 5 and max(counter.rows) == 24 and sum(narrowed) < sum(counter.rows)


CACHED_TARGETS = [("fastdllm", "prefix"), ("fastdllm", "dual"), ("fastdllm-2025-06", "prefix"),
                  ("fastdllm-2025-06", "dual")]


@pytest.mark.parametrize("key", CACHED_TARGETS)
def test_a_cached_check_target_and_its_reproducer_run_whole_windows(key, monkeypatch):
    """The check's cached Fast-dLLM targets compute every window column, and the call a failure report prints
    (``report.reproducer_snippet``: ``{name}(model, prompt, attention_mask, ties=..., {fixed}{settings})``) is the
    same call. A narrowed forward is made unmistakable here (+100 on token 0), so either narrowing shows."""
    import importlib

    from veridec.models.transformer import BidirectionalTransformer
    from veridec.testing import load_check_model
    from testing.targets import TARGETS

    original = BidirectionalTransformer.raw_forward

    def loud(self, *args, logit_rows=None, **kwargs):
        out = original(self, *args, logit_rows=logit_rows, **kwargs)
        if logit_rows is not None:
            out.logits[..., 0] += 100.0
        return out

    monkeypatch.setattr(BidirectionalTransformer, "raw_forward", loud)
    target, model = TARGETS[key], load_check_model("tiny-llada")
    prompt, settings = torch.tensor([[1, 2, 3]]), dict(gen_length=8, block_length=4, steps=4, threshold=0.9)
    expected = target.decode(model, prompt, None, "lowest", **settings).canvas
    module, name = target.call.rsplit(".", 1)
    arguments = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    namespace = {name: getattr(importlib.import_module(module), name), "model": model, "prompt": prompt,
                 "attention_mask": None}
    printed = eval(f"{name}(model, prompt, attention_mask, ties='lowest', {target.fixed}{arguments}).canvas",
                   namespace)  # noqa: S307
    assert torch.equal(printed, expected)
    assert not (expected[0, 3:] == 0).all()  # not the loud token everywhere: the target computed whole windows


def test_a_recording_proxy_gets_whole_windows_and_the_compiled_wrapper_narrows():
    """The flag is read statically: a proxy that forwards attributes (``RecordingModel``, which pairs each cached
    call's logits with its positions) is not narrowed; the compiled wrapper declares it for its model."""
    from veridec.models.interface import takes_narrow_logits
    from veridec.optimized.compiled import compiled
    from veridec.recording import RecordingModel

    model = random_model("llada", 0)
    assert takes_narrow_logits(model) and compiled(model, {"backend": "aot_eager"}).narrow_logits
    proxy = RecordingModel(model, keep_logits=True)
    assert proxy.narrow_logits and not takes_narrow_logits(proxy)  # forwarded, not declared
    decoded = decode(proxy, torch.tensor([[5, 6, 7, 8]]), rule=Threshold(0.5), cache="prefix", gen_length=8,
                     block_length=4)
    assert all(call.logits.shape[1] == call.positions.shape[1] for call in proxy.calls if call.logits is not None)
    assert proxy.logit_errors(decoded.canvas, 4)  # each cached call's logits against a full forward
