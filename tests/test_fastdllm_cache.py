"""Fast-dLLM with prefix and dual caches (spec/fastdllm.md FD5-FD7): exact where the theory says so, counters."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from veridec.compare import compare_traces
from veridec.optimized.fastdllm import generate_with_dual_cache, generate_with_prefix_cache
from veridec.reference.fastdllm import generate

CACHED = {"prefix": generate_with_prefix_cache, "dual": generate_with_dual_cache}


def prompts(batch, length, seed):
    return torch.randint(0, 90, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("cache", sorted(CACHED))
@pytest.mark.parametrize("layout", ["llada", "dream"])
@given(seed=st.integers(0, 999), blocks=st.integers(1, 3), block_length=st.integers(2, 5),
       threshold=st.sampled_from([None, 0.02, 0.1, 0.3]))
def test_one_layer_caches_are_exact(small_model, cache, layout, seed, blocks, block_length, threshold):
    """FD7: in a one-layer model the cached K/V depend only on tokens that do not change within a block
    (the committed prefix; the still-masked suffix), so both caches reproduce the reference exactly."""
    model = small_model(layout, seed % 5, num_layers=1)
    prompt = prompts(2, 4, seed)
    kw = dict(steps=blocks * 2, gen_length=blocks * block_length, block_length=block_length, threshold=threshold)
    ref = generate(model, prompt, **kw)
    fast = CACHED[cache](model, prompt, **kw)
    assert compare_traces(ref.trace, fast.trace).same_commit_order
    assert torch.equal(ref.canvas, fast.canvas)


@pytest.mark.parametrize("cache", sorted(CACHED))
def test_first_step_of_each_block_is_the_reference_step(small_model, cache):
    """FD5: each block starts with a full forward of the current canvas: its first step is the reference's
    first step on that canvas (earlier blocks taken as the prompt)."""
    model = small_model("llada", 1, num_layers=3)
    prompt = prompts(1, 5, 0)
    fast = CACHED[cache](model, prompt, steps=3, gen_length=12, block_length=4, threshold=0.3)
    assert fast.trace.counters.full_forwards == 3
    canvas = torch.cat([prompt, torch.full((1, 12), model.special.mask_id)], 1)
    for i, step in enumerate(fast.trace.steps):
        if i == 0 or step.block != fast.trace.steps[i - 1].block:  # a block's refresh step
            start = 5 + 4 * step.block
            ref = generate(model, canvas[:, :start], steps=3 - step.block, gen_length=12 - 4 * step.block,
                           block_length=4, threshold=0.3)
            assert ref.trace.steps[0].committed(0) == step.committed(0), step.block
        canvas[0, step.positions[0]] = torch.tensor(step.tokens[0], dtype=torch.long)


@pytest.mark.parametrize("cache, window", [("prefix", lambda s, L, e: L - s), ("dual", lambda s, L, e: e - s)])
def test_counters_count_refreshes_and_window_queries(small_model, cache, window):
    model = small_model("llada", 2, num_layers=2)
    prompt = prompts(2, 3, 1)
    out = CACHED[cache](model, prompt, steps=4, gen_length=8, block_length=4, threshold=0.2)
    length, blocks = 11, 2
    assert out.trace.counters.full_forwards == blocks
    cached_steps = [sum(1 for s in out.trace.steps if s.block == b) - 1 for b in range(blocks)]  # after refresh
    expected = 2 * length * blocks + sum(2 * window(3 + 4 * b, length, 3 + 4 * (b + 1)) * n
                                         for b, n in enumerate(cached_steps))
    assert out.trace.counters.query_positions == expected


@pytest.mark.parametrize("cache", sorted(CACHED))
def test_left_padded_batch_equals_single_rows(small_model, cache):
    model = small_model("llada", 3, num_layers=2)
    rows = [prompts(1, n, n)[0] for n in (6, 2, 4)]
    x = torch.zeros(3, 6, dtype=torch.long)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for i, r in enumerate(rows):
        x[i, 6 - len(r):], mask[i, 6 - len(r):] = r, 1
    kw = dict(steps=4, gen_length=8, block_length=4, threshold=0.1)
    batch = CACHED[cache](model, x, mask, **kw)
    for i, r in enumerate(rows):
        alone = CACHED[cache](model, r[None], **kw)
        assert torch.equal(batch.canvas[i, 6 - len(r):], alone.canvas[0])



def test_a_loop_is_refused_where_the_official_code_has_none(small_model):
    """FD6: ``loop`` names an official loop; the June 2025 loop's extra forward is a cached step's, so the
    decoder without cache refuses it (a ValueError, never a silent no-op), and an unknown name is refused."""
    from veridec.optimized import fastdllm

    model, prompt = small_model("llada", 0), prompts(1, 4, 0)
    with pytest.raises(ValueError, match=r"loop='june2025' runs with cache in \['prefix', 'dual'\], not cache='none'"):
        fastdllm.generate(model, prompt, steps=2, gen_length=4, block_length=2, loop="june2025")
    with pytest.raises(ValueError, match=r"loop must be one of \['current', 'june2025'\], got 'legacy'"):
        generate_with_dual_cache(model, prompt, steps=2, gen_length=4, block_length=2, loop="legacy")
    assert generate_with_prefix_cache(model, prompt, steps=2, gen_length=4, block_length=2, loop="june2025").trace
