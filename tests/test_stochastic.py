"""Tier S (spec/stochastic.md): the chi-square homogeneity test and its cells, the power formula against a
closed form and a simulation, the false-alarm rate on equal laws, and check_decoder / veridec check at tier S
on the example decoders (law-keeping ones pass, law-changing ones are caught). Fixed seeds throughout."""

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from veridec.harness.cli import main
from veridec.testing import check_decoder, load_candidate
from veridec.testing.stochastic import MAX_CELLS, compare_laws, detectable_delta, homogeneity, samples_for_power

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DREAM = dict(against="dream", model="tiny-dream", tier="S")
ONE_TOKEN = {"max_new_tokens": 1, "steps": 1, "alg": "origin", "temperature": 0.7, "top_k": 5}


def test_cells_pool_rare_values_and_keep_at_most_twenty():
    """x and y are seen 10 and 5 times in all and get their own cells; z and w (1, 2) are pooled: the table is
    [[6, 3, 1], [4, 2, 2]], whose Pearson statistic is computed here by hand."""
    a, b = Counter({"x": 6, "y": 3, "z": 1}), Counter({"x": 4, "y": 2, "w": 2})
    statistic, df, p = homogeneity(a, b)
    table = np.array([[6, 3, 1], [4, 2, 2]])
    expected = np.outer(table.sum(1), table.sum(0)) / table.sum()
    assert df == 2 and statistic == pytest.approx(((table - expected) ** 2 / expected).sum(), rel=1e-12)
    assert p == pytest.approx(stats.chi2.sf(statistic, 2), rel=1e-12)
    many = Counter({value: 10 for value in range(30)})
    assert homogeneity(many, many)[1] == MAX_CELLS - 1  # 19 own cells and the pooled rest
    assert homogeneity(Counter({"x": 5}), Counter({"x": 5})) == (0.0, 0, 1.0)  # one value: nothing differs


def test_a_case_tests_the_output_each_position_and_each_pair_with_bonferroni():
    """Outputs of 3 tokens: 1 + 3 + 2 tests; the case's p-value is the smallest times 6 (capped at 1)."""
    rng = np.random.default_rng(2)
    a = [tuple(rng.integers(0, 2, 3).tolist()) for _ in range(300)]
    b = [tuple(rng.integers(0, 2, 3).tolist()) for _ in range(300)]
    result = compare_laws(a, b, alpha=0.01)
    assert [name for name, *_ in result.tests] == ["output", "position 0", "position 1", "position 2", "pair 0,1",
                                                   "pair 1,2"]
    assert result.corrected_p == min(1.0, 6 * min(p for *_, p in result.tests))
    shifted = [tuple(rng.choice(2, 3, p=[0.7, 0.3]).tolist()) for _ in range(300)]
    assert compare_laws(a, shifted, alpha=0.01).differs and not result.differs


def test_equal_laws_are_rejected_at_about_alpha():
    """300 pairs of samples (200 each) from one law over 20 cells: at alpha = 0.01 about 3 rejections are
    expected; more than 9 has probability below 0.001 for a test of level 0.01."""
    rng = np.random.default_rng(0)
    law = rng.dirichlet(np.ones(20))
    rejected = sum(homogeneity(Counter(rng.choice(20, 200, p=law).tolist()),
                               Counter(rng.choice(20, 200, p=law).tolist()))[2] < 0.01 for _ in range(300))
    assert rejected <= 9, rejected


def test_samples_for_power_is_the_smallest_that_reaches_the_power():
    """With one degree of freedom the statistic is (Z + sqrt(lambda))^2, so the power has a closed form in the
    normal law: the derived N is the smallest whose power is >= 0.95, and detectable_delta inverts it."""
    for delta, alpha in ((0.05, 0.01), (0.1, 0.001), (0.2, 0.05)):
        n = samples_for_power(delta, alpha, df=1)
        z = stats.norm.isf(alpha / 2)
        power = lambda m: stats.norm.sf(z - math.sqrt(2 * m * delta**2)) + stats.norm.cdf(-z - math.sqrt(
            2 * m * delta**2))
        assert power(n) >= 0.95 > power(n - 1), (delta, alpha, n)
        assert detectable_delta(n, alpha, df=1) <= delta < detectable_delta(n - 1, alpha, df=1)
    assert samples_for_power(0.1, 0.01) == 1911  # spec ST3's example (df = 19)
    assert samples_for_power(0.05, 0.01) > samples_for_power(0.05, 0.01, df=1)  # more cells, more samples
    for name, value in (("delta", 0.0), ("alpha", 1.0), ("power", 1.5)):
        with pytest.raises(ValueError, match=name):
            samples_for_power(**{"delta": 0.1, "alpha": 0.01, name: value})


def test_power_at_the_derived_samples_is_at_least_as_stated():
    """Laws over 20 cells at total variation 0.2 with p - q proportional to p + q (ST3's bound nearly tight),
    sampled at the derived N: at least 0.95 of the tests reject (0.90 allowed for 200 simulated repetitions)."""
    rng = np.random.default_rng(1)
    p = np.full(20, 1 / 20)
    q = p * (1 + 0.4 * np.where(np.arange(20) % 2 == 0, 1, -1))
    assert 0.5 * np.abs(p - q).sum() == pytest.approx(0.2)
    n = samples_for_power(0.2, 0.01)
    rejected = sum(homogeneity(Counter(rng.choice(20, n, p=p).tolist()),
                               Counter(rng.choice(20, n, p=q).tolist()))[2] < 0.01 for _ in range(200))
    assert rejected >= 180, rejected


def test_tier_s_passes_a_same_law_decoder_and_catches_shifted_ones():
    """The from-scratch Dream sampler passes tier S; the temperature applied twice is caught, and its reproducer
    redraws the same samples; the Fast-dLLM example's confidence read from the Gumbel-perturbed scores is caught.
    (Another stream of the same law, and the correct Fast-dLLM example passing tier S, are in
    benchmarks/test_tier_s_acceptance.py: about 20 s more.)"""
    sampler = load_candidate(f"{EXAMPLES}/dream_sampler.py:diffusion_generate")
    twice = load_candidate(f"{EXAMPLES}/dream_sampler_variants.py:temperature_applied_twice")
    assert check_decoder(sampler, **DREAM, max_examples=2, samples=300).passed
    caught = check_decoder(twice, **DREAM, max_examples=2, samples=300, settings=ONE_TOKEN)
    assert not caught.passed and "the output laws differ" in caught.failure.problems[0]
    assert "tier='S'" in caught.reproducer and caught.metrics["detectable_tv"] > 0
    rerun = {}
    exec(caught.reproducer.replace("print(result.markdown())", ""), rerun)  # the snippet redraws the same samples
    assert not rerun["result"].passed and "the output laws differ" in rerun["result"].failure.problems[0]
    dual = dict(against="fastdllm", cache="dual", model="tiny-llada", tier="S", max_examples=2, samples=200)
    noisy = load_candidate(f"{EXAMPLES}/fastdllm_dual_broken.py:confidence_of_noisy_logits")
    assert not check_decoder(noisy, **dual).passed


def test_the_command_runs_tier_s(capsys):
    base = ["check", "--against", "dream", "--model", "tiny-dream", "--tier", "S", "--samples", "200", "--trials",
            "1", "--quiet"]
    assert main(base[:1] + [f"{EXAMPLES}/dream_sampler.py:diffusion_generate"] + base[1:]) == 0
    twice = [f"{EXAMPLES}/dream_sampler_variants.py:temperature_applied_twice"]
    case = '{"prompt": [[79]], "attention_mask": null, "seed": 0, "settings": ' + \
        '{"max_new_tokens": 1, "steps": 1, "alg": "origin", "temperature": 0.7, "top_k": 5}}'  # TV 0.16 here
    assert main(base[:1] + twice + base[1:] + ["--case", case, "--samples", "600"]) == 1
    out = capsys.readouterr().out
    assert "the output laws differ" in out and "--tier S" in out
    assert main(base[:1] + twice + base[1:] + ["--alpha", "1.5"]) == 2
    assert "--alpha" in capsys.readouterr().err


def test_derived_samples_count_every_test_and_every_case():
    """samples=None (ST2, ST3): N = samples_for_power(delta, alpha / cases / tests), tests = 2 x the positions a
    case fills. Two drawn one-row, one-token cases: 2 cases x 2 tests; a replayed 2-row, 2-token case counts as
    one case with 8 tests."""
    sampler = load_candidate(f"{EXAMPLES}/dream_sampler.py:diffusion_generate")
    drawn = check_decoder(sampler, **DREAM, max_examples=2, max_batch=1, settings=ONE_TOKEN, delta=0.4)
    assert drawn.metrics["samples_per_side"] == [samples_for_power(0.4, 0.01 / 2 / 2)] * 2
    case = {"prompt": [[79], [80]], "attention_mask": None, "seed": 0,
            "settings": {**ONE_TOKEN, "max_new_tokens": 2, "steps": 2}}
    replayed = check_decoder(sampler, **DREAM, case=case, delta=0.4)
    assert replayed.metrics["samples_per_side"] == [samples_for_power(0.4, 0.01 / 8)]
    assert samples_for_power(0.4, 0.01 / 8) != samples_for_power(0.4, 0.01 / 4)  # the count matters here


def test_bad_tier_s_arguments():
    sampler = load_candidate(f"{EXAMPLES}/dream_sampler.py:diffusion_generate")
    for kwargs, message in (({"alpha": 0.0}, "alpha"), ({"delta": 1.0}, "delta"), ({"samples": 1}, "samples")):
        with pytest.raises(ValueError, match=message):
            check_decoder(sampler, **DREAM, **kwargs)
