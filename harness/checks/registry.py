"""The check registry behind ``veridec verify``.

A decoder family registers its checks in one module (``harness/checks/<family>.py``) with ``@check``; the
modules are listed once in ``CHECK_MODULES``. A check takes a ``VerifyContext`` and returns a ``VerifyResult``:
how many cases it ran, whether all passed, and its worst margin (how far the closest case was from failing,
in the unit the check states; negative means failed).
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

CHECK_MODULES = ("veridec.harness.checks.models", "veridec.harness.checks.reference", "veridec.harness.checks.bounds",
                 "veridec.harness.checks.block_diffusion")


@dataclass
class VerifyContext:
    model: object  # the model under test (float32, or bfloat16 with verify --dtype bfloat16)
    higher: object  # the same weights one precision up (float64, or float32 for bfloat16): measures rounding
    seed: int = 0
    quick: bool = False

    @property
    def exact(self) -> bool:
        """Whether ``higher`` is float64, where the decode-level identities hold bit for bit (SQ0.3)."""
        return self.higher is not None and next(self.higher.parameters()).dtype == torch.float64

    def generator(self, salt: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1_000_003 + salt)


@dataclass
class VerifyResult:
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
    run: Callable[[VerifyContext], VerifyResult] = field(repr=False)


CHECKS: dict[str, Check] = {}


def check(name: str, description: str):
    """Register ``fn(ctx) -> (cases, passed, worst_margin, unit, detail)`` as a verify check."""

    def register(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is registered twice")

        def run(ctx: VerifyContext) -> VerifyResult:
            return VerifyResult(name, *fn(ctx))

        CHECKS[name] = Check(name, description, run)
        return fn

    return register


def all_checks() -> dict[str, Check]:
    for module in CHECK_MODULES:
        importlib.import_module(module)
    return CHECKS


def results_to_json(results: list[VerifyResult]) -> list[dict]:
    return [asdict(r) for r in results]


def format_table(results: list[VerifyResult]) -> str:
    """The checks as an aligned text table (check, cases, result, worst margin, unit) and a pass count."""
    rows = [("check", "cases", "result", "worst margin", "unit")]
    for r in results:
        margin = "-" if r.worst_margin is None else f"{r.worst_margin:.3g}"
        rows.append((r.name, str(r.cases), "pass" if r.passed else "FAIL", margin, r.unit))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failed = sum(not r.passed for r in results)
    lines.append(f"{len(results) - failed}/{len(results)} checks passed")
    return "\n".join(lines)
