"""Knobs that do nothing (spec/exactness.md EC7): for each setting the candidate names and the target takes, a drawn
case where another value of it changes the target's output or its model calls, and the candidate run there with
both values. A knob whose change moves the target but not the candidate ("threshold has no effect") fails the
check: users of Fast-dLLM report thresholds without effect and caches never reused (NVlabs/Fast-dLLM issues 38,
52, 54), which an output comparison alone can miss where the two values happen to agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

import torch
from hypothesis import HealthCheck, Phase, find
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import NoSuchExample

from .families import Family
from .running import CALL_SLACK, CheckSetup, Side, case_tensors, resolve_case, run_candidate, run_target

SEARCHED = 12  # drawn cases tried per knob before it counts as not exercised
COST = ("model_calls", "full_forwards", "query_positions")


@dataclass
class KnobFinding:
    """A knob and what was found: "effective", "no effect" (with the case and the two values) or "not exercised"."""

    name: str
    verdict: str
    case: dict | None = None
    values: tuple = ()

    def sentence(self) -> str:
        if self.verdict != "no effect":
            return f"{self.name}: {self.verdict}"
        first, second = self.values
        return (f"{self.name} has no effect: on the case below the target's output or calls change between "
                f"{self.name}={first!r} and {self.name}={second!r}, the candidate's do not")


def variants(name: str, settings: dict, family: Family) -> list[dict]:
    """The case's ``settings`` with another value of knob ``name``, valid with the rest, as ``family`` searches it
    (none for a knob the family does not search)."""
    knob = family.knobs.get(name)
    return [] if knob is None else knob(settings)


def alternatives(name: str, settings: dict, family: Family) -> list:
    """The other values of knob ``name`` that ``variants`` tries."""
    return [variant.get(name) for variant in variants(name, settings, family)]


def knob_findings(setup: CheckSetup, strategy, names: set, seed: int) -> list[KnobFinding]:
    """One finding per knob the candidate names and the target takes."""
    knobs = [name for name in setup.goal.family.knobs if name in names]
    return [find_effect(setup, strategy, name, seed) for name in knobs]


def find_effect(setup: CheckSetup, strategy, name: str, seed: int) -> KnobFinding:
    """A drawn case on which another value of ``name`` moves the target; there, does it move the candidate? A
    knob without effect is searched again, shrinking, for the smallest case that shows it."""
    found = _search(strategy, lambda case: _moves_target(setup, name, case), seed, shrink=False)
    if found is None:
        return KnobFinding(name, "not exercised")
    if _moves_candidate(setup, found):
        return KnobFinding(name, "effective", found["case"])
    smallest = _search(strategy, lambda case: _idle_on(setup, name, case), seed, shrink=True) or found
    return KnobFinding(name, "no effect", smallest["case"], tuple(_value(name, smallest[key])
                                                                  for key in ("case", "other")))


def _search(strategy, condition, seed: int, shrink: bool) -> dict | None:
    """What ``condition`` finds (a dict) on the first drawn case where it finds something (``shrink``: on the
    smallest such case), or None when no case of ``SEARCHED`` does."""
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    try:
        with torch.no_grad():
            case = find(strategy, lambda drawn: bool(condition(drawn)), random=Random(seed),
                        settings=hypothesis_settings(max_examples=SEARCHED, database=None, phases=phases,
                                                     deadline=None, suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        return None
    return condition(case) or None


def _moves_target(setup: CheckSetup, name: str, case: dict) -> dict | None:
    """The case (resolved) and a variant of it in ``name`` on which the target's output or calls differ."""
    case = _resolved(setup, case)
    if case is None or name not in case["settings"]:
        return None
    first = _side(setup, case, run_target)
    for changed in variants(name, case["settings"], setup.goal.family):
        other = {**case, "settings": changed}
        second = _side(setup, other, run_target)
        if first.error is None and second.error is None and not _same(first, second):
            calls = max(first.counters.model_calls, second.counters.model_calls)
            return {"case": case, "other": other, "limit": 2 * calls + CALL_SLACK,
                    "seconds": max(first.seconds, second.seconds)}
    return None


def _idle_on(setup: CheckSetup, name: str, case: dict) -> dict | None:
    """The case and its variant where ``name`` moves the target and not the candidate, or None."""
    found = _moves_target(setup, name, case)
    return found if found is not None and not _moves_candidate(setup, found) else None


def _moves_candidate(setup: CheckSetup, found: dict) -> bool:
    """Whether the candidate's output or calls differ between the two cases (a failure counts as a difference:
    the main check judges it)."""
    with torch.no_grad():
        first = _side(setup, found["case"], run_candidate, found["limit"], False, found["seconds"])
        second = _side(setup, found["other"], run_candidate, found["limit"], False, found["seconds"])
    return first.error is not None or second.error is not None or not _same(first, second)


def _value(name: str, case: dict):
    return case["settings"].get(name)


def _resolved(setup: CheckSetup, case: dict) -> dict | None:
    prompt, mask = case_tensors(case, setup.model)
    try:
        return resolve_case(case, setup.model, prompt, mask, setup.goal)
    except ValueError:
        return None


def _side(setup: CheckSetup, case: dict, run, *limit) -> Side:
    prompt, mask = case_tensors(case, setup.model)
    return run(setup, prompt, mask, case, *limit)


def _same(a: Side, b: Side) -> bool:
    """The same output and the same model calls (counters)."""
    if a.canvas.shape != b.canvas.shape or not torch.equal(a.canvas.cpu(), b.canvas.cpu()):
        return False
    return all(getattr(a.counters, f) == getattr(b.counters, f) for f in COST)
