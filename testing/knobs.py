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

from .running import CALL_SLACK, CheckSetup, Side, case_tensors, resolve_case, run_candidate, run_target

SEARCHED = 12  # drawn cases tried per knob before it counts as not exercised
THRESHOLDS = (None, 0.9, 0.5, 0.2, 0.05)
FACTORS = (None, 1.0, 0.5, 2.0, 4.0)
BACK_THRESHOLDS = (0.9, 0.5, 0.99, 0.2)  # WINO's threshold_back
EDITING = {"editing_threshold": (0.9, 0.5, 0.2), "max_post_steps": (16, 0, 1), "num_to_transfer": (1, 2),
           "eos_early_stop": (False, True)}  # the editing sampler's knobs
SDAR = {"denoising_steps": (1, 2, 4, 8), "top_k": (0, 3), "top_p": (1.0, 0.9),
        "remasking_strategy": ("low_confidence_dynamic", "low_confidence_static", "sequential"),
        "confidence_threshold": (0.85, 0.5, 0.3)}  # block diffusion's knobs (spec/block_diffusion.md BD9)
LLADA2 = {"steps": (1, 2, 4, 8), "minimal_topk": (1, 2), "top_k": (None, 3), "top_p": (None, 0.9),
          "threshold": (0.95, 0.5, 0.2), "block_length": (4, 2, 1, 8)}  # LLaDA2.0's knobs (BD12.1)
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


def alternatives(name: str, settings: dict, family: str = "block") -> list:
    """Other values of knob ``name`` valid with the rest of ``settings`` (the same structure otherwise) for a
    target of ``family``."""
    value = settings.get(name)
    if family == "llada2" and name in LLADA2:
        return [v for v in LLADA2[name] if v != value and (name != "minimal_topk" or v <= settings["gen_length"])]
    if name == "threshold":
        return [v for v in THRESHOLDS if v != value]
    if name == "threshold_back":
        return [v for v in BACK_THRESHOLDS if v != value]
    if name in EDITING:
        return [v for v in EDITING[name] if v != value]
    if name in SDAR:
        return [v for v in SDAR[name] if v != value]
    if name == "eb_threshold":
        return [v for v in (1.0, 0.35, 5.0) if v != value] if value is not None else []
    if name == "factor":
        return [v for v in FACTORS if v != value] if settings.get("threshold") is None else []
    if name == "steps" and "block_length" in settings:  # LLaDA, Fast-dLLM: a multiple of the blocks
        blocks = settings["gen_length"] // settings["block_length"]
        return [blocks * k for k in range(1, settings["block_length"] + 1) if blocks * k != value]
    if name == "steps":  # Dream: any count
        return [k for k in range(1, settings["max_new_tokens"] + 3) if k != value]
    if name == "temperature":
        return [v for v in (0.0, 0.7) if v != value]
    if name == "remasking":
        return [v for v in ("low_confidence", "random") if v != value]
    if name == "cfg_scale":
        return [v for v in (0.0, 1.5) if v != value]
    if name == "alg":
        return [v for v in ("origin", "maskgit_plus", "topk_margin", "entropy") if v != value]
    return []


KNOBS = ("threshold", "threshold_back", *EDITING, *SDAR, "eb_threshold", "factor", "steps", "temperature", "remasking",
         "cfg_scale", "alg", "minimal_topk")


def block_lengths(settings: dict) -> list[dict]:
    """``block_length`` changed to another divisor of the gen length, the steps per block kept where they fit
    (where there is a schedule)."""
    gen, block = settings["gen_length"], settings["block_length"]
    blocks = [b for b in range(1, gen + 1) if gen % b == 0 and b != block]
    if "steps" not in settings:  # WINO: no schedule
        return [{**settings, "block_length": b} for b in blocks]
    per_block = settings["steps"] // (gen // block)
    return [{**settings, "block_length": b, "steps": (gen // b) * min(per_block, b)} for b in blocks]


def variants(name: str, settings: dict, family: str = "block") -> list[dict]:
    if name == "block_length" and family != "llada2":
        return block_lengths(settings)
    return [{**settings, name: value} for value in alternatives(name, settings, family)]


def knob_findings(setup: CheckSetup, strategy, names: set, seed: int) -> list[KnobFinding]:
    """One finding per knob the candidate names and the target takes."""
    knobs = [name for name in (*KNOBS, "block_length") if name in names]
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
