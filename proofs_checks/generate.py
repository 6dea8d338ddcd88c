"""Random joint distributions for the theorem checks (numpy, no hypothesis needed): [N, V, ..., V] float64.

Kinds, mixed evenly by ``random_joints``: Dirichlet draws (diffuse to peaked), peaked joints (a point mass
on a random x* mixed with noise: certificates often hold), flip joints (mass only on x* and its single-
coordinate flips: the adversarial placement behind T2's tightness, near the certificate boundary), products
of marginals (p = q) and degenerate joints (point masses, uniform)."""

from __future__ import annotations

import numpy as np

KINDS = ("dirichlet", "peaked", "flips", "product", "degenerate")


def random_joints(rng: np.random.Generator, count: int, symbols: int, length: int, kind: str) -> np.ndarray:
    size = symbols**length
    if kind == "dirichlet":
        alpha = rng.uniform(0.05, 1.0, size=(count, 1))
        flat = rng.gamma(np.broadcast_to(alpha, (count, size)))
    elif kind == "peaked":
        flat = rng.gamma(np.full((count, size), 0.5))
        flat /= flat.sum(axis=1, keepdims=True)
        weight = rng.uniform(0.5, 1.0, size=(count, 1))
        flat = (1 - weight) * flat + weight * _one_hot(rng.integers(size, size=count), size)
    elif kind == "flips":
        flat = _flip_joints(rng, count, symbols, length)
    elif kind == "product":
        marginals = rng.dirichlet(np.full(symbols, 0.7), size=(count, length))  # [N, n, V]
        flat = marginals[:, 0]
        for j in range(1, length):
            flat = (flat[:, :, None] * marginals[:, j][:, None, :]).reshape(count, -1)
    elif kind == "degenerate":
        flat = np.where(rng.random((count, 1)) < 0.5, _one_hot(rng.integers(size, size=count), size),
                        np.full((count, size), 1.0 / size))
    else:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    flat = flat / flat.sum(axis=1, keepdims=True)
    return flat.reshape(count, *[symbols] * length)


def _one_hot(index: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((len(index), size))
    out[np.arange(len(index)), index] = 1.0
    return out


def _flip_joints(rng, count: int, symbols: int, length: int) -> np.ndarray:
    """p(x*) = 1 - sum(delta), p(flip_k(x*)) = delta_k, total flip mass around 1/(n+1) (the boundary)."""
    stars = rng.integers(symbols, size=(count, length))  # [N, n]
    powers = symbols ** np.arange(length - 1, -1, -1)
    deltas = rng.dirichlet(np.ones(length), size=count) * rng.uniform(0, 2 * length / (length + 1), (count, 1))
    deltas = np.minimum(deltas, 1.0 / length)  # keep p(x*) >= 0
    flat = np.zeros((count, symbols**length))
    rows = np.arange(count)
    flat[rows, stars @ powers] = 1 - deltas.sum(axis=1)
    for k in range(length):
        flipped = stars.copy()
        flipped[:, k] = (flipped[:, k] + 1 + rng.integers(symbols - 1, size=count)) % symbols
        np.add.at(flat, (rows, flipped @ powers), deltas[:, k])
    return flat


def mixed_joints(rng: np.random.Generator, count: int, symbols: int, length: int) -> np.ndarray:
    """``count`` joints, every kind in equal share (the last kind takes the remainder)."""
    share = count // len(KINDS)
    counts = [share if i < len(KINDS) - 1 else count - share * (len(KINDS) - 1) for i in range(len(KINDS))]
    return np.concatenate([random_joints(rng, n, symbols, length, kind) for n, kind in zip(counts, KINDS) if n])


def epsilons(rng: np.random.Generator, errors: np.ndarray, length: int) -> np.ndarray:
    """An eps per case for T2: between the largest error and 1/(n+1) when that interval is open (hypotheses
    hold), else just above the largest error (they fail on (n+1) eps <= 1)."""
    e_max = errors.max(axis=1).astype(float)
    top = 1.0 / (length + 1)
    u = rng.uniform(0.0, 1.0, size=len(e_max))
    inside = e_max + (1 - u) * (top - e_max)  # in (e_max, top]
    return np.where(e_max < top, np.maximum(inside, np.nextafter(e_max, 1)), np.nextafter(e_max, 1))
