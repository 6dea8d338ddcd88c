"""spec/theorems.md: every theorem holds where its hypotheses do; every published claim marked off fails on a
printed counterexample; certified decoding commits the joint argmax (end to end on enumerated oracles)."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

from veridec.oracles import EnumeratedJoint
from veridec.proofs_checks import counterexamples as cx
from veridec.proofs_checks.generate import epsilons
from veridec.proofs_checks.joints import analyse
from veridec.proofs_checks.strategies import clusters, decode_states, exact_joints, float_joints
from veridec.proofs_checks.table import concat_fails, run_bounds
from veridec.proofs_checks.theorems import (cluster_certificate, concatenation_claim, distance_bounds, fastdllm_kl,
                                            fastdllm_theorem, fastdllm_tv, general_certificate)
from veridec.rules.parallel import LocalLeap, Threshold
from veridec.rules.step import parallel_step


def no_violations(result):
    assert not result.violations.any(), (result.name, np.flatnonzero(result.violations))


@given(exact_joints())
def test_general_certificate_holds(joint):
    result = general_certificate(analyse(joint[None]))
    no_violations(result)


def test_boundary_of_the_general_certificate_admits_a_tie():
    a = analyse(cx.certificate_tie()[None])
    assert a.total_error[0] + a.max_error[0] == 1 and not a.unique_argmax[0]
    print("T1 boundary:", cx.show(cx.certificate_tie()))


@given(exact_joints(), st.fractions(0, 1))
def test_fastdllm_theorem_holds(joint, eps):
    a = analyse(joint[None])
    eps = np.array([eps], dtype=object)
    no_violations(fastdllm_theorem(a, eps))
    no_violations(fastdllm_tv(a, eps, published=True))
    no_violations(fastdllm_tv(a, eps, published=False))


@given(float_joints())
def test_fastdllm_bounds_hold_in_float64(joints):
    a = analyse(joints)
    eps = epsilons(np.random.default_rng(0), a.errors, a.length)
    for result in (fastdllm_theorem(a, eps), fastdllm_tv(a, eps, True), fastdllm_tv(a, eps, False),
                   fastdllm_kl(a, eps, published=False)):
        no_violations(result)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("eps_above", [Fraction(1, 1000), Fraction(1, 10), Fraction(1)])
def test_fastdllm_threshold_is_tight(n, eps_above):
    """T2b: just above 1/(n+1) the joint is a distribution, the hypotheses on the marginals hold, x* is every
    marginal's top-1, and the joint argmax is elsewhere."""
    eps = min(Fraction(1, n + 1) + eps_above, Fraction(1))
    joint = cx.fastdllm_counterexample(n, eps)
    assert (joint >= 0).all() and joint.sum() == 1
    a = analyse(joint[None])
    assert (1 - a.errors[0] > 1 - eps).all() and (a.marginals[0, :, 0] > Fraction(1, 2)).all()
    assert (n + 1) * eps > 1 and not a.unique_argmax[0] and a.best_other[0] > a.p_star[0]


def test_published_kl_bound_fails_at_n_1():
    joint = find(float_joints(lengths=st.just(1), count=st.just(1)),
                 lambda j: bool(fastdllm_kl(analyse(j), np.array([0.49]), published=True).violations[0]))
    print("T2d published KL fails at n = 1 on", joint[0].tolist(), "(KL = 0, bound = 0)")
    no_violations(fastdllm_kl(analyse(joint), np.array([0.49]), published=False))


@given(exact_joints(lengths=st.integers(2, 3)))
def test_cluster_certificate_holds(joint):
    no_violations(cluster_certificate(analyse(joint[None])))


def test_published_concatenation_claim_fails():
    joint = cx.concatenation_counterexample()
    assert concat_fails(analyse(joint[None]))
    print("T3b counterexample:", cx.show(joint))
    found = find(float_joints(symbols=st.just(2), lengths=st.just(4), kinds=st.just("flips"), count=st.just(64)),
                 lambda j: bool(concatenation_claim(analyse(j), [[0, 1], [2, 3]]).violations.any()),
                 settings=settings(max_examples=500, database=None))
    a = analyse(found)
    case = int(np.flatnonzero(concatenation_claim(a, [[0, 1], [2, 3]]).violations)[0])
    print("T3b found by search:", np.round(found[case].ravel(), 4).tolist())


@given(clusters())
def test_capacity_is_the_largest_admissible_m(cluster):
    kappa, tau, _ = cluster
    m_max = cx.neighbour_capacity(kappa, tau)
    assert m_max < 0 or cx.cluster_condition(kappa, tau, m_max)
    assert not cx.cluster_condition(kappa, tau, m_max + 1)


def test_published_capacity_fails_on_integer_boundaries():
    kappa, tau, _ = find(clusters(), lambda c: cx.published_capacity(c[0], c[1]) >= 0
                         and not cx.cluster_condition(c[0], c[1], cx.published_capacity(c[0], c[1])))
    m = cx.published_capacity(kappa, tau)
    print(f"T4 published capacity fails: kappa={kappa}, tau={tau}, published m_max={m}, "
          f"(1-kappa)+m(1-tau) = {(1 - kappa) + m * (1 - tau)} vs tau = {tau}")
    assert (kappa / (1 - tau)).denominator == 1  # exactly the integer boundary
    assert cx.neighbour_capacity(kappa, tau) == m - 1


@given(float_joints())
def test_distance_bounds_hold(joints):
    no_violations(distance_bounds(analyse(joints)))


@given(exact_joints())
def test_distance_bounds_hold_exactly(joint):
    no_violations(distance_bounds(analyse(joint[None])))


def test_bounds_table_is_clean_and_fast():
    report = run_bounds(cases=24_000, seed=1)
    rows = {r["theorem"]: r for r in report["rows"]}
    assert all(r["violations"] == 0 for r in rows.values() if not r["published"] or "TV" in r["theorem"])
    assert all(rows[name]["violations"] > 0 and rows[name]["counterexample"] for name in (
        "T2d Fast-dLLM KL (published)", "T4 neighbour capacity (published)",
        "T3b concatenation of clusters (published)"))
    assert report["joints_per_minute"] > 100_000  # a floor 100x below the measured rate (spec TK3), on one core


def joint_argmax_given(oracle: EnumeratedJoint, canvas: torch.Tensor, positions: list[int]) -> list[int]:
    """argmax over the committed positions of p(x_P | observed), by enumeration."""
    weights = oracle.flat * oracle._consistent(canvas)[0]  # [N]
    best = {}
    for outcome, w in zip(oracle.outcomes.tolist(), weights.tolist()):
        key = tuple(outcome[p] for p in positions)
        best[key] = best.get(key, 0.0) + w
    return list(max(best, key=best.get))


@settings(max_examples=40)
@given(decode_states(), st.sampled_from([Threshold(0.3, certified=True), LocalLeap(0.8, 2, 0.55, certified=True),
                                         Threshold(0.5), LocalLeap(0.9, 4, 0.75)]))
def test_certified_steps_commit_the_joint_argmax(state, rule):
    """TC1 / T1 end to end: whenever a step's committed set satisfies the certificate with its realized errors
    (always, for certified rules), the committed tokens are the joint argmax of those positions."""
    oracle, canvas = state
    x = canvas.clone()
    while (x == oracle.special.mask_id).any():
        logits = oracle(x).logits
        result = parallel_step(rule, logits, x, x == oracle.special.mask_id)
        positions = result.order[0]
        errors = [1 - logits[0, p].exp()[result.x[0, p]].item() for p in positions]
        if sum(errors) + max(errors) < 1:
            assert result.x[0, positions].tolist() == joint_argmax_given(oracle, x, positions)
        elif getattr(rule, "certified", False):
            assert len(positions) == 1
        x = result.x


def test_certification_matters_on_peaked_oracles():
    """Over fixed oracles: certified steps often commit several tokens (the identity above is not vacuous),
    and the uncertified threshold rule sometimes commits a set that is not the joint argmax."""
    multi_certified = wrong_uncertified = 0
    for seed in range(40):
        oracle = EnumeratedJoint.random(3, 6, seed=seed, concentration=0.05)
        for rule in (Threshold(0.3, certified=True), Threshold(0.3)):
            x = torch.full((1, 6), oracle.special.mask_id)
            while (x == oracle.special.mask_id).any():
                result = parallel_step(rule, oracle(x).logits, x, x == oracle.special.mask_id)
                positions = result.order[0]
                if len(positions) > 1 and rule.certified:
                    multi_certified += 1
                if not rule.certified and result.x[0, positions].tolist() != joint_argmax_given(oracle, x, positions):
                    wrong_uncertified += 1
                x = result.x
    assert multi_certified >= 20 and wrong_uncertified >= 1, (multi_certified, wrong_uncertified)


def test_merged_bounds_rows_keep_the_tightest_slack_and_margin():
    """TK3: a theorem's row over several chunks sums cases, hypotheses and violations and keeps the smallest
    slack and margin (the closest call), whichever chunk it came from; a chunk without one leaves it alone."""
    from veridec.proofs_checks.table import merge

    def chunk(slack, margin, cases):
        return {"theorem": "T", "cases": cases, "hypotheses_held": cases - 1, "violations": 0,
                "tightest_slack": slack, "tightest_margin": margin}

    merged = {}
    for row in (chunk(0.5, 2e-3, 10), chunk(0.1, 7e-3, 20), chunk(None, None, 5), chunk(0.3, 1e-4, 1)):
        merge(merged, row)
    assert merged["T"]["tightest_slack"] == 0.1 and merged["T"]["tightest_margin"] == 1e-4
    assert (merged["T"]["cases"], merged["T"]["hypotheses_held"]) == (36, 32)
