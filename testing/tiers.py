"""The three tiers of ``check_decoder`` as one table (spec EC1, EC3, ST2, ST7): how a tier runs one case, whether it
stops at the first failure and shrinks it, what it measures over the cases run, and how many cases it draws by
default (the API's and the CLI's default alike)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .exact import case_metrics, run_case
from .exact_law import run_exact_law_case
from .stochastic import law_metrics, run_law_case


@dataclass(frozen=True)
class Tier:
    letter: str
    meaning: str
    default_cases: int
    runner: Callable  # (CheckSetup, case) -> an outcome with .verdict, .failed, .case
    metrics: Callable  # outcomes -> the result's metrics
    shrinks: bool = False  # a failing case is shrunk to the smallest one
    runs_every_case: bool = False  # measures every case instead of stopping at the first failure
    sampled: bool = False  # cases at temperature > 0, outputs compared by their laws
    measures_logits: bool = False  # the logit error of the candidate's cached calls
    uses_baseline: bool = False  # fails only where worse than a stored baseline
    reports_metrics: bool = False  # the report shows the metrics of the cases run
    oracle_runner: Callable | None = None  # on an oracle model: against the exact law of the target's decode


TIERS = {
    "E": Tier("E", "exact: the same tokens, commit order and counters", 200, run_case, case_metrics, shrinks=True),
    "A": Tier("A", "approximate: measured, held against a baseline", 200, run_case, case_metrics,
              runs_every_case=True, measures_logits=True, uses_baseline=True, reports_metrics=True),
    "S": Tier("S", "stochastic: the same output law, from independent samples", 5, run_law_case, law_metrics,
              sampled=True, reports_metrics=True, oracle_runner=run_exact_law_case),
}
TIER_LETTERS = tuple(TIERS)


def tier_named(letter: str) -> Tier:
    if letter not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(map(repr, TIER_LETTERS))}, got {letter!r}")
    return TIERS[letter]
