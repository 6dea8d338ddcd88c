"""FastGuide (spec/guidance.md GF1-GF4): exact and sparse recomputation, deferral, Tier E and Tier A."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from veridec.compare import compare_traces
from veridec.guidance import GuidanceParams, LinearReward
from veridec.guidance.fastguide import ORDERS, PRESETS, FastGuideParams
from veridec.optimized.fastguide import generate as sparse, window_positions
from veridec.reference.fastguide import generate as exact



def linear_reward(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    return LinearReward(torch.randn(model.vocab_size, 6, generator=g, dtype=model.dtype),
                        torch.randn(6, generator=g, dtype=model.dtype))


def setup(small_model, layout, seed, batch=2, dtype=torch.float64):
    model = small_model(layout, seed % 4, dtype=dtype)
    prompt = torch.randint(0, 90, (batch, 4), generator=torch.Generator().manual_seed(seed))
    return model, prompt, linear_reward(model, seed)


@settings(max_examples=15)
@given(layout=st.sampled_from(["llada", "dream"]), seed=st.integers(0, 300), k=st.integers(1, 5),
       tau=st.sampled_from([0.0, 0.02, 0.05]), greedy=st.booleans(), gen=st.integers(3, 9),
       order=st.sampled_from(ORDERS))
def test_windows_covering_the_canvas_reproduce_exact_recomputation(small_model, layout, seed, k, tau, greedy, gen,
                                                                   order):
    """GF4 Tier E: window radius >= L makes every sparse recomputation a full one (same commit order)."""
    model, prompt, reward = setup(small_model, layout, seed)
    params = FastGuideParams(k=k, tau=tau, window=4 + gen, greedy=greedy, order=order)
    kw = dict(gen_length=gen, params=params, guidance=GuidanceParams(steps=1))
    a = exact(model, prompt, reward, ["", ""], generator=torch.Generator().manual_seed(seed), **kw)
    b = sparse(model, prompt, reward, ["", ""], generator=torch.Generator().manual_seed(seed), **kw)
    assert compare_traces(a.trace, b.trace).same_commit_order and torch.equal(a.canvas, b.canvas)


def test_costs_one_full_pass_and_guidance_per_step_plus_sparse_calls(small_model):
    model, prompt, reward = setup(small_model, "llada", 1)
    out = sparse(model, prompt, reward, ["", ""], gen_length=8, params=FastGuideParams(k=4, tau=0.0, window=1),
                 guidance=GuidanceParams(steps=2), generator=torch.Generator().manual_seed(0))
    steps = len(out.trace.steps)
    assert steps == 2 and out.trace.counters.full_forwards == steps
    assert out.trace.counters.reward_backwards == 2 * steps
    assert out.trace.counters.model_calls == steps * 4  # 1 full + 3 sparse per step (k = 4, nothing deferred)
    sparse_positions = out.trace.counters.query_positions - steps * 2 * 12  # beyond the full passes (B x L)
    assert 0 < sparse_positions <= steps * 3 * 2 * 6  # each window union holds at most 2 (2w + 1) positions


def test_deferral_keeps_unconfident_candidates_masked(small_model):
    model, prompt, reward = setup(small_model, "dream", 2)
    eager = sparse(model, prompt, reward, ["", ""], gen_length=8, params=FastGuideParams(k=8, tau=0.0),
                   guidance=GuidanceParams(steps=1), generator=torch.Generator().manual_seed(0))
    strict = sparse(model, prompt, reward, ["", ""], gen_length=8, params=FastGuideParams(k=8, tau=1.0),
                    guidance=GuidanceParams(steps=1), generator=torch.Generator().manual_seed(0))
    assert len(eager.trace.steps) == 1 and len(strict.trace.steps) == 8  # tau = 1: only the first commits


def test_verification_orders_permute_the_same_candidates(small_model):
    """GF1 order (seed 000 Table 8): the first step verifies the same k candidates in the requested order; with
    tau = 0 every step commits exactly k (the ablation's setting)."""
    model, prompt, reward = setup(small_model, "llada", 4, batch=1)
    first = {}
    for order in ORDERS:
        out = sparse(model, prompt, reward, [""], gen_length=12, params=FastGuideParams(k=4, tau=0.0, order=order),
                     guidance=GuidanceParams(steps=1), generator=torch.Generator().manual_seed(0))
        assert [len(s.positions[0]) for s in out.trace.steps] == [4, 4, 4]
        first[order] = out.trace.steps[0].positions[0]
    by_confidence = first["confidence"]
    assert first["reverse-confidence"] == by_confidence[::-1]
    assert first["left-to-right"] == sorted(by_confidence) != by_confidence
    assert sorted(first["random"]) == sorted(by_confidence)


def test_sparse_recomputation_is_tier_a_and_measured(small_model):
    model, prompt, reward = setup(small_model, "llada", 3, dtype=torch.float32)
    stats = {}
    sparse(model, prompt, reward, ["", ""], gen_length=10, params=FastGuideParams(k=5, tau=0.0, window=1),
           guidance=GuidanceParams(steps=1), generator=torch.Generator().manual_seed(0), measure_tv=True, stats=stats)
    assert stats["candidates"] > 0 and 0 < stats["tv_mean"] <= stats["tv_max"] <= 1


def test_window_positions_are_unions_padded_to_one_size():
    positions = window_positions(torch.tensor([5, 10]), torch.tensor([6, 2]), 1, 16)
    assert positions.tolist() == [[3, 4, 5, 6, 7, 8], [1, 2, 3, 9, 10, 11]]


def test_presets_and_bad_parameters():
    assert PRESETS["fastguide-hq"].k == 8 and PRESETS["fastguide-ht"].k == 16 and PRESETS["fastguide-hq"].tau == 0.5
    for kw, message in [(dict(k=0), r"k must lie in \[1, inf\)"), (dict(window=-1), r"window must lie in \[0, inf\)"),
                        (dict(tau=1.5), r"tau must lie in \[0, 1\]"), (dict(order="up"), r"order must be one of")]:
        with pytest.raises(ValueError, match=message):
            FastGuideParams(**kw)
