"""Knobs that do nothing (spec/exactness.md EC7): for each setting the candidate names and the target takes, the
drawn cases where another value of it changes the target's output or its model calls, and the candidate run on
each with both values. A knob that moves the target but never the candidate on any of them ("threshold has no
effect") fails the check: users of Fast-dLLM report thresholds without effect and caches never reused
(NVlabs/Fast-dLLM issues 38, 52, 54), which an output comparison alone can miss where the two values happen to
agree. One case where the candidate happens not to move carries no verdict: the search goes on through every drawn
case. At tier E, a knob that moves the candidate otherwise than the target (the changed case diverges) fails it
too, reported with that case.
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
    """A knob and what was found: "effective", "no effect" (the smallest case showing it, the two values),
    "moves differently" (the changed case, on which the candidate diverges: ``problems``) or "not exercised";
    ``drawn`` cases drawn, ``moving`` those on which another value moves the target, ``pairs`` the values tried
    there (value, other value)."""

    name: str
    verdict: str
    case: dict | None = None
    values: tuple = ()
    drawn: int = 0
    moving: int = 0
    pairs: tuple = ()
    problems: tuple = ()

    @property
    def failed(self) -> bool:
        return self.verdict in ("no effect", "moves differently")

    def sentence(self) -> str:
        if self.verdict == "moves differently":
            return (f"{self.name} moves the candidate otherwise than the target: with {self.name}={self.values[1]!r} "
                    f"the case below diverges ({'; '.join(self.problems)})")
        if self.verdict == "not exercised":
            return f"{self.name}: not exercised (no value tried moves the target on any of {self.drawn} drawn cases)"
        if self.verdict != "no effect":
            return f"{self.name}: {self.verdict}"
        first, second = self.values
        tried = ", ".join(f"{a!r} -> {b!r}" for a, b in sorted(set(self.pairs), key=repr))
        return (f"{self.name} has no effect: on the case below the target's output or calls change between "
                f"{self.name}={first!r} and {self.name}={second!r}, the candidate's do not; nor do they on any of "
                f"the {self.moving} drawn cases (of {self.drawn}) where another value moves the target (values "
                f"tried: {tried})")


def variants(name: str, settings: dict, family: Family) -> list[dict]:
    """The case's ``settings`` with another value of knob ``name``, valid with the rest, as ``family`` searches it
    (none for a knob the family does not search)."""
    knob = family.knobs.get(name)
    return [] if knob is None else knob(settings)


def alternatives(name: str, settings: dict, family: Family) -> list:
    """The other values of knob ``name`` that ``variants`` tries."""
    return [variant.get(name) for variant in variants(name, settings, family)]


def knob_findings(setup: CheckSetup, strategy, names: set, seed: int, exact: bool = False) -> list[KnobFinding]:
    """One finding per knob the candidate names and the target takes (``exact``: tier E, where a changed case on
    which the candidate diverges is a finding too)."""
    knobs = [name for name in setup.goal.family.knobs if name in names]
    return [find_effect(setup, strategy, name, seed, exact) for name in knobs]


def find_effect(setup: CheckSetup, strategy, name: str, seed: int, exact: bool = False) -> KnobFinding:
    """The drawn cases (at most ``SEARCHED``) on which another value of ``name`` moves the target, until one on
    which it moves the candidate too: that settles it (effective, or at tier E "moves differently" when the
    changed case diverges). Where it moves the candidate on none of them, the search is run again, shrinking, for
    the smallest case that shows the knob without effect."""
    moving: list[dict] = []
    drawn = [0]

    def moves_both(case) -> dict | None:
        drawn[0] += 1
        found = _moves_target(setup, name, case)
        if found is None:
            return None
        moving.append(found)
        return found if _moves_candidate(setup, found) else None

    both = _first(strategy, moves_both, seed)
    tally = {"drawn": drawn[0], "moving": len(moving), "pairs": tuple(_values(name, found) for found in moving)}
    if both is not None:
        return _judged_move(setup, name, both, exact, tally)
    if not moving:
        return KnobFinding(name, "not exercised", **tally)
    smallest = _search(strategy, lambda case: _idle_on(setup, name, case), seed, shrink=True) or moving[0]
    return KnobFinding(name, "no effect", smallest["case"], _values(name, smallest), **tally)


def _judged_move(setup: CheckSetup, name: str, found: dict, exact: bool, tally: dict) -> KnobFinding:
    """A knob that moves both sides: effective, unless (tier E) the candidate diverges on the changed case."""
    if exact:
        from .exact import run_case  # the case comparison of tier E (exact imports running, as this module does)

        outcome = setup.goal.family.runners.get("E", run_case)(setup, found["other"])
        if outcome.failed:
            return KnobFinding(name, "moves differently", found["other"], _values(name, found),
                               problems=tuple(outcome.problems), **tally)
    return KnobFinding(name, "effective", found["case"], **tally)


def _first(strategy, condition, seed: int) -> dict | None:
    """What ``condition`` finds (a dict) on the first of ``SEARCHED`` drawn cases where it finds something, or None
    (the condition runs once per drawn case)."""
    found: list[dict] = []

    def holds(case) -> bool:
        if found:  # Hypothesis replays the case it found: it is not run again
            return True
        value = condition(case)
        if value is not None:
            found.append(value)
        return value is not None

    _search(strategy, holds, seed, shrink=False, rerun=False)
    return found[0] if found else None


def _values(name: str, found: dict) -> tuple:
    return tuple(_value(name, found[key]) for key in ("case", "other"))


def _search(strategy, condition, seed: int, shrink: bool, rerun: bool = True) -> dict | None:
    """What ``condition`` finds (a dict) on the first drawn case where it finds something (``shrink``: on the
    smallest such case), or None when no case of ``SEARCHED`` does (``rerun=False``: the case found, the condition
    not run on it again)."""
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    try:
        with torch.no_grad():
            case = find(strategy, lambda drawn: bool(condition(drawn)), random=Random(seed),
                        settings=hypothesis_settings(max_examples=SEARCHED, database=None, phases=phases,
                                                     deadline=None, suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        return None
    return (condition(case) or None) if rerun else case


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
