"""Hypothesis strategies for the theorem checks, exported for users (also from veridec.testing.strategies).

    from hypothesis import given
    from veridec.proofs_checks.strategies import exact_joints
    @given(exact_joints())
    def test_mine(joint): ...
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
from hypothesis import strategies as st

from ..oracles import EnumeratedJoint
from .generate import KINDS, random_joints
from .joints import flip


@st.composite
def exact_joints(draw, symbols=st.integers(2, 3), lengths=st.integers(1, 3), adversarial=st.booleans()):
    """A joint over V^n with Fraction masses (shrinks toward few, small masses). ``adversarial``: the mass
    sits on one x* and its single-coordinate flips (the placement behind T2's tightness), with x*'s share
    drawn near the certificate boundary."""
    v, n = draw(symbols), draw(lengths)
    if draw(adversarial):
        star = tuple(draw(st.lists(st.integers(0, v - 1), min_size=n, max_size=n)))
        flips = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
        centre = draw(st.integers(0, 12))
        weights = {star: centre * (n + 1) // 2 + 1}
        for k, w in enumerate(flips):
            weights[flip(star, k, v)] = weights.get(flip(star, k, v), 0) + w
    else:
        cells = draw(st.lists(st.integers(0, 9), min_size=v**n, max_size=v**n).filter(any))
        weights = {tuple(np.unravel_index(i, [v] * n)): w for i, w in enumerate(cells)}
    total = sum(weights.values())
    joint = np.full([v] * n, Fraction(0), dtype=object)
    for sequence, w in weights.items():
        joint[sequence] = Fraction(w, total)
    return joint


@st.composite
def float_joints(draw, count=st.integers(1, 64), symbols=st.integers(2, 4), lengths=st.integers(1, 4),
                 kinds=st.sampled_from(KINDS)):
    """A float64 batch [N, V, ..., V] of one kind (generate.KINDS), from a drawn numpy seed."""
    seed = draw(st.integers(0, 2**32 - 1))
    return random_joints(np.random.default_rng(seed), draw(count), draw(symbols), draw(lengths), draw(kinds))


@st.composite
def clusters(draw, denominator=st.integers(5, 40)):
    """(kappa, tau, m) as Fractions with 1/2 < tau < kappa < 1 (both of the drawn denominator) and m >= 1."""
    d = draw(denominator)
    tau_num = draw(st.integers(d // 2 + 1, d - 2))
    kappa_num = draw(st.integers(tau_num + 1, d - 1))
    return Fraction(kappa_num, d), Fraction(tau_num, d), draw(st.integers(1, 8))


@st.composite
def decode_states(draw, symbols=st.integers(2, 3), lengths=st.integers(3, 6)):
    """(oracle, canvas [1, L]): a peaked enumerated joint and one of its samples with some positions masked
    (at least one)."""
    v, n = draw(symbols), draw(lengths)
    seed = draw(st.integers(0, 10_000))
    oracle = EnumeratedJoint.random(v, n, seed=seed, concentration=draw(st.sampled_from([0.05, 0.2, 0.5])))
    sample = oracle.sample(1, generator=torch.Generator().manual_seed(seed))
    masked = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(any))
    return oracle, sample.masked_fill(torch.tensor([masked], device=sample.device), oracle.special.mask_id)
