"""What a check is given, refused with one clear line (spec/exactness.md EC2): a replayed case (``--case``) and a
tier A baseline (``--baseline``), before anything runs."""

from __future__ import annotations

import difflib
import math

from .exact import COST_FIELDS, HIGHER_IS_WORSE, LOWER_IS_WORSE

CASE_KEYS = ("prompt", "attention_mask", "seed", "settings")
SEED_LIMIT = 2**63  # torch.manual_seed takes seeds in [0, 2**63)
STEPS_PER_TOKEN = 4  # a case's steps per generated position at most (Dream's golden cases take up to 2.5)
MIN_STEPS_CAP = 64  # ... but never a cap below this
RATES = ("exact_rate", "mean_token_match", "commit_order_match", "agreement_rate")  # shares, in [0, 1]
STRUCTURED = {"drift_by_call": list, "agreement_failures": list, "regressed": dict}  # not single numbers
BASELINE_KEYS = ("cases", "exact_rate", "mean_token_match", "commit_order_match", "max_logit_error", "drift_p50",
                 "drift_p99", "drift_by_call", "agreement_rate", "agreement_unplaced", "agreement_failures",
                 *(f"{side}_{name}" for side in ("target", "candidate") for name in COST_FIELDS), "regressed")
TIER_S_KEYS = ("samples_per_side", "detectable_tv", "smallest_corrected_p")


def checked_case(case, settings: tuple[str, ...], structure: tuple[str, ...], vocab_size: int | None,
                 length_name: str = "gen_length", max_batch: int | None = None) -> dict:
    """A case as the strategies write it: prompt [B][P] of token ids with at most ``max_batch`` rows,
    attention_mask [B][P] of 0/1 or None, a seed in [0, 2**63), settings among the target's (``settings``) and
    the structure keys, the target's length (``length_name``) among them."""
    if not isinstance(case, dict) or set(case) != set(CASE_KEYS):
        raise ValueError("case must be a dict with keys prompt, attention_mask, seed, settings (as a report "
                         f"prints it), got {case!r}"[:300])
    _check_rows("case: prompt", case["prompt"], range(vocab_size) if vocab_size else None)
    if max_batch is not None and len(case["prompt"]) > max_batch:
        raise ValueError(f"case: prompt has {len(case['prompt'])} rows, more than max_batch {max_batch} "
                         "(--max-batch: the largest batch the candidate takes)")
    if case["attention_mask"] is not None:
        _check_rows("case: attention_mask", case["attention_mask"], (0, 1))
        if [len(row) for row in case["attention_mask"]] != [len(row) for row in case["prompt"]]:
            raise ValueError("case: attention_mask must have the prompt's shape")
    if not _integer(case["seed"]) or not 0 <= case["seed"] < SEED_LIMIT:
        raise ValueError(f"case: seed must be an integer in [0, 2**63), got {case['seed']!r}")
    _check_settings(case["settings"], (*settings, *structure))
    if length_name not in case["settings"]:
        raise ValueError(f"case: settings must give {length_name} (the length to generate; a report prints every "
                         f"setting the case ran with), got {case['settings']!r}"[:300])
    _check_steps(case["settings"], length_name)
    return case


def _check_steps(settings: dict, length_name: str) -> None:
    """Steps within what a decode can use: ``steps`` at most STEPS_PER_TOKEN per generated token,
    ``denoising_steps`` (per block) at most STEPS_PER_TOKEN per block position, never capped below MIN_STEPS_CAP
    (the drawn cases and knobs stay inside); a typo of 10^9 steps would otherwise build a schedule that
    exhausts memory before the first forward."""
    for name, per in (("steps", length_name), ("denoising_steps", "block_length")):
        if name not in settings or not _integer(settings.get(per)):
            continue
        top = max(MIN_STEPS_CAP, STEPS_PER_TOKEN * settings[per])
        if not _integer(settings[name]) or not 1 <= settings[name] <= top:
            raise ValueError(f"case: {name} must be an integer in [1, {top}] (at most {STEPS_PER_TOKEN} per {per} "
                             f"position, {MIN_STEPS_CAP} at least), got {settings[name]!r}")


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
    """A tier A baseline as tier A writes it (``exact.case_metrics``, plus "regressed" where it failed): known keys
    only, rates in [0, 1], counts and errors >= 0, each a finite number or null; at least one measure compared."""
    if not isinstance(baseline, dict):
        raise ValueError(f"{source} must be a JSON object of metrics (as tier A writes it), got "
                         f"{type(baseline).__name__}")
    unknown = sorted(set(baseline) - set(BASELINE_KEYS))
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {unknown}{_unknown_hint(unknown)}; a tier A baseline holds "
                         f"{', '.join(BASELINE_KEYS)}")
    for name, value in baseline.items():
        _check_measure(source, name, value)
    if all(baseline.get(name) is None for name in (*LOWER_IS_WORSE, *HIGHER_IS_WORSE)):
        raise ValueError(f"{source} holds none of the measures a run is held to ({', '.join(LOWER_IS_WORSE)}, "
                         f"{', '.join(HIGHER_IS_WORSE)}): it would pass anything")
    return baseline


def _unknown_hint(unknown: list[str]) -> str:
    """Tier S's measures named as such; a misspelt key's likely meaning."""
    if set(unknown) & set(TIER_S_KEYS):
        return " (tier S's measures: a tier A baseline cannot hold them)"
    near = {name: difflib.get_close_matches(name, BASELINE_KEYS, n=1) for name in unknown}
    hints = [f"{name!r}: did you mean {match[0]!r}?" for name, match in near.items() if match]
    return f" ({'; '.join(hints)})" if hints else ""


def _check_measure(source: str, name: str, value) -> None:
    """One baseline entry: its type and range (structured entries: their type only)."""
    if name in STRUCTURED:
        kind = STRUCTURED[name]
        if value is not None and not isinstance(value, kind):
            raise ValueError(f"{source}: {name} must be a JSON {'list' if kind is list else 'object'} or null, got "
                             f"{value!r}"[:300])
        return
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{source}: {name} must be a finite number or null, got {value!r}"[:300])
    high = 1 if name in RATES else math.inf
    if not 0 <= value <= high:
        raise ValueError(f"{source}: {name} must lie in [0, {'1]' if name in RATES else 'inf)'}, got {value!r}")
