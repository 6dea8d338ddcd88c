"""Production's exact decoder laws (``veridec.proofs_checks.laws.decoder_law``, spec/theorems.md TD1) against an
independent brute force written from the spec alone (``tests/oracles/laws_brute.py``: every proposal row of
every step, every path followed to the end).

Random oracles (enumerated joints over 3 symbols, HMMs over 3 symbols), prompts of 1-2 tokens, gen_length
2-4 in blocks that take several steps, LLaDA's quota (P9, SQ1.3), Conf top-k (P2) and Fast-dLLM's threshold
(P3) at 0.3 / 0.5 / 0.8, temperatures 1, 0.7 (and one greedy decode): every outcome's probability within
1e-12, equal supports, each law summing to 1. Plus hand-worked laws (the arithmetic in the comments).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from veridec.oracles import EnumeratedJoint, HMMOracle
from veridec.proofs_checks.laws import decoder_law
from veridec.rules.parallel import Quota, Threshold, TopK

from oracles.laws_brute import brute_law  # tests/oracles (tests/ is on sys.path under pytest's default import mode)

TOLERANCE = 1e-12


def logits_function(oracle):
    """The oracle's token-aligned float64 logits [L][V + 1] for one canvas (M1, M8), as plain lists."""
    def logits_of(canvas: tuple) -> list[list[float]]:
        return oracle(torch.tensor([list(canvas)], dtype=torch.long)).logits[0].tolist()
    return logits_of


def production_rule(rule: tuple):
    kind, parameter = rule
    if kind == "quota":
        return Quota(steps_per_block=parameter)
    if kind == "topk":
        return TopK(k=parameter)
    return Threshold(threshold=parameter)


def both_laws(oracle, prompt, gen_length, block_length, rule, temperature):
    brute = brute_law(logits_function(oracle), prompt, gen_length, block_length, rule, temperature,
                      oracle.special.mask_id)
    production = decoder_law(oracle, production_rule(rule), list(prompt), gen_length, temperature,
                             block_length=block_length)
    return brute, production


def assert_same_law(brute: dict, production: dict, expected_size: int | None = None) -> None:
    assert abs(sum(brute.values()) - 1) < TOLERANCE, sum(brute.values())
    assert abs(sum(production.values()) - 1) < TOLERANCE, sum(production.values())
    assert all(p >= 0 for p in production.values())
    support = {outcome for outcome, p in brute.items() if p > 0}
    assert {tuple(int(t) for t in outcome) for outcome, p in production.items() if p > 0} == support
    if expected_size is not None:
        assert len(support) == expected_size
    production = {tuple(int(t) for t in outcome): p for outcome, p in production.items()}
    worst = max(support, key=lambda outcome: abs(brute[outcome] - production.get(outcome, 0.0)))
    assert abs(brute[worst] - production.get(worst, 0.0)) <= TOLERANCE, (worst, brute[worst], production.get(worst))


# (prompt, gen_length, block_length, rule): every block takes several steps.
SHAPES = [
    ((1,), 4, 4, ("quota", 4)),       # one block of 4, 4 steps: k = (1, 1, 1, 1)
    ((2,), 4, 4, ("quota", 2)),       # one block of 4, 2 steps: k = (2, 2); the quota reads M at the block's start
    ((0, 1), 4, 4, ("quota", 3)),     # one block of 4, 3 steps: k = (2, 1, 1)
    ((1, 0), 4, 2, ("quota", 2)),     # two blocks of 2, 2 steps each: (1, 1) per block
    ((2,), 4, 2, ("quota", 3)),       # two blocks of 2, 3 steps each: (1, 1, 0) per block, block_step restarts
    ((0,), 3, 3, ("quota", 3)),       # one block of 3, 3 steps: (1, 1, 1)
    ((1, 2), 3, 3, ("quota", 2)),     # one block of 3, 2 steps: (2, 1)
    ((0,), 2, 2, ("quota", 2)),       # one block of 2, 2 steps
    ((2,), 4, 4, ("threshold", 0.3)),
    ((0, 2), 4, 2, ("threshold", 0.5)),
    ((1,), 3, 3, ("threshold", 0.8)),
    ((0,), 4, 4, ("threshold", 0.5)),
    ((1, 1), 4, 2, ("threshold", 0.8)),
    ((2,), 3, 3, ("topk", 2)),
]


def make_oracle(family: str, length: int, seed: int):
    if family == "joint":
        return EnumeratedJoint.random(3, length, seed=seed, concentration=0.5 if seed % 2 else 1.0)
    return HMMOracle.random(2 + seed % 3, 3, seed=seed)


# The two costliest shapes (one token or so per step over 4 positions: about 60,000 paths) run on two of the four
# (family, temperature) pairs each, crosswise; every other shape on all four.
COSTLY = {0: (("joint", 1.0), ("hmm", 0.7)), 11: (("joint", 0.7), ("hmm", 1.0))}


def case_id(family, shape, temperature, seed):
    prompt, gen_length, block_length, (kind, parameter) = shape
    return f"{family}-P{len(prompt)}-gen{gen_length}-block{block_length}-{kind}{parameter}-T{temperature}-s{seed}"


CASES = [pytest.param(family, shape, temperature, seed, id=case_id(family, shape, temperature, seed))
         for index, shape in enumerate(SHAPES)
         for family in ("joint", "hmm")
         for temperature, seed in ((1.0, 3 * index), (0.7, 3 * index + 1))
         if (family, temperature) in COSTLY.get(index, ((family, temperature),))]


@pytest.mark.parametrize("family, shape, temperature, seed", CASES)
def test_production_law_is_the_brute_force_law(family, shape, temperature, seed):
    prompt, gen_length, block_length, rule = shape
    oracle = make_oracle(family, len(prompt) + gen_length, seed)
    brute, production = both_laws(oracle, prompt, gen_length, block_length, rule, temperature)
    # Every symbol has positive probability in these Dirichlet oracles, so every generated tuple is reachable.
    assert_same_law(brute, production, expected_size=3 ** gen_length)


@pytest.mark.parametrize("family", ["joint", "hmm"])
def test_greedy_decode_is_a_point_mass_on_both_sides(family):
    oracle = make_oracle(family, 5, 7)
    brute, production = both_laws(oracle, (1,), 4, 4, ("quota", 2), 0.0)
    assert len(brute) == 1 and list(brute.values()) == [1.0]
    assert_same_law(brute, production)


# ---------------------------------------------------------------------------------------------------------------
# Hand-checkable laws: independent positions, so each position's conditional is its own marginal whatever the
# canvas; the prompt position is a point mass on symbol 0 (prompt (0,)); one block of 2, 2 steps (quota 1 per
# step) unless said otherwise.

def product_joint(*marginals) -> EnumeratedJoint:
    joint = torch.tensor([1.0] + [0.0] * (len(marginals[0]) - 1), dtype=torch.float64)  # the prompt position
    for marginal in marginals:
        joint = joint[..., None] * torch.tensor(marginal, dtype=torch.float64)
    return EnumeratedJoint(joint)


def check_by_hand(oracle, rule, temperature, expected: dict) -> None:
    brute, production = both_laws(oracle, (0,), 2, 2, rule, temperature)
    for law in (brute, production):
        law = {tuple(int(t) for t in outcome): p for outcome, p in law.items() if p > 0}
        assert set(law) == set(expected)
        for outcome, p in expected.items():
            assert abs(law[outcome] - float(p)) <= TOLERANCE, (outcome, law[outcome], p)
    assert_same_law(brute, production)


@pytest.mark.parametrize("rule", [("quota", 2), ("topk", 1)])
def test_td1_example_by_hand(rule):
    """TD1's example: marginals (9/10, 1/10) and (3/5, 2/5), T = 1, one token per step.
    Step 1: x1 = 0 (9/10) has c = 9/10 > any c2: position 1 takes 0.  x1 = 1 (1/10) has c = 1/10 < c2 in
    {3/5, 2/5}: position 2 takes its draw, 0 w.p. 1/10 * 3/5 = 3/50, 1 w.p. 1/10 * 2/5 = 1/25.
    Step 2 draws the other position from its marginal:
      (0, 0) = 9/10 * 3/5 + 3/50 * 9/10 = 27/50 + 27/500 = 297/500 = 0.594
      (0, 1) = 9/10 * 2/5 + 1/25 * 9/10 = 9/25 + 9/250 = 99/250 = 0.396
      (1, 0) = 3/50 * 1/10 = 3/500 = 0.006;  (1, 1) = 1/25 * 1/10 = 1/250 = 0.004  (P(x1 = 0) = 0.99)."""
    oracle = product_joint([0.9, 0.1], [0.6, 0.4])
    check_by_hand(oracle, rule, 1.0, {(0, 0): Fraction(297, 500), (0, 1): Fraction(99, 250),
                                      (1, 0): Fraction(3, 500), (1, 1): Fraction(1, 250)})


def test_threshold_half_by_hand():
    """Threshold 0.5 on TD1's example (T = 1): step 1's proposal rows (c1, c2):
      (0, 0): c = (9/10, 3/5), both >= 1/2: both commit, (0, 0) w.p. 27/50.
      (0, 1): c = (9/10, 2/5): the top-1 (position 1) alone, w.p. 9/25, then x2 ~ (3/5, 2/5).
      (1, 0): c = (1/10, 3/5): position 2 takes 0, w.p. 3/50, then x1 ~ (9/10, 1/10).
      (1, 1): c = (1/10, 2/5): position 2 (the top-1) takes 1, w.p. 1/25, then x1 ~ (9/10, 1/10).
      (0, 0) = 27/50 + 9/25 * 3/5 + 3/50 * 9/10 = 0.54 + 0.216 + 0.054 = 0.81
      (0, 1) = 9/25 * 2/5 + 1/25 * 9/10 = 0.144 + 0.036 = 0.18
      (1, 0) = 3/50 * 1/10 = 0.006;  (1, 1) = 1/25 * 1/10 = 0.004."""
    oracle = product_joint([0.9, 0.1], [0.6, 0.4])
    check_by_hand(oracle, ("threshold", 0.5), 1.0, {(0, 0): Fraction(81, 100), (0, 1): Fraction(18, 100),
                                                    (1, 0): Fraction(3, 500), (1, 1): Fraction(1, 250)})


def test_confidence_ties_go_to_the_lower_position_by_hand():
    """Two independent copies of (3/5, 2/5), T = 1, one token per step. Equal proposals tie in confidence and
    the lower position (1) wins (P1.3, N5, TD3):
      (0, 0) tie -> position 1 takes 0 (9/25);  (0, 1): c = (3/5, 2/5) -> position 1 takes 0 (6/25);
      (1, 0): c = (2/5, 3/5) -> position 2 takes 0 (6/25);  (1, 1) tie -> position 1 takes 1 (4/25).
      So position 1 = 0 w.p. 3/5, position 2 = 0 w.p. 6/25, position 1 = 1 w.p. 4/25; then the other ~ (3/5, 2/5):
      (0, 0) = 3/5 * 3/5 + 6/25 * 3/5 = 9/25 + 18/125 = 63/125 = 0.504
      (0, 1) = 3/5 * 2/5 = 6/25 = 0.24
      (1, 0) = 6/25 * 2/5 + 4/25 * 3/5 = 12/125 + 12/125 = 24/125 = 0.192
      (1, 1) = 4/25 * 2/5 = 8/125 = 0.064.
    Ties to the higher position would swap (0, 1) and (1, 0): 0.192 and 0.24."""
    oracle = product_joint([0.6, 0.4], [0.6, 0.4])
    p = torch.softmax(oracle(torch.tensor([[0, 2, 2]])).logits[0], dim=-1)
    assert torch.equal(p[1], p[2]), "the two positions' conditionals must be bitwise equal for the ties to be exact"
    check_by_hand(oracle, ("quota", 2), 1.0, {(0, 0): Fraction(63, 125), (0, 1): Fraction(6, 25),
                                              (1, 0): Fraction(24, 125), (1, 1): Fraction(8, 125)})


def test_tempered_proposals_untempered_confidence_by_hand():
    """T = 1/2 (q proportional to p^2), marginals p1 = (1/2, 1/4, 1/4), p2 = (11/20, 9/20, 0), one token per step:
      q1 = (1/4, 1/16, 1/16) / (3/8) = (2/3, 1/6, 1/6);  q2 = (121/400, 81/400) / (202/400) = (121/202, 81/202, 0).
    Confidences are the UNtempered p (P1.2, TD3): c1 in {1/2, 1/4, 1/4}, c2 in {11/20, 9/20}.
      position 1 takes 0 when x1 = 0 and x2 = 1 (1/2 > 9/20): 2/3 * 81/202 = 27/101;
      position 2 takes 0 whenever x2 = 0 (11/20 beats every c1): 121/202;
      position 2 takes 1 when x2 = 1 and x1 in {1, 2} (9/20 > 1/4): 81/202 * 1/3 = 27/202.
    Then the other position is drawn from its q:
      (0, 0) = 27/101 * 121/202 + 121/202 * 2/3;  (0, 1) = 27/101 * 81/202 + 27/202 * 2/3;
      (1, 0) = (2, 0) = 121/202 * 1/6;  (1, 1) = (2, 1) = 27/202 * 1/6.
    (Ranking by the tempered q instead, q1(0) = 2/3 > q2(0) = 121/202 would give position 1 the step whenever
    x1 = 0.)"""
    oracle = product_joint([0.5, 0.25, 0.25], [0.55, 0.45, 0.0])
    F = Fraction
    check_by_hand(oracle, ("quota", 2), 0.5, {
        (0, 0): F(27, 101) * F(121, 202) + F(121, 202) * F(2, 3),
        (0, 1): F(27, 101) * F(81, 202) + F(27, 202) * F(2, 3),
        (1, 0): F(121, 202) / 6, (2, 0): F(121, 202) / 6,
        (1, 1): F(27, 202) / 6, (2, 1): F(27, 202) / 6,
    })


def test_threshold_is_inclusive_at_equality_by_hand():
    """Threshold 1/2, T = 1, p1 = (1/2, 1/4, 1/4), p2 = (5/8, 3/8, 0): position 1's token 0 has c = 1/2 = tau
    exactly (binary fractions: the oracle's float64 softmax is exact), and c >= tau passes (P3, FD3, TD3 (b)).
      x2 = 0 (5/8, the top-1): with x1 = 0 (1/2) both commit: (0, 0) += 5/16; with x1 in {1, 2} (c = 1/4) position 2
        alone, then x1 ~ p1: (0, 0) += 5/32, (1, 0) = (2, 0) += 5/64.
      x2 = 1 (3/8): with x1 = 0 position 1 is the top-1 (1/2 > 3/8), 3/8 fails: 3/16, then x2 ~ p2:
        (0, 0) += 15/128, (0, 1) += 9/128; with x1 in {1, 2} position 2 takes 1 (3/16), then x1 ~ p1:
        (0, 1) += 3/32, (1, 1) = (2, 1) += 3/64.
      (0, 0) = 40/128 + 20/128 + 15/128 = 75/128;  (0, 1) = 9/128 + 12/128 = 21/128;
      (1, 0) = (2, 0) = 10/128;  (1, 1) = (2, 1) = 6/128.
    (Strict c > tau: x2 = 0 always commits position 2 alone, giving (0, 0) = 55/128 and (1, 0) = (2, 0) = 20/128.)"""
    oracle = product_joint([0.5, 0.25, 0.25], [0.625, 0.375, 0.0])
    p = torch.softmax(oracle(torch.tensor([[0, 3, 3]])).logits[0], dim=-1)
    assert p[1, 0].item() == 0.5 and p[2, 0].item() == 0.625, "the boundary case needs exact confidences"
    F = Fraction
    check_by_hand(oracle, ("threshold", 0.5), 1.0, {
        (0, 0): F(75, 128), (0, 1): F(21, 128), (1, 0): F(10, 128), (2, 0): F(10, 128),
        (1, 1): F(6, 128), (2, 1): F(6, 128),
    })
