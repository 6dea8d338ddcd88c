"""Exact output laws of sampled decoders on oracle models (proofs_checks/laws.py, spec/theorems.md TD1): held
against laws worked by hand, against the greedy reference decode, and against the reference decoder's own
samples (its Gumbel noise, a chi-square goodness-of-fit test with fixed seeds)."""

import itertools
import math
import json
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import torch
from oracles import laws as spec_laws
from scipy import stats

from veridec.oracles import EnumeratedJoint
from veridec.oracles.base import Oracle
from veridec.proofs_checks.laws import decoder_law, joint_law, kl_divergence, random_order_law, total_variation
from veridec.reference.parallel import decode
from veridec.rules.parallel import KLASS, EntropyBounded, Factor, LocalLeap, Threshold, TopK
from veridec.rules.presets import PRESETS

INDEPENDENT = EnumeratedJoint(torch.tensor([[0.54, 0.36], [0.06, 0.04]], dtype=torch.float64))  # (.9,.1) x (.6,.4)


def test_laws_worked_by_hand():
    """Two independent positions, marginals (0.9, 0.1) and (0.6, 0.4), T = 1. One token per step by confidence:
    x1 = 0 is sampled with confidence 0.9 and always goes first; x1 = 1 (confidence 0.1) loses to x2 and is
    resampled next step. So P(0, 0) = 0.9 x 0.6 + 0.1 x 0.6 x 0.9 = 0.594, P(0, 1) = 0.36 + 0.036 = 0.396,
    P(1, 0) = 0.1 x 0.6 x 0.1 = 0.006, P(1, 1) = 0.004: TV 0.09 from the joint though it commits one token a step.
    Threshold 0.5: both commit at confidences (0.9, 0.6); only x1 at (0.9, 0.4); only x2 at (0.1, 0.6); at
    (0.1, 0.4) none passes and the top-1, x2 = 1, commits: P = (0.81, 0.18, 0.006, 0.004)."""
    sequential = decoder_law(INDEPENDENT, TopK(1), [], 2, 1.0)
    expected = {(0, 0): 0.594, (0, 1): 0.396, (1, 0): 0.006, (1, 1): 0.004}
    assert sequential.keys() == expected.keys()
    assert all(sequential[x] == pytest.approx(p, abs=1e-15) for x, p in expected.items())
    joint = joint_law(INDEPENDENT, [], 2)
    assert total_variation(sequential, joint) == pytest.approx(0.09, abs=1e-15)
    assert kl_divergence(joint, sequential) > 0 and kl_divergence(joint, joint) == 0
    threshold = decoder_law(INDEPENDENT, Threshold(0.5), [], 2, 1.0)
    assert [threshold[x] for x in sorted(threshold)] == pytest.approx([0.81, 0.18, 0.006, 0.004], abs=1e-15)
    assert decoder_law(INDEPENDENT, TopK(1), [], 2, 0.0) == {(0, 0): 1.0}


@pytest.mark.parametrize("name", ["sequential", "conf-hq", "fastdllm", "factor", "eb-hq", "localleap",
                                  "fastdllm-certified", "klass-hq"])
def test_greedy_law_is_the_point_mass_of_the_reference_decode(name):
    oracle = EnumeratedJoint.random(3, 6, seed=4, concentration=0.3)
    prompt = [2]
    law = decoder_law(oracle, PRESETS[name], prompt, 5, 0.0)
    canvas = decode(oracle, torch.tensor([prompt]), rule=PRESETS[name], gen_length=5, block_length=5).canvas
    assert law == {tuple(canvas[0, 1:].tolist()): 1.0}


@pytest.mark.parametrize("rule", [TopK(1), TopK(2), Threshold(0.6), Factor(1.0), EntropyBounded(gamma=1.0),
                                  LocalLeap(kappa=0.7, radius=1, tau=0.55),
                                  KLASS(confidence=0.5, kl_threshold=0.05, history=1)], ids=lambda r: r.name)
def test_the_reference_decoder_samples_the_enumerated_law(rule):
    """4000 decodes of the reference decoder at T = 0.8 (one batch, its own Gumbel noise) against the exact
    law: Pearson's goodness of fit over the outputs expected at least 5 times (the rest pooled) does not
    reject at 0.001 (fixed seed); and blocks of 2 are enumerated as the decoder runs them."""
    oracle = EnumeratedJoint.random(3, 5, seed=7, concentration=0.5)
    law = decoder_law(oracle, rule, [1], 4, 0.8, block_length=2)
    assert sum(law.values()) == pytest.approx(1, abs=1e-12)
    n = 4000
    canvas = decode(oracle, torch.tensor([[1]] * n), rule=rule, gen_length=4, block_length=2, temperature=0.8,
                    generator=torch.Generator().manual_seed(0)).canvas
    seen = Counter(tuple(row) for row in canvas[:, 1:].tolist())
    common = [x for x, p in law.items() if p * n >= 5]
    observed = [seen[x] for x in common] + [n - sum(seen[x] for x in common)]
    expected = [law[x] * n for x in common] + [n - sum(law[x] * n for x in common)]
    assert sum(seen[x] for x in seen if x not in law) == 0  # nothing outside the law's support
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_klass_carries_its_memory_along_each_branch():
    """Three independent positions (KL 0 between steps): KLASS(0.5, history 1) has no stable position at the
    first step and commits the top-1 (fallback); at the second every remaining position is stable, so all whose
    sampled token has confidence > 0.5 commit together. Without the memory every step would be the fallback,
    i.e. TopK(1)'s law; with it, the law differs and the decode takes fewer steps."""
    marginals = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]], dtype=torch.float64)
    joint = marginals[0][:, None, None] * marginals[1][None, :, None] * marginals[2][None, None, :]
    oracle = EnumeratedJoint(joint)
    klass = decoder_law(oracle, KLASS(confidence=0.5, kl_threshold=0.01, history=1), [], 3, 1.0)
    sequential = decoder_law(oracle, TopK(1), [], 3, 1.0)
    assert sum(klass.values()) == pytest.approx(1, abs=1e-12) and total_variation(klass, sequential) > 0.01


def test_refusals_name_the_limit():
    oracle = EnumeratedJoint.random(4, 8, seed=0)
    with pytest.raises(ValueError, match="4096"):
        decoder_law(oracle, TopK(1), [], 7, 1.0)
    with pytest.raises(ValueError, match="DAPD"):
        decoder_law(oracle, PRESETS["dapd-hq"], [], 2, 1.0)
    with pytest.raises(ValueError, match="temperature"):
        decoder_law(oracle, TopK(1), [], 2, -1.0)
    with pytest.raises(ValueError, match="block_length"):
        decoder_law(oracle, TopK(1), [], 4, 1.0, block_length=3)


def test_joint_law_by_the_chain_rule_is_the_enumerated_joint():
    """joint_law multiplies the oracle's conditionals; for an enumerated joint that is its table conditioned on
    the prompt, read here directly."""
    oracle = EnumeratedJoint.random(3, 4, seed=3, concentration=0.4)
    law = joint_law(oracle, [2], 3)
    table = oracle.joint[2] / oracle.joint[2].sum()  # [3, 3, 3]
    assert len(law) == 27 and all(law[x] == pytest.approx(table[x].item(), rel=1e-12) for x in law)


def test_bounds_decoders_prints_and_writes_the_law_table(tmp_path, capsys):
    from veridec.harness.cli import main

    out = tmp_path / "laws.json"
    assert main(["bounds", "--decoders", "--cases", "2", "--json", str(out)]) == 0
    assert "| sequential | confidence | enumerated | 2 |" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * (11 + 4) and all(r["mass_error"] < 1e-9 and 0 <= r["max_tv"] <= 1 for r in rows)
    bounded = [r for r in rows if r["remasking"] == "random (T = 1)"]
    assert len(bounded) == 8 and all(r["violations"] == 0 and r["max_tv"] <= r["max_bound"] + 1e-12
                                     for r in bounded)


def test_verify_runs_the_law_table_and_fails_on_a_violation_or_a_lost_mass(monkeypatch):
    from veridec.harness.checks import bounds
    from veridec.harness.checks.registry import VerifyContext, all_checks

    checks = all_checks()
    td1, td2 = checks["bounds/TD1-exact-decoder-laws"], checks["bounds/TD2-random-order-decode-bound"]
    context = VerifyContext(None, None, seed=0, quick=True)
    bounds._decoder_laws.cache_clear()
    assert td1.run(context).passed and td2.run(context).passed and td2.run(context).cases == 8
    bad = {"cases": 1, "mass_error": 2e-9, "violations": 1, "tightest_slack": -1e-3}
    monkeypatch.setattr(bounds, "decoder_table", lambda cases, seed: [bad])
    bounds._decoder_laws.cache_clear()
    try:
        assert not td1.run(context).passed and not td2.run(context).passed
        assert td2.run(context).worst_margin < 0
    finally:
        bounds._decoder_laws.cache_clear()


CORRELATED = EnumeratedJoint(torch.tensor([[0.5, 0.0], [0.0, 0.5]], dtype=torch.float64))  # x1 = x2, a fair bit


def test_random_order_laws_and_their_bound_worked_by_hand():
    """Two copies of one fair bit, T = 1, random remasking. One token per step: the second bit is read from its
    exact conditional, so the law is the joint (bound 0). Both at once (TopK(2)): independent marginals, the
    uniform law on four outcomes, TV 1/2 = the one step's TV (tight). Threshold 1/2: both pass with
    probability 1/4 (uniform law), else one bit first: law 1/4 x uniform + 3/4 x joint, TV 1/8 = the bound."""
    law, bound = random_order_law(CORRELATED, TopK(1), [], 2)
    assert law == pytest.approx({(0, 0): 0.5, (1, 1): 0.5}) and bound == 0
    law, bound = random_order_law(CORRELATED, TopK(2), [], 2)
    assert law == pytest.approx({x: 0.25 for x in ((0, 0), (0, 1), (1, 0), (1, 1))}) and bound == pytest.approx(0.5)
    law, bound = random_order_law(CORRELATED, Threshold(0.5), [], 2)
    assert law == pytest.approx({(0, 0): 0.4375, (1, 1): 0.4375, (0, 1): 0.0625, (1, 0): 0.0625})
    assert total_variation(law, joint_law(CORRELATED, [], 2)) == pytest.approx(0.125) == bound


@pytest.mark.parametrize("seed", range(4))
def test_random_order_decodes_stay_within_their_bound_and_one_token_per_step_is_exact(seed):
    from veridec.oracles import HMMOracle

    for oracle in (EnumeratedJoint.random(3, 5, seed=seed, concentration=0.3), HMMOracle.random(4, 3, seed=seed)):
        joint = joint_law(oracle, [seed % 3], 4)
        law, bound = random_order_law(oracle, TopK(1), [seed % 3], 4)
        assert total_variation(law, joint) < 1e-12 and bound < 1e-12
        for rule in (TopK(2), TopK(3), Threshold(0.3), Threshold(0.8)):
            law, bound = random_order_law(oracle, rule, [seed % 3], 4, block_length=4 if seed % 2 else 2)
            assert total_variation(law, joint) <= bound + 1e-12, (rule, seed)


@pytest.mark.parametrize("rule", [TopK(2), Threshold(0.5)], ids=lambda r: r.name)
def test_the_reference_decoder_with_random_remasking_samples_the_random_order_law(rule):
    oracle = EnumeratedJoint.random(3, 5, seed=8, concentration=0.5)
    law, _ = random_order_law(oracle, rule, [0], 4, block_length=2)
    n = 4000
    canvas = decode(oracle, torch.tensor([[0]] * n), rule=rule, gen_length=4, block_length=2, temperature=1.0,
                    remasking="random", generator=torch.Generator().manual_seed(1)).canvas
    seen = Counter(tuple(row) for row in canvas[:, 1:].tolist())
    common = [x for x, p in law.items() if p * n >= 5]
    observed = [seen[x] for x in common] + [n - sum(seen[x] for x in common)]
    expected = [law[x] * n for x in common] + [n - sum(law[x] * n for x in common)]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    with pytest.raises(ValueError, match="TopK and Threshold"):
        random_order_law(oracle, LocalLeap(kappa=0.7, radius=1, tau=0.55), [0], 4)


# ---------------------------------------------------------------------------------------------- TD3
def conditionals_of(joint: torch.Tensor):
    """conditionals(canvas) for tests/oracles/laws.py from an enumerated joint [V] * L, by summing its table
    (independent of veridec's oracle classes): each position's law given the canvas's observed symbols."""
    table = {index: float(joint[index]) for index in itertools.product(range(joint.shape[0]), repeat=joint.dim())}

    def conditionals(canvas: tuple) -> list[list[float]]:
        laws = []
        for j in range(len(canvas)):
            weights = [0.0] * joint.shape[0]
            for index, weight in table.items():
                if all(c is None or c == x for c, x in zip(canvas, index)):
                    weights[index[j]] += weight
            total = sum(weights)
            laws.append([w / total for w in weights])
        return laws

    return conditionals


@pytest.mark.parametrize("rule, spec_rule", [(TopK(1), ("topk1",)), (Threshold(0.5), ("threshold", 0.5)),
                                             (Threshold(0.3), ("threshold", 0.3))], ids=["topk1", "th0.5", "th0.3"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_td3_closed_form_is_the_enumerated_law(rule, spec_rule, temperature):
    """spec/theorems.md TD3 (d): the spec oracle's whole-decode law from the closed-form steps (a), (b) equals
    decoder_law (the production rule on every proposal row) on random enumerated joints."""
    for seed in range(3):
        oracle = EnumeratedJoint.random(3, 5, seed=seed, concentration=0.4)
        law = decoder_law(oracle, rule, [seed % 3], 4, temperature)
        spec = spec_laws.decode_law(conditionals_of(oracle.joint), (seed % 3,), 4, temperature, spec_rule)
        assert law.keys() == spec.keys()
        assert all(law[x] == pytest.approx(spec[x], abs=1e-12) for x in law)


def test_td3_step_law_by_hand_and_the_sharpening_inequality():
    """TD1's example in TD3's form (T = 1, exact): (0.9, 0.1) and (0.6, 0.4): candidate 0 commits 0 with 9/10,
    candidate 1 commits 0 with 6/10 x 1/10 and 1 with 4/10 x 1/10. Sharpening (c) on random laws: the committed
    token's mean confidence is at least its proposal law's, strictly for some."""
    tenths = [[Fraction(9, 10), Fraction(1, 10)], [Fraction(6, 10), Fraction(4, 10)]]
    assert spec_laws.topk1_step_law(tenths, 1) == {(0, 0): Fraction(9, 10), (1, 0): Fraction(6, 100),
                                                   (1, 1): Fraction(4, 100)}
    rng = np.random.default_rng(0)
    strict = 0
    for _ in range(200):
        ps = [list(rng.dirichlet([0.5] * 4)) for _ in range(3)]
        for temperature in (1.0, 0.6):
            for i in range(3):
                committed, proposed = spec_laws.sharpening(ps, temperature, i)
                assert committed >= proposed - 1e-12
                strict += committed > proposed + 1e-6
    assert strict > 100


class IdenticalPositions(Oracle):
    """Independent positions, every one with the law ``p``: equal confidences at every candidate, so each step's
    ranking is decided by TD3's tie rule (the lower position wins a tie)."""

    def __init__(self, p: list[float], length: int):
        super().__init__(len(p), length)
        self.p = torch.tensor(p, dtype=torch.float64)

    def conditional_marginals(self, x, attention_mask):
        return self.p.expand(*x.shape, -1).clone()  # [B, L, V]


@pytest.mark.parametrize("rule, spec_rule", [(TopK(1), ("topk1",)), (Threshold(0.4), ("threshold", 0.4))],
                         ids=["topk1", "th0.4"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_td3_ties_between_positions_go_to_the_lower_one(rule, spec_rule, temperature):
    """Exact ties everywhere (identical positions): the spec oracle's B (strictly below, earlier positions) and
    B-bar (at most, later positions) decide them; decoder_law must agree outcome for outcome."""
    p = [0.5, 0.3, 0.2]
    law = decoder_law(IdenticalPositions(p, 4), rule, [0], 3, temperature)
    spec = spec_laws.decode_law(lambda canvas: [p] * len(canvas), (0,), 3, temperature, spec_rule)
    assert law.keys() == spec.keys() and all(law[x] == pytest.approx(spec[x], abs=1e-12) for x in law)


def td2_bound_by_hand(table: dict, length: int, k: int, canvas: tuple = ()) -> float:
    """TD2's bound from its statement, over a joint ``table`` {outcome: p} (V = 2): at a state, S a uniform
    k-subset of the masked positions, the step's TV(product of exact marginals, exact joint of S), plus each next
    state's bound weighted by the probability the decoder's product draw leads there."""
    known = dict(canvas)
    masked = [j for j in range(length) if j not in known]
    if not masked:
        return 0.0
    consistent = {x: p for x, p in table.items() if all(x[j] == v for j, v in known.items())}
    mass = sum(consistent.values())
    total, subsets = 0.0, list(itertools.combinations(masked, min(k, len(masked))))
    for chosen in subsets:
        values = list(itertools.product((0, 1), repeat=len(chosen)))
        joint = {v: sum(p for x, p in consistent.items() if tuple(x[j] for j in chosen) == v) / mass for v in values}
        marginal = [{b: sum(p for v, p in joint.items() if v[i] == b) for b in (0, 1)} for i in range(len(chosen))]
        product = {v: math.prod(marginal[i][b] for i, b in enumerate(v)) for v in values}
        step = 0.5 * sum(abs(product[v] - joint[v]) for v in values)
        after = sum(product[v] * td2_bound_by_hand(table, length, k, tuple(sorted((*canvas, *zip(chosen, v)))))
                    for v in values if product[v] > 0 and joint[v] > 0)
        total += (step + after) / len(subsets)
    return total


def test_td2s_bound_is_its_formula_along_the_decoders_path():
    """Four positions over a random joint, two per step: the second step's TV counts with the probability of the
    first step's tokens (the path's weight), as TD2 states."""
    oracle = EnumeratedJoint.random(2, 4, seed=5, concentration=0.7)
    table = {tuple(row.tolist()): p.item() for row, p in zip(oracle.outcomes, oracle.flat)}
    _, bound = random_order_law(oracle, TopK(2), [], 4)
    assert bound == pytest.approx(td2_bound_by_hand(table, 4, 2), abs=1e-12) and bound > 0
