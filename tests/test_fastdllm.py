"""Fast-dLLM threshold decoding, reference path (spec/fastdllm.md FD1-FD3)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from veridec.compare import compare_traces
from veridec.oracles import HMMOracle
from veridec.reference.fastdllm import generate
from veridec.reference.llada import generate as llada_generate
from veridec.rules.fastdllm import FastDLLMParams, fastdllm_step


def step_on(confidences, threshold, inclusive=True):
    """Run the rule on hand-made logits whose argmax probabilities are ``confidences`` (one row)."""
    probs = torch.tensor([[c, 1 - c] for c in confidences], dtype=torch.float64)
    logits = probs.log()[None]  # [1, L, 2]
    x = torch.full((1, len(confidences)), 2)  # mask id 2
    params = FastDLLMParams(steps=1, gen_length=1, block_length=1, threshold=threshold, inclusive=inclusive)
    return fastdllm_step(logits, x, x == 2, params).order[0]


def test_threshold_commits_top1_plus_passing_candidates():
    assert step_on([0.6, 0.95, 0.91, 0.7], threshold=0.9) == [1, 2]
    assert step_on([1.0, 0.6, 1.0], threshold=1.0) == [0, 2]  # c = 1 exactly: passes c >= 1 ...
    assert step_on([1.0, 0.6, 1.0], threshold=1.0, inclusive=False) == [0]  # ... not c > 1
    assert step_on([0.6, 0.55, 0.7], threshold=0.99) == [2]  # nothing passes: the top-1 alone
    assert step_on([0.8, 0.8, 0.8], threshold=0.5) == [0, 1, 2]


@given(seed=st.integers(0, 500), prompt_length=st.integers(1, 5), blocks=st.integers(1, 3),
       block_length=st.integers(1, 4))
def test_threshold_one_is_sequential_greedy(seed, prompt_length, blocks, block_length):
    """tau = 1 commits only the top-1 (no exact-1 probabilities here): LLaDA with one token per step."""
    hmm = HMMOracle.random(3, 5, seed=seed)
    prompt = torch.randint(0, 5, (1, prompt_length), generator=torch.Generator().manual_seed(seed))
    gen = blocks * block_length
    fast = generate(hmm, prompt, steps=blocks, gen_length=gen, block_length=block_length, threshold=1.0)
    slow = llada_generate(hmm, prompt, steps=gen, gen_length=gen, block_length=block_length)
    assert torch.equal(fast.canvas, slow.canvas)
    assert fast.trace.counters.full_forwards == gen


@given(layout=st.sampled_from(["llada", "dream"]), seed=st.integers(0, 500),
       lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3), blocks=st.integers(1, 3),
       block_length=st.integers(1, 6), steps_per_block=st.integers(1, 6), temperature=st.sampled_from([0.0, 0.8]),
       remasking=st.sampled_from(["low_confidence", "random"]))
def test_quota_mode_is_llada(small_model, layout, seed, lengths, blocks, block_length, steps_per_block, temperature,
                             remasking):
    """FD3 without threshold or factor is LLaDA's schedule (SQ1.3): in float64 the canvas and commit order equal
    ``reference.llada.generate``'s, random draws included (same generator; steps_per_block <= block_length, so
    no step of LLaDA's schedule is empty and both draw the same noise)."""
    steps_per_block = min(steps_per_block, block_length)
    model = small_model(layout, seed % 3)
    width = max(lengths)
    prompt = torch.randint(0, 90, (len(lengths), width), generator=torch.Generator().manual_seed(seed))
    mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths])
    kw = dict(steps=blocks * steps_per_block, gen_length=blocks * block_length, block_length=block_length,
              temperature=temperature, remasking=remasking)
    fast = generate(model, prompt, mask, generator=torch.Generator().manual_seed(seed), **kw)
    slow = llada_generate(model, prompt, mask, generator=torch.Generator().manual_seed(seed), **kw)
    assert torch.equal(fast.canvas, slow.canvas)
    assert compare_traces(slow.trace, fast.trace).same_commit_order


def test_lower_thresholds_take_fewer_steps_and_every_step_commits():
    hmm = HMMOracle.random(4, 6, seed=1, concentration=0.2)
    prompt = torch.randint(0, 6, (2, 4), generator=torch.Generator().manual_seed(0))
    forwards = []
    for tau in (0.99, 0.7, 0.3):
        canvas, trace = generate(hmm, prompt, steps=2, gen_length=16, block_length=8, threshold=tau)
        assert (canvas != hmm.special.mask_id).all()
        assert all(any(step.positions) for step in trace.steps)  # no step without a commit
        forwards.append(trace.counters.full_forwards)
    assert forwards[0] >= forwards[1] >= forwards[2] and forwards[0] > forwards[2]


@pytest.mark.parametrize("kw, message", [
    (dict(threshold=1.5), r"threshold must lie in \(0, 1\]"),
    (dict(threshold=0.0), r"threshold must lie in \(0, 1\]"),
    (dict(gen_length=6, block_length=4), "must be divisible by block_length"),
])
def test_bad_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        generate(HMMOracle.random(2, 3), torch.zeros(1, 2, dtype=torch.long), **kw)
