"""What a check is given, refused with one clear line (spec/exactness.md EC2): a replayed case (``--case``) and a
tier A baseline (``--baseline``), before anything runs."""

from __future__ import annotations

import math

from .exact import HIGHER_IS_WORSE, LOWER_IS_WORSE

CASE_KEYS = ("prompt", "attention_mask", "seed", "settings")
SEED_LIMIT = 2**63  # torch.manual_seed takes seeds in [0, 2**63)


def checked_case(case, settings: tuple[str, ...], structure: tuple[str, ...], vocab_size: int | None) -> dict:
    """A case as the strategies write it: prompt [B][P] of token ids, attention_mask [B][P] of 0/1 or None, a seed
    in [0, 2**63), settings among the target's (``settings``) and the structure keys."""
    if not isinstance(case, dict) or set(case) != set(CASE_KEYS):
        raise ValueError("case must be a dict with keys prompt, attention_mask, seed, settings (as a report "
                         f"prints it), got {case!r}"[:300])
    _check_rows("case: prompt", case["prompt"], range(vocab_size) if vocab_size else None)
    if case["attention_mask"] is not None:
        _check_rows("case: attention_mask", case["attention_mask"], (0, 1))
        if [len(row) for row in case["attention_mask"]] != [len(row) for row in case["prompt"]]:
            raise ValueError("case: attention_mask must have the prompt's shape")
    if not _integer(case["seed"]) or not 0 <= case["seed"] < SEED_LIMIT:
        raise ValueError(f"case: seed must be an integer in [0, 2**63), got {case['seed']!r}")
    _check_settings(case["settings"], (*settings, *structure))
    return case


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_rows(name: str, rows, allowed) -> None:
    """A non-empty list of equal-length non-empty lists of integers (within ``allowed`` when given)."""
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list) and row for row in rows):
        raise ValueError(f"{name} must be a non-empty list of non-empty rows of token ids, got {rows!r}"[:300])
    if len({len(row) for row in rows}) != 1:
        raise ValueError(f"{name}: the rows must have one length, got {[len(row) for row in rows]}")
    wrong = [v for row in rows for v in row if not _integer(v) or (allowed is not None and v not in allowed)]
    if wrong:
        bad = wrong[0]
        where = "" if allowed is None else f" in [{min(allowed)}, {max(allowed)}]"
        raise ValueError(f"{name} must hold integers{where}, got {bad!r}")


def _check_settings(settings, known: tuple[str, ...]) -> None:
    if not isinstance(settings, dict):
        raise ValueError(f"case: settings must be a dict, got {settings!r}"[:300])
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(f"case: unknown setting(s) {unknown}; this target takes {sorted(set(known))}")
    threshold = settings.get("threshold")
    if isinstance(threshold, dict):
        rank = threshold.get("at_confidence")
        if set(threshold) != {"at_confidence"} or not _integer(rank) or rank < 1:
            raise ValueError(f"case: threshold {{\"at_confidence\": r}} needs an integer r >= 1, got {threshold!r}")
    for name, value in settings.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"case: setting {name} must be finite, got {value!r}")


def checked_baseline(baseline, source: str = "baseline") -> dict:
    """A tier A baseline: a JSON object whose compared measures are numbers (or null where none was measured)."""
    if not isinstance(baseline, dict):
        raise ValueError(f"{source} must be a JSON object of metrics (as tier A writes it), got "
                         f"{type(baseline).__name__}")
    for name in (*LOWER_IS_WORSE, *HIGHER_IS_WORSE):
        value = baseline.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ValueError(f"{source}: {name} must be a finite number or null, got {value!r}")
    return baseline
