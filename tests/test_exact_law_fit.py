"""Tier S against an exact law (spec/stochastic.md ST6): Pearson's goodness of fit over the law's own cells, its
false-alarm rate and power by simulation against the stated formula, and decoders on oracle models held
against their enumerated laws (proofs_checks.laws). Fixed seeds throughout."""

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from veridec.harness.cli import main
from veridec.oracles import EnumeratedJoint
from veridec.proofs_checks.laws import decoder_law, total_variation
from veridec.reference.parallel import decode
from veridec.rules.parallel import Threshold, TopK
from veridec.testing import check_decoder, check_law, goodness_of_fit, load_candidate
from veridec.testing.stochastic import MAX_CELLS, pearson_fit, samples_for_power
from veridec.testing.targets import TARGETS, target

ALPHA = 0.01


def test_cells_come_from_the_law_and_the_statistic_is_pearsons():
    """n = 100: a (0.5) and b (0.3) get cells; c, d (0.1 each) would too, but e (0.0004: expected 0.04) leaves
    the rest cell below 5, so d joins it: cells a, b, c, {d, e}, chosen by the law (c, seen 4 times, keeps its
    cell); the statistic is computed here by hand."""
    law = {"a": 0.5, "b": 0.3, "c": 0.0998, "d": 0.0998, "e": 0.0004}
    observed = Counter({"a": 41, "b": 35, "c": 4, "d": 19, "e": 1})
    statistic, df, p = pearson_fit(observed, law)
    counts, expected = np.array([41, 35, 4, 20]), np.array([50, 30, 9.98, 10.02])
    assert df == 3 and statistic == pytest.approx(((counts - expected) ** 2 / expected).sum(), rel=1e-9)
    assert p == pytest.approx(stats.chi2.sf(statistic, 3), rel=1e-9)
    assert pearson_fit(Counter({"a": 1, "z": 1}), law) == (math.inf, 0, 0.0)  # an outcome the law forbids
    assert pearson_fit(Counter({"a": 3}), {"a": 1.0}) == (0.0, 0, 1.0)  # one cell: nothing can differ
    many = {value: 1 / 40 for value in range(40)}
    assert pearson_fit(Counter({value: 25 for value in range(40)}), many)[1] == MAX_CELLS - 1


def test_the_law_is_validated_and_outputs_must_fit_it():
    with pytest.raises(ValueError, match="sum to 1"):
        goodness_of_fit([(0,)], {(0,): 0.5}, ALPHA)
    with pytest.raises(ValueError, match="tuples of one length"):
        goodness_of_fit([(0,)], {(0,): 0.5, (0, 1): 0.5}, ALPHA)
    with pytest.raises(ValueError, match="2 tokens, the law's outcomes 1"):
        goodness_of_fit([(0, 1)], {(0,): 1.0}, ALPHA)
    with pytest.raises(ValueError, match="alpha must be a number in"):
        check_law(lambda n: [(0,)] * n, {(0,): 1.0}, alpha=1.5)
    with pytest.raises(ValueError, match=r"sample\(7\) returned 6 outputs"):
        check_law(lambda n: [(0,)] * (n - 1), {(0,): 1.0}, samples=7)


def test_one_sample_needs_half_the_samples_of_two():
    """ST6: the noncentrality per sample is at least 4 delta^2 against an exact law, 2 delta^2 between two
    samples; the same power needs half the samples (to the rounding of ceil)."""
    for delta in (0.02, 0.05, 0.1):
        two, one = samples_for_power(delta, ALPHA), samples_for_power(delta, ALPHA, exact_law=True)
        assert abs(2 * one - two) <= 2


# 19 outcomes sharing 0.99995 and a tail of 0.00005 split over 10 more: at n = 1000 the tail's expected count
# is 0.05, so pearson_fit() merges it into the least probable cell (a cell of its own would reject on one draw).
TAILED = {**{(i,): 0.99995 / 19 for i in range(19)}, **{(19 + i,): 0.000005 for i in range(10)}}


def test_exact_samples_are_rejected_at_about_alpha():
    """300 samples of 1000 from the law itself (numpy's generator): at most 9 rejections at 0.01
    (P(Binomial(300, 0.01) > 9) < 0.001)."""
    rng = np.random.default_rng(11)
    outcomes, probs = list(TAILED), np.array(list(TAILED.values()))
    probs = probs / probs.sum()
    rejected = 0
    for _ in range(300):
        drawn = rng.choice(len(outcomes), 1000, p=probs)
        rejected += goodness_of_fit([outcomes[i] for i in drawn], TAILED, ALPHA).differs
    assert rejected <= 9


def test_power_at_the_derived_samples_is_at_least_as_stated():
    """Laws at TV delta from the hypothesis with |p - q| proportional to q (the bound tight): at
    samples_for_power(delta, alpha, exact_law=True), at least 0.95 of 200 repetitions reject (>= 180 asserted:
    P(Binomial(200, 0.95) < 180) < 0.01)."""
    rng = np.random.default_rng(3)
    q = np.full(MAX_CELLS, 1 / MAX_CELLS)
    for delta in (0.05, 0.1):
        p = q * (1 + 2 * delta * np.where(np.arange(MAX_CELLS) % 2 == 0, 1.0, -1.0))
        n = samples_for_power(delta, ALPHA, exact_law=True)
        law = {(i,): float(q[i]) for i in range(MAX_CELLS)}
        rejected = sum(pearson_fit(Counter((int(i),) for i in rng.choice(MAX_CELLS, n, p=p)), law)[2] < ALPHA
                       for _ in range(200))
        assert rejected >= 180, (delta, n, rejected)


def sampler(oracle, rule, temperature: float, seed: int):
    """n reference decodes of prompt [1] (4 tokens, blocks of 2) as one batch under one generator."""
    def sample(n: int) -> list[tuple]:
        canvas = decode(oracle, torch.tensor([[1]] * n), rule=rule, gen_length=4, block_length=2,
                        temperature=temperature, generator=torch.Generator().manual_seed(seed)).canvas
        return [tuple(row) for row in canvas[:, 1:].tolist()]
    return sample


@pytest.mark.parametrize("rule", [TopK(1), Threshold(0.6)], ids=lambda r: r.name)
def test_the_reference_decoder_follows_its_exact_law_and_a_doubled_temperature_is_caught(rule):
    """check_law at its defaults (delta 0.05, 8 tests): the reference decoder at T = 0.8 follows
    decoder_law(T = 0.8); the same decoder with the temperature applied twice (T = 0.64) does not."""
    oracle = EnumeratedJoint.random(3, 5, seed=7, concentration=0.5)
    law = decoder_law(oracle, rule, [1], 4, 0.8, block_length=2)
    same = check_law(sampler(oracle, rule, 0.8, seed=0), law)
    assert same.verdict == "same law" and same.samples == samples_for_power(0.05, ALPHA / 8, exact_law=True)
    twice = decoder_law(oracle, rule, [1], 4, 0.64, block_length=2)
    assert total_variation(law, twice) > same.delta  # the shift is larger than what the check guarantees to see
    caught = check_law(sampler(oracle, rule, 0.64, seed=0), law)
    assert caught.verdict == "differs" and "does not follow the law" in caught.problems[0]


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_check_decoder_on_an_oracle_holds_the_samples_against_the_exact_law(capsys):
    """ST7: examples/llada_sampler.py (LLaDA's generate from scratch, exact against veridec's at tier E) follows
    the exact law of veridec's LLaDA decode on both oracle check models; the temperature applied twice is
    caught with the test that fired; a cached target is refused; the command runs the same."""
    sampler = load_candidate(f"{EXAMPLES}/llada_sampler.py:generate")
    twice = load_candidate(f"{EXAMPLES}/llada_sampler_broken.py:temperature_applied_twice")
    assert check_decoder(sampler, against="llada", model="tiny-llada", max_examples=15).passed
    for model in ("oracle-joint", "oracle-hmm"):
        same = check_decoder(sampler, against="llada", model=model, tier="S", max_examples=2, samples=800)
        assert same.passed and same.metrics["samples_per_side"] == [800, 800]
        caught = check_decoder(twice, against="llada", model=model, tier="S", max_examples=2, samples=800)
        assert not caught.passed and "do not follow the exact law of llada" in caught.failure.problems[0]
    rerun = {}
    exec(caught.reproducer.replace("print(result.markdown())", ""), rerun)  # the same draws again
    assert not rerun["result"].passed
    with pytest.raises(ValueError, match="without a cache"):
        check_decoder(sampler, against="fastdllm", cache="dual", model="oracle-joint", tier="S")
    assert main(["check", f"{EXAMPLES}/llada_sampler.py:generate", "--against", "llada", "--model", "oracle-hmm",
                 "--tier", "S", "--trials", "1", "--samples", "300", "--quiet"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("against, cache", sorted(TARGETS))
def test_only_the_uncached_llada_and_fastdllm_targets_have_an_exact_law(against, cache):
    """ST7: the exact law is enumerated for llada, fastdllm and fastdllm-2025-06 without a cache, and refused for
    every other target, each cached one included (an oracle has no cache)."""
    from veridec.testing.exact_law import check_law_target

    goal = target(against, cache)
    if (against, cache) in {("llada", "none"), ("fastdllm", "none"), ("fastdllm-2025-06", "none")}:
        check_law_target(goal, cache)
    else:
        with pytest.raises(ValueError, match="without a cache"):
            check_law_target(goal, cache)
