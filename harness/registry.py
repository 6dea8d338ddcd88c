"""The check registry behind ``veridec verify``.

A decoder family registers its checks in one module (``harness/checks_<family>.py``) with ``@check``; the
modules are listed once in ``CHECK_MODULES``. A check takes a ``VerifyContext`` and returns a ``CheckResult``:
how many cases it ran, whether all passed, and its worst margin (how far the closest case was from failing,
in the unit the check states; negative means failed).
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

CHECK_MODULES = ("veridec.harness.checks_models", "veridec.harness.checks_reference", "veridec.harness.checks_bounds")


@dataclass
class VerifyContext:
    model: object  # the model under test, in float32
    model64: object  # the same weights in float64 (measures float32 rounding)
    seed: int = 0
    quick: bool = False

    def generator(self, salt: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1_000_003 + salt)


@dataclass
class CheckResult:
    name: str
    cases: int
    passed: bool
    worst_margin: float | None
    unit: str = ""
    detail: str = ""


@dataclass
class Check:
    name: str
    description: str
    run: Callable[[VerifyContext], CheckResult] = field(repr=False)


CHECKS: dict[str, Check] = {}


def check(name: str, description: str):
    """Register ``fn(ctx) -> (cases, passed, worst_margin, unit, detail)`` as a verify check."""

    def register(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is registered twice")

        def run(ctx: VerifyContext) -> CheckResult:
            return CheckResult(name, *fn(ctx))

        CHECKS[name] = Check(name, description, run)
        return fn

    return register


def all_checks() -> dict[str, Check]:
    for module in CHECK_MODULES:
        importlib.import_module(module)
    return CHECKS


def results_to_json(results: list[CheckResult]) -> list[dict]:
    return [asdict(r) for r in results]
