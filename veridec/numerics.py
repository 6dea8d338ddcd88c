"""Tolerances from measured rounding (flash-attention style), never magic numbers.

The error of a float32 computation is measured against the same computation in float64; two float32
computations that should agree mathematically may then differ by at most the sum of their measured errors
(times a safety factor of 2), plus one float32 ulp at the scale of the output.
"""

from __future__ import annotations

import torch

SAFETY = 2.0
# The rerun a dtype's rounding is measured against: float64 for float32 (small models), float32 for bfloat16
# and float16 (what an 8B model's device can afford; flash-attention's tests measure bf16 the same way).
HIGHER = {torch.float32: torch.float64, torch.bfloat16: torch.float32, torch.float16: torch.float32}


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def ulp32(reference: torch.Tensor) -> float:
    return torch.finfo(torch.float32).eps * reference.abs().max().item()


def tolerance(low: torch.Tensor, high: torch.Tensor) -> float:
    """Allowed difference between two float32 results whose measured error vs float64 is |low - high|."""
    return SAFETY * 2 * max_abs(low, high) + ulp32(high)


def assert_close_measured(actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str) -> None:
    """Print the worst difference and the tolerance, then assert it holds."""
    err = max_abs(actual, expected)
    print(f"{what}: max abs error {err:.3e}, measured tolerance {tol:.3e}")
    assert err <= tol, f"{what}: max abs error {err:.3e} exceeds the measured tolerance {tol:.3e}"


def assert_within_rounding(actual: torch.Tensor, expected: torch.Tensor, expected64: torch.Tensor, what: str) -> None:
    """flash-attention's test: a float32 result ``actual`` may differ from the float32 reference ``expected`` by
    the tolerance measured from that reference against its float64 rerun ``expected64``."""
    assert_close_measured(actual, expected, tolerance(expected, expected64), what)


