"""Everything the theorem checks need from a batch of joint distributions, computed once and vectorized.

A batch is an array ``[N, V, ..., V]`` (n axes of size V after the batch axis): float64 for fast checks, or
``dtype=object`` holding ``fractions.Fraction`` for exact ones (then entropies and KL are left out: None).
Notation as spec/theorems.md: marginals p_j, q = prod_j p_j, x* the marginal argmaxes (ties: lowest symbol),
errors e_j = 1 - p_j(x*_j), S = sum e_j, e_max = max e_j, p* = p(x*), q* = q(x*).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass
class Analysis:
    joints: np.ndarray  # [N, V**n] flattened, row-major over positions
    num_symbols: int
    length: int
    marginals: np.ndarray  # [N, n, V]
    x_star: np.ndarray  # [N, n] int
    errors: np.ndarray  # [N, n]
    product: np.ndarray  # [N, V**n] q
    p_star: np.ndarray  # [N]
    q_star: np.ndarray  # [N]
    best_other: np.ndarray  # [N] max_{z != x*} p(z)
    tv: np.ndarray  # [N] TV(p, q)
    kl: np.ndarray | None  # [N] KL(p || q) in nats (float batches only)
    entropies: np.ndarray | None  # [N, n] H(X_j) in nats (float batches only)

    @property
    def exact(self) -> bool:
        return self.joints.dtype == object

    @property
    def total_error(self) -> np.ndarray:
        return self.errors.sum(axis=1)

    @property
    def max_error(self) -> np.ndarray:
        return self.errors.max(axis=1)

    @property
    def unique_argmax(self) -> np.ndarray:
        """x* is the unique argmax of p."""
        return self.p_star > self.best_other

    def lp_distance(self, order: float) -> np.ndarray:
        diff = np.abs(self.joints - self.product).astype(float)
        return (diff**order).sum(axis=1) ** (1 / order)


def analyse(joints) -> Analysis:
    """joints [N, V, ..., V] (or one joint [V, ..., V] with ``analyse(joint[None])``) -> Analysis."""
    joints = np.asarray(joints)
    if joints.ndim < 2 or any(size != joints.shape[1] for size in joints.shape[1:]):
        raise ValueError(f"joints must have shape [N, V, ..., V], got {joints.shape}")
    batch, symbols, length = joints.shape[0], joints.shape[1], joints.ndim - 1
    marginals = np.stack([joints.sum(axis=tuple(a for a in range(1, length + 1) if a != j + 1))
                          for j in range(length)], axis=1)  # [N, n, V]
    x_star = _exact_argmax(marginals) if joints.dtype == object else np.argmax(marginals, axis=2)  # [N, n]
    confidence = np.take_along_axis(marginals, x_star[..., None], axis=2)[..., 0]  # [N, n]
    flat = joints.reshape(batch, -1)
    product = _outer(marginals)  # [N, V**n]
    star_index = (x_star * symbols ** np.arange(length - 1, -1, -1)).sum(axis=1)  # [N]
    rows = np.arange(batch)
    others = flat.copy()
    others[rows, star_index] = -1
    tv = np.abs(flat - product).sum(axis=1) / 2
    kl = entropies = None
    if joints.dtype != object:
        kl = _kl(flat, product)
        entropies = -(marginals * np.log(np.where(marginals > 0, marginals, 1))).sum(axis=2)
    return Analysis(flat, symbols, length, marginals, x_star, 1 - confidence, product, flat[rows, star_index],
                    confidence.prod(axis=1), others.max(axis=1), tv, kl, entropies)


def _exact_argmax(marginals: np.ndarray) -> np.ndarray:
    """argmax over the last axis of an object array of Fractions, ties to the lowest index."""
    batch, length, symbols = marginals.shape
    out = np.zeros((batch, length), dtype=int)
    for b in range(batch):
        for j in range(length):
            row = list(marginals[b, j])
            out[b, j] = row.index(max(row))
    return out


def _outer(marginals: np.ndarray) -> np.ndarray:
    """prod_j p_j as [N, V**n], row-major over positions."""
    product = marginals[:, 0]
    for j in range(1, marginals.shape[1]):
        product = (product[:, :, None] * marginals[:, j][:, None, :]).reshape(marginals.shape[0], -1)
    return product


def _kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    safe = p > 0
    return np.where(safe, p * np.log(np.where(safe, p, 1) / np.where(safe, q, 1)), 0.0).sum(axis=1)


def exact(values, shape) -> np.ndarray:
    """An object array of Fractions of ``shape`` from numbers or strings ("2/5")."""
    return np.array([Fraction(v) for v in np.ravel(values)], dtype=object).reshape(shape)


def flip(sequence: tuple[int, ...], position: int, symbols: int) -> tuple[int, ...]:
    """``sequence`` with the symbol at ``position`` replaced by the next one (mod V)."""
    out = list(sequence)
    out[position] = (out[position] + 1) % symbols
    return tuple(out)
