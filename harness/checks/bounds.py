"""``veridec verify`` rows for spec/theorems.md: one check per theorem on random joints (the bounds table).

A row passes when no case violates a theorem this library states; a *published* claim spec/theorems.md marks
as off passes when it does fail (its counterexample is the evidence), and the other published claims must hold.
"""

from __future__ import annotations

from functools import lru_cache

from veridec.proofs_checks.laws import ROUNDING, decoder_table
from veridec.proofs_checks.table import run_bounds

from .registry import VerifyContext, check

OFF_AS_PUBLISHED = ("T2d Fast-dLLM KL (published)", "T3b concatenation of clusters (published)",
                    "T4 neighbour capacity (published)")


@lru_cache(maxsize=4)
def _report(cases: int, seed: int) -> dict:
    return run_bounds(cases=cases, seed=seed)


def _row(ctx: VerifyContext, theorem: str):
    report = _report(20_000 if ctx.quick else 100_000, ctx.seed)
    row = next(r for r in report["rows"] if r["theorem"] == theorem)
    expected_to_fail = theorem in OFF_AS_PUBLISHED
    passed = row["violations"] > 0 and bool(row["counterexample"]) if expected_to_fail else row["violations"] == 0
    detail = f"{row['hypotheses_held']} with hypotheses, {row['violations']} violations"
    if expected_to_fail:
        detail += f"; counterexample: {row['counterexample']}"
    margin = None if expected_to_fail else row["tightest_margin"]  # a published claim passes by failing
    unit = "" if margin is None else "bound - value + float64 rounding"
    return row["cases"], passed, margin, unit, detail


def _register(theorem: str) -> None:
    name = "bounds/" + theorem.split(" ", 1)[0] + "-" + theorem.split(" ", 1)[1].lower().replace(" ", "-") \
        .replace("(", "").replace(")", "")
    check(name, theorem)(lambda ctx: _row(ctx, theorem))


for _theorem in ("T1 general certificate", "T2 Fast-dLLM argmax", "T2c Fast-dLLM TV (published)",
                 "T2c Fast-dLLM TV (tighter)", "T2d Fast-dLLM KL (published)", "T2d Fast-dLLM KL (corrected)",
                 "T3 LocalLeap cluster certificate", "T3b concatenation of clusters (published)",
                 "T4 neighbour capacity (corrected)", "T4 neighbour capacity (published)", "T5 distance bounds"):
    _register(_theorem)


@lru_cache(maxsize=4)
def _decoder_laws(cases: int, seed: int) -> list[dict]:
    return decoder_table(cases=cases, seed=seed)


def _laws(ctx: VerifyContext) -> list[dict]:
    return _decoder_laws(1 if ctx.quick else 3, ctx.seed)  # oracles per family (`bounds --decoders`: 20)


@check("bounds/TD1-exact-decoder-laws", "exact output laws of the sampled presets on oracles sum to 1")
def _td1(ctx: VerifyContext):
    rows = _laws(ctx)
    worst = max(r["mass_error"] for r in rows)
    cases = sum(r["cases"] for r in rows)
    return cases, worst < 1e-9, 1e-9 - worst, "1e-9 - |mass - 1|", f"{len(rows)} rows (decoder x remasking x oracle)"


@check("bounds/TD2-random-order-decode-bound", "TD2: TV(decoder law, joint) <= the bound, random remasking, T = 1")
def _td2(ctx: VerifyContext):
    rows = [r for r in _laws(ctx) if r["violations"] is not None]
    violations = sum(r["violations"] for r in rows)
    margin = min(r["tightest_slack"] for r in rows) + ROUNDING
    return sum(r["cases"] for r in rows), violations == 0, margin, "bound - TV + 1e-12 rounding", \
        f"{violations} violations"
