"""Exact (Fraction) joints on which a statement of spec/theorems.md is tight or a published claim fails,
and the neighbour capacity of T4 in exact arithmetic."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from .joints import flip


def joint_from(masses: dict[tuple[int, ...], Fraction], symbols: int, length: int) -> np.ndarray:
    """A [V]*n object array of Fractions, zero outside ``masses``."""
    joint = np.full([symbols] * length, Fraction(0), dtype=object)
    for sequence, mass in masses.items():
        joint[sequence] = Fraction(mass)
    if sum(joint.ravel()) != 1:
        raise ValueError(f"masses must sum to 1, got {sum(joint.ravel())}")
    return joint


def certificate_tie() -> np.ndarray:
    """T1 at equality (and T4's published boundary kappa = 4/5, tau = 3/5, m = 1): 00 and 01 tie."""
    return joint_from({(0, 0): Fraction(2, 5), (0, 1): Fraction(2, 5), (1, 0): Fraction(1, 5)}, 2, 2)


def fastdllm_counterexample(length: int, eps: Fraction, symbols: int = 2) -> np.ndarray:
    """T2b: for n >= 2 and eps > 1/(n+1), marginals p_j(0) = 1 - delta > 1 - eps (each the marginal top-1) but
    the joint argmax is a single flip of x* = 0...0; delta halfway between 1/(n+1) and min(eps, 1/n), so
    p(x*) = 1 - n delta stays positive."""
    eps = Fraction(eps)
    if length < 2 or not eps > Fraction(1, length + 1):
        raise ValueError(f"needs length >= 2 and eps > 1/(length+1); got length={length}, eps={eps}")
    delta = (Fraction(1, length + 1) + min(eps, Fraction(1, length))) / 2
    star = (0,) * length
    masses = {star: 1 - length * delta} | {flip(star, k, symbols): delta for k in range(length)}
    return joint_from(masses, symbols, length)


def concatenation_counterexample() -> np.ndarray:
    """T3b: two clusters (positions 0-1 and 2-3), each certified with kappa = 9/10, tau = 3/5, m = 1, yet
    p(0000) = 0: the clusters are anticorrelated."""
    masses = {(0, 0, 0, 1): Fraction(2, 5), (0, 0, 1, 0): Fraction(1, 10),
              (0, 1, 0, 0): Fraction(2, 5), (1, 0, 0, 0): Fraction(1, 10)}
    return joint_from(masses, 2, 4)


def cluster_condition(kappa: Fraction, tau: Fraction, m: int) -> bool:
    """T3's (1 - kappa) + m (1 - tau) < tau, exactly."""
    return (1 - kappa) + m * (1 - tau) < tau


def neighbour_capacity(kappa: Fraction, tau: Fraction) -> int:
    """T4 corrected: the largest m with (1 - kappa) + m (1 - tau) < tau, i.e. ceil(kappa/(1-tau) - 1) - 1."""
    return math.ceil(Fraction(kappa) / (1 - Fraction(tau)) - 1) - 1


def published_capacity(kappa: Fraction, tau: Fraction) -> int:
    """T4 as seed 002 states it: floor(kappa / (1 - tau) - 1)."""
    return math.floor(Fraction(kappa) / (1 - Fraction(tau)) - 1)


def capacity_grid(denominator: int = 20):
    """Every rational pair 1/2 < tau < kappa < 1 with the given denominator."""
    values = [Fraction(k, denominator) for k in range(denominator // 2 + 1, denominator)]
    return [(kappa, tau) for kappa, tau in itertools.product(values, values) if tau < kappa]


def show(joint: np.ndarray) -> str:
    """The non-zero masses of an exact joint as 'sequence: p' pairs."""
    cells = [("".join(map(str, idx)), v) for idx, v in np.ndenumerate(joint) if v != 0]
    return ", ".join(f"p({s}) = {v}" for s, v in cells)
