"""Fast-dLLM v2's rule and decoders (spec/fastdllm_v2.md): the commit rule and the top-p cut held against oracles
written from the spec alone (each with the one-line bug it kills), bad input refused by name, the prefix-cached
decoder exact to the reference (tier E, V2.12) with rows independent of their batch (negative control: row 0's draw
for every row), the block cache tier A with its drift (exact where the sub-block is the block)."""

import math

import pytest
import torch

from veridec.canvas import left_pad
from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.optimized import fastdllm_v2 as optimized
from veridec.reference import fastdllm_v2 as reference
from veridec.rules import fastdllm_v2 as rule
from veridec.rules.fastdllm_v2 import commits, generated_tokens, nucleus, stop_reached


@pytest.fixture(scope="module")
def model():
    return never_predicts_mask(random_model("fastdllm_v2", seed=11, dtype=torch.float64))


def oracle_commits(confidence: list[float], masked: list[bool], threshold: float) -> list[bool]:
    """V2.6 from the text: masks above the threshold, strictly; and the most confident mask, the first on ties."""
    best = max((c for c, m in zip(confidence, masked) if m), default=None)
    first = next(i for i, (c, m) in enumerate(zip(confidence, masked)) if m and c == best)
    return [m and (c > threshold or i == first) for i, (c, m) in enumerate(zip(confidence, masked))]


@pytest.mark.parametrize("confidence, masked, threshold", [
    ([0.5, 0.9, 0.9, 0.2], [True, True, True, True], 0.5),  # equal to the threshold: not committed (strict)
    ([0.3, 0.3, 0.1], [True, True, True], 0.9),  # none above: the first of the tied best
    ([0.99, 0.2, 0.95], [False, True, True], 0.9),  # an unmasked position never commits, however confident
    ([0.1, 0.2, 0.3], [True, True, True], 1.0),  # generate's default: the argmax alone
    ([0.4, 0.6, 0.6], [True, True, False], 0.0),  # threshold 0: every mask with p > 0
    ([0.9, 0.8], [False, False], 0.5),  # no mask: nothing, not even an argmax
])
def test_the_commit_rule_equals_its_oracle(confidence, masked, threshold):
    if not any(masked):
        assert not commits(torch.tensor([confidence], dtype=torch.float64), torch.tensor([masked]), threshold).any()
        return
    found = commits(torch.tensor([confidence], dtype=torch.float64), torch.tensor([masked]), threshold)[0].tolist()
    assert found == oracle_commits(confidence, masked, threshold)


def oracle_nucleus(probs: list[float], top_p: float) -> list[float]:
    """The published cut from its description: in decreasing order, a token stays while the mass before it is at
    most top_p (so the token that crosses top_p stays), the rest is zero, then renormalised."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    kept, before = [0.0] * len(probs), 0.0
    for i in order:
        if before <= top_p or before == 0.0:
            kept[i] = probs[i]
        before += probs[i]
    total = sum(kept)
    return [k / total for k in kept]


@pytest.mark.parametrize("top_p", [0.95, 0.5, 0.3, 0.1, 1.0])
def test_the_top_p_cut_equals_its_oracle(top_p):
    probs = torch.softmax(torch.randn(6, 9, generator=torch.Generator().manual_seed(3), dtype=torch.float64), -1)
    for row in probs:
        assert torch.allclose(nucleus(row, top_p), torch.tensor(oracle_nucleus(row.tolist(), top_p),
                                                                dtype=torch.float64), atol=1e-15)


def test_temperature_zero_proposes_the_argmax_lowest_id_first_and_its_probability():
    logits = torch.tensor([[[1.0, 3.0, 3.0, 0.0]]], dtype=torch.float64)
    tokens, confidence, _ = rule.propose(logits, 0.0, 0.95)
    assert tokens.tolist() == [[1]] and math.isclose(confidence.item(), math.exp(3) / (2 * math.exp(3) + math.e + 1))


def test_the_stop_needs_no_mask_before_its_first_occurrence():
    assert stop_reached(torch.tensor([4, 9, 5]), 9, 0)
    assert not stop_reached(torch.tensor([0, 9, 5]), 9, 0)  # a mask before it: decoding goes on
    assert not stop_reached(torch.tensor([4, 5, 6]), 9, 0)
    assert generated_tokens(torch.tensor([9, 1, 9, 2, 9]), 1, 9) == [9, 1, 9]  # the prompt's stop does not count


@pytest.mark.parametrize("change, message", [
    ({"small_block_size": 3}, "small_block_size 3 must divide block_size 8"),
    ({"threshold": 1.5}, "threshold must lie in"), ({"threshold": -0.1}, "threshold must lie in"),
    ({"threshold": float("nan")}, "threshold must be a finite number"),
    ({"temperature": -1.0}, "temperature must lie in"), ({"top_p": 0.0}, "top_p must lie in"),
    ({"max_new_tokens": 4}, "max_new_tokens 4 must be at least block_size 8"),
    ({"stop_token": -2}, "stop_token must be a token id"),
])
def test_bad_settings_are_refused_by_name(model, change, message):
    settings = {"max_new_tokens": 8, "block_size": 8, "small_block_size": 4, **change}
    for decoder in (reference.generate, optimized.generate):
        with pytest.raises(ValueError, match=message):
            decoder(model, torch.tensor([[1, 2, 3]]), **settings)


def test_a_model_without_the_v2_layout_a_long_prompt_a_masked_prompt_and_a_cached_batch_are_refused(model):
    llada = random_model("llada", seed=1)
    with pytest.raises(ValueError, match="logit shift 1"):
        optimized.generate(llada, torch.tensor([[1, 2]]), max_new_tokens=8, block_size=8)
    short = random_model("fastdllm_v2", seed=1, max_length=16)
    with pytest.raises(ValueError, match="more than the model's max_length 16"):
        reference.generate(short, torch.tensor([[1] * 9]), max_new_tokens=8, block_size=8)
    with pytest.raises(ValueError, match="no mask token in the prompt"):
        optimized.generate(model, torch.tensor([[1, model.special.mask_id, 2]]), max_new_tokens=8, block_size=8)
    with pytest.raises(ValueError, match="use_block_cache: one row at a time"):
        optimized.generate(model, torch.tensor([[1, 2], [3, 4]]), max_new_tokens=8, block_size=8,
                           use_block_cache=True)


ROWS = [[5, 17, 3], [8, 1, 2, 9, 4, 6, 7, 11, 12], [30, 31, 32, 33, 34, 35, 36, 37]]  # shorter, longer, one block


@pytest.mark.parametrize("threshold, small", [(0.3, 4), (1.0, 2), (0.05, 8), (0.6, 4)])
def test_the_cached_decoder_is_exact_to_the_reference(model, threshold, small):
    """Tier E (V2.12): per row the same commits in the same order, the same canvas; fewer query positions."""
    prompt, mask = left_pad(ROWS, model.special.pad_id)
    settings = dict(max_new_tokens=16, block_size=8, small_block_size=small, threshold=threshold, stop_token=40)
    slow = reference.generate(model, prompt, mask, **settings)
    fast = optimized.generate(model, prompt, mask, **settings)
    assert torch.equal(slow.canvas, fast.canvas)
    for row in range(len(ROWS)):
        assert slow.trace.commit_order(row) == fast.trace.commit_order(row)
    assert fast.trace.counters.query_positions < slow.trace.counters.query_positions


def test_sampled_decodes_agree_on_one_row_with_one_seed(model):
    settings = dict(max_new_tokens=16, block_size=8, small_block_size=4, threshold=0.5, temperature=0.9, top_p=0.9)
    runs = []
    for decoder in (reference.generate, optimized.generate):
        torch.manual_seed(5)
        runs.append(decoder(model, torch.tensor([ROWS[1]]), **settings).canvas)
    assert torch.equal(*runs)


def single_rows(model, settings: dict) -> list[list[int]]:
    """Each row decoded alone, to the batch's end (V2.3: the canvas ends max_new_tokens // b blocks after the
    longest prompt's block)."""
    longest = max(map(len, ROWS)) // settings["block_size"]
    found = []
    for row in ROWS:
        extra = (longest - len(row) // settings["block_size"]) * settings["block_size"]
        torch.manual_seed(7)
        decoded = optimized.generate(model, torch.tensor([row]), **{**settings, "max_new_tokens":
                                                                     settings["max_new_tokens"] + extra})
        found.append(generated_tokens(decoded.canvas[0], len(row), settings["stop_token"]))
    return found


def batch_rows(model, settings: dict) -> list[list[int]]:
    prompt, mask = left_pad(ROWS, model.special.pad_id)
    torch.manual_seed(7)
    decoded = optimized.generate(model, prompt, mask, **settings)
    return [generated_tokens(decoded.canvas[r], len(row), settings["stop_token"]) for r, row in enumerate(ROWS)]


def test_a_row_decodes_as_alone_and_row_zeros_logits_for_every_row_break_it(model, monkeypatch):
    """V2.10 at temperature 0: batch invariance; the negative control hands every row row 0's shifted logits (what
    #64's sampler does with its draw), which the same check must catch."""
    settings = dict(max_new_tokens=16, block_size=8, small_block_size=4, threshold=0.4, stop_token=40)
    assert batch_rows(model, settings) == single_rows(model, settings)
    monkeypatch.setattr(optimized, "token_shift", lambda raw: rule.token_shift(raw[:1]).expand_as(raw))
    assert batch_rows(model, settings) != single_rows(model, settings)


def test_the_block_cache_is_exact_where_the_sub_block_is_the_block_and_drifts_otherwise(model):
    """V2.8: with one sub-block per block a cached step recomputes the whole block (tier E); with smaller ones the
    other sub-blocks' keys and values are stale (tier A: the drift measured on a fixed set of prompts)."""
    prompts = [torch.tensor([row]) for row in ROWS] + [torch.tensor([[60 + k for k in range(n)]]) for n in (2, 6, 13)]
    base = dict(max_new_tokens=16, block_size=8, threshold=1.0, stop_token=40)  # one token a step
    drift, saved = 0, 0
    for prompt in prompts:
        exact = optimized.generate(model, prompt, **base, small_block_size=8)
        cached = optimized.generate(model, prompt, **base, small_block_size=8, use_block_cache=True)
        assert torch.equal(exact.canvas, cached.canvas)
        exact = optimized.generate(model, prompt, **base, small_block_size=4)
        cached = optimized.generate(model, prompt, **base, small_block_size=4, use_block_cache=True)
        drift += int(not torch.equal(exact.canvas, cached.canvas))
        saved += exact.trace.counters.query_positions - cached.trace.counters.query_positions
    assert drift >= 1 and saved > 0  # the approximation is real on this model, and it saves query positions


def test_the_benchmark_tool_reports_tier_e_and_the_block_caches_saving():
    """tools/fastdllm_v2_bench.py --tiny (no published code here): the prefix cache exact to the reference, the
    block cache fewer query positions for the same calls."""
    from tools.fastdllm_v2_bench import TINY, run

    row = run(TINY, 10, 32, (8,), None)["rows"][0]
    assert row["exactness"]["prefix_vs_reference"] == {"tier": "E", "commit_order_match": 1.0, "token_match": 1.0,
                                                       "max_logit_error": 0.0}
    assert row["block_cache"]["model_calls"] == row["prefix_cache"]["model_calls"]
    assert row["block_cache"]["query_positions"] < row["prefix_cache"]["query_positions"]


def test_compiled_decoding_equals_eager(model):
    """``compile``: the block calls under torch.compile (aot_eager runs the eager kernels): the same canvas and
    commits as the eager decode."""
    prompt, settings = torch.tensor([ROWS[1]]), dict(max_new_tokens=8, block_size=8, small_block_size=4, threshold=0.3)
    eager = optimized.generate(model, prompt, **settings)
    fast = optimized.generate(model, prompt, **settings, compile={"backend": "aot_eager"})
    assert torch.equal(eager.canvas, fast.canvas) and eager.trace.commit_order(0) == fast.trace.commit_order(0)
