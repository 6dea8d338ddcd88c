"""Every parallel rule through the reference and optimized decoders (spec/parallel.md P11-P12).

Tier E: optimized without cache == reference (same commit order, canvas and counters); in a one-layer model
the prefix and dual caches == reference (stale K/V cannot differ, FD7); a left-padded batch == each row alone.
"""

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from veridec.compare import compare_traces
from veridec.models import random_model
from veridec.oracles import HMMOracle
from veridec.optimized.parallel import decode as optimized
from veridec.reference.parallel import decode as reference
from veridec.rules.parallel import DAPD, KLASS, Threshold
from veridec.rules.presets import PRESETS

NAMES = sorted(PRESETS)


def left_padded(lengths, seed):
    """Prompts of the given lengths, left-padded into [B, max] with their attention mask."""
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    x, mask = torch.zeros(len(lengths), width, dtype=torch.long), torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        x[i, width - n:], mask[i, width - n:] = torch.randint(0, 90, (n,), generator=gen), 1
    return x, mask


def assert_same(a, b):
    assert compare_traces(a.trace, b.trace).same_commit_order
    assert torch.equal(a.canvas, b.canvas)


@settings(max_examples=25)
@given(name=st.sampled_from(NAMES), layout=st.sampled_from(["llada", "dream"]), seed=st.integers(0, 999),
       lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3), blocks=st.integers(1, 3),
       block_length=st.sampled_from([1, 2, 3, 5]), temperature=st.sampled_from([0.0, 0.0, 0.8]))
def test_optimized_without_cache_is_the_reference(small_model, name, layout, seed, lengths, blocks, block_length,
                                                  temperature):
    model = small_model(layout, seed % 3, num_layers=2)
    prompt, mask = left_padded(lengths, seed)
    kw = dict(rule=PRESETS[name], gen_length=blocks * block_length, block_length=block_length,
              temperature=temperature)
    ref = reference(model, prompt, mask, generator=torch.Generator().manual_seed(seed), **kw)
    opt = optimized(model, prompt, mask, cache="none", generator=torch.Generator().manual_seed(seed), **kw)
    assert_same(ref, opt)
    assert ref.trace.counters == opt.trace.counters


@settings(max_examples=25)
@given(name=st.sampled_from(NAMES), layout=st.sampled_from(["llada", "dream"]),
       cache=st.sampled_from(["prefix", "dual"]),
       seed=st.integers(0, 999), blocks=st.integers(1, 3), block_length=st.integers(2, 5))
def test_one_layer_caches_are_exact_for_every_rule(small_model, name, layout, cache, seed, blocks, block_length):
    """P12. KLASS on the dual cache is the exception (below): its history sees the suffix only at refreshes."""
    assume(not (cache == "dual" and name.startswith("klass")))
    model = small_model(layout, seed % 5, num_layers=1)
    prompt, mask = left_padded([4, 2], seed)
    kw = dict(rule=PRESETS[name], gen_length=blocks * block_length, block_length=block_length)
    assert_same(reference(model, prompt, mask, **kw), optimized(model, prompt, mask, cache=cache, **kw))


@pytest.mark.parametrize("cache", ["prefix", "dual"])
@pytest.mark.parametrize("name", ["dapd-hq", "dapd-ht"])
def test_one_layer_caches_are_exact_for_dapd_on_a_shifted_model(small_model, cache, name):
    """P8, P12 on purpose, not by draw: a cached DAPD step on Dream reads attention at each token's query
    position, one column before the token (the draws of the test above reach this pair only now and then)."""
    for seed in range(3):
        model = small_model("dream", seed, num_layers=1)
        prompt, mask = left_padded([5, 3], seed)
        kw = dict(rule=PRESETS[name], gen_length=8, block_length=4)
        assert_same(reference(model, prompt, mask, **kw), optimized(model, prompt, mask, cache=cache, **kw))


def test_klass_history_on_the_dual_cache_differs_from_the_reference(small_model):
    """The dual cache never computes the suffix between refreshes, so KLASS's KL history of the next block's
    positions spans a whole block there, one step in the reference: exact in one layer only for the prefix
    cache (which recomputes the suffix every step)."""
    model = small_model("llada", 56 % 5, num_layers=1)
    prompt = torch.randint(0, 90, (2, 4), generator=torch.Generator().manual_seed(56))
    kw = dict(rule=KLASS(confidence=0.05, kl_threshold=0.05, history=1), gen_length=12, block_length=4)
    ref = reference(model, prompt, **kw)
    assert_same(ref, optimized(model, prompt, cache="prefix", **kw))
    assert not compare_traces(ref.trace, optimized(model, prompt, cache="dual", **kw).trace).same_commit_order


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
@pytest.mark.parametrize("name", ["localleap", "klass-hq", "eb-hq", "dapd-hq", "factor"])
def test_left_padded_batch_equals_single_rows(small_model, cache, name):
    model = small_model("dream", 3, num_layers=2)
    prompt, mask = left_padded([6, 2, 4], 7)
    kw = dict(rule=PRESETS[name], cache=cache, gen_length=8, block_length=4)
    batch = optimized(model, prompt, mask, **kw)
    for i, n in enumerate([6, 2, 4]):
        alone = optimized(model, prompt[i:i + 1, 6 - n:], **kw)
        assert torch.equal(batch.canvas[i, 6 - n:], alone.canvas[0])
        assert batch.trace.commit_order(i) == [{(p + 6 - n, t) for p, t in s} for s in alone.trace.commit_order(0)]


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_corpus_batches_decode_as_their_rows_alone_with_klass(cache):
    """P11/P12: a row whose block is done takes no step while the batch decodes the others' blocks, so KLASS's
    history is not fed extra observations (16 corpus prompts on the shipped model in float64: one row decoded
    differently in the batch when it was)."""
    from veridec.harness.workloads import prompts_for, single_prompts
    from veridec.models.shipped import load_model

    model = load_model("default", dtype=torch.float64)
    prompt, mask = prompts_for("default", model, 16, 0)
    kw = dict(rule=PRESETS["klass-hq"], cache=cache, gen_length=64, block_length=32)
    batch = optimized(model, prompt, mask, **kw)
    for i, single in enumerate(single_prompts(prompt, mask)):
        alone = optimized(model, single, **kw)
        assert torch.equal(batch.canvas[i, prompt.shape[1] - single.shape[1]:], alone.canvas[0]), i


def test_a_row_done_with_its_block_leaves_its_prompt_masks_to_its_own_steps(small_model):
    """P11: masks before the block compete only while the row still decodes the block; once its block is done a
    row takes no step, so a batch fills a prompt mask exactly when the row alone would."""
    model = small_model("llada", 11 % 7)
    prompt = torch.randint(0, 90, (2, 6), generator=torch.Generator().manual_seed(11))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1] * 6])
    prompt[0, 3] = model.special.mask_id  # a mask inside the first row's prompt; row 0 finishes block 0 first
    kw = dict(rule=Threshold(0.1), gen_length=8, block_length=4)
    batch = reference(model, prompt, mask, **kw)
    for i, n in enumerate([4, 6]):
        alone = reference(model, prompt[i:i + 1, 6 - n:], **kw)
        assert torch.equal(batch.canvas[i, 6 - n:], alone.canvas[0]), i
        assert batch.trace.commit_order(i) == [{(p + 6 - n, t) for p, t in s} for s in alone.trace.commit_order(0)]


def test_cached_counters_count_windows_for_dream(small_model):
    """Dream's window starts one position left (the query scoring the block's first token)."""
    model = small_model("dream", 2, num_layers=2)
    prompt, _ = left_padded([3, 3], 1)
    out = optimized(model, prompt, rule=PRESETS["sequential"], cache="dual", gen_length=8, block_length=4)
    assert out.trace.counters.full_forwards == 2
    assert out.trace.counters.query_positions == 2 * (2 * 11 + 3 * (4 + 1) * 2)  # 2 refreshes, 3 steps x 5 queries


def test_models_without_attention_or_cache_are_refused_with_a_reason():
    hmm = HMMOracle.random(3, 5, seed=0)
    prompt = torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="needs attention weights; HMMOracle does not return them"):
        reference(hmm, prompt, rule=DAPD(), gen_length=4, block_length=4)
    with pytest.raises(ValueError, match="cache='dual' needs a model with a K/V cache API"):
        optimized(hmm, prompt, rule=PRESETS["localleap"], gen_length=4, block_length=4)
    assert optimized(hmm, prompt, rule=PRESETS["localleap"], cache="none", gen_length=4, block_length=4)


@pytest.mark.parametrize("kw, message", [
    (dict(gen_length=6, block_length=4), "must be divisible by block_length"),
    (dict(block_length=0), r"block_length must lie in \[1, inf\)"),
    (dict(temperature=-1), r"temperature must lie in \[0, inf\)"),
    (dict(cache="full"), "cache must be one of"),
])
def test_bad_decode_arguments(kw, message):
    args = dict(rule=PRESETS["localleap"], gen_length=8, block_length=4) | kw
    with pytest.raises(ValueError, match=message):
        optimized(random_model("llada", 0), torch.zeros(1, 2, dtype=torch.long), **args)


def test_masks_inside_the_prompt_count_toward_the_step_budget(small_model):
    """Prompt masks are candidates too (P11): a block may take one step per mask before its end, no stall."""
    model = small_model("llada", 0)
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, 90, (1, 12), generator=g)
    prompt[0, torch.randperm(12, generator=g)[:11]] = model.special.mask_id
    ref = reference(model, prompt, rule=PRESETS["sequential"], gen_length=4, block_length=2)
    assert len(ref.trace.steps) == 11 + 4 and (ref.canvas != model.special.mask_id).all()  # one token per step
    assert_same(ref, optimized(model, prompt, rule=PRESETS["sequential"], cache="none", gen_length=4,
                               block_length=2))


def test_a_blocks_step_budget_is_the_batchs_largest_count_and_its_last_step_is_allowed():
    """spec/parallel.md: the budget is the masks a block could commit when it started, the maximum over the
    batch's rows (plus a quota's empty steps; 64 times that sampled); a block that finishes on the last forward
    of that budget + 1 completes, the forward after raises."""
    from veridec.decoding import SAMPLED_PATIENCE, DecodeStalled, check_progress, step_budget
    from veridec.rules.parallel import Quota, TopK

    candidates = torch.tensor([[True, True, True, False], [True, False, False, False]])
    assert step_budget(candidates, TopK(1)) == 3
    assert step_budget(candidates, TopK(1), sampled=True) == 3 * SAMPLED_PATIENCE
    assert step_budget(candidates, Quota(steps_per_block=2)) == 5
    check_progress(3, 0, 3)  # the budget's last allowed forward
    with pytest.raises(DecodeStalled, match="block 0 stalled after 4 steps"):
        check_progress(4, 0, 3)
