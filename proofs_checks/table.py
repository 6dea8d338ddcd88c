"""The bounds table behind ``veridec bounds`` and the bounds rows of ``veridec verify``."""

from __future__ import annotations

import time

import numpy as np

from . import counterexamples as cx
from .generate import epsilons, mixed_joints
from .joints import analyse
from .theorems import (TheoremResult, cluster_certificate, concatenation_claim, distance_bounds, fastdllm_kl,
                       fastdllm_theorem, fastdllm_tv, general_certificate)

SHAPES = [(v, n) for v in (2, 3, 4) for n in (1, 2, 3, 4)]  # (V, n): V**n <= 256 outcomes


def checks_for(a, rng) -> list[TheoremResult]:
    eps = epsilons(rng, a.errors, a.length)
    results = [general_certificate(a), fastdllm_theorem(a, eps), fastdllm_tv(a, eps, published=True),
               fastdllm_tv(a, eps, published=False), fastdllm_kl(a, eps, published=True),
               fastdllm_kl(a, eps, published=False), cluster_certificate(a), distance_bounds(a)]
    if a.length == 4:
        results.append(concatenation_claim(a, [[0, 1], [2, 3]]))
    return results


def run_bounds(cases: int = 100_000, seed: int = 0, chunk: int = 5_000, progress: bool = False) -> dict:
    """Exactly ``cases`` (>= 1) random joints spread over SHAPES, every check on each; rows merged per theorem, plus the
    exact published-claim counterexamples and the T4 capacity rows (``progress``: a bar on stderr with the rate and
    the time left). Returns {"rows", "counterexamples", "cases", "seconds", "joints_per_minute"}."""
    from tqdm import tqdm

    if not isinstance(cases, int) or cases < 1:
        raise ValueError(f"cases must be an integer >= 1, got {cases!r}")
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    merged: dict[str, dict] = {}
    with tqdm(total=cases, desc="bounds", unit="joint", unit_scale=True, disable=not progress) as bar:
        for i, (symbols, length) in enumerate(SHAPES):
            per_shape = cases // len(SHAPES) + (i < cases % len(SHAPES))  # exactly ``cases`` in all
            for begin in range(0, per_shape, chunk):
                joints = mixed_joints(rng, min(chunk, per_shape - begin), symbols, length)
                for result in checks_for(analyse(joints), rng):
                    merge(merged, result.summary())
                bar.update(min(chunk, per_shape - begin))
    seconds = time.perf_counter() - start
    rows = list(merged.values()) + capacity_rows()
    found = published_counterexamples()
    for row in rows:
        row["counterexample"] = found.get(row["theorem"], "")
    return {"rows": rows, "cases": cases, "seconds": round(seconds, 2),
            "joints_per_minute": round(cases / seconds * 60)}


def seconds_per_joint(seed: int = 0, per_shape: int = 1_000) -> float:
    """The time one joint takes through every check, measured on ``per_shape`` joints of each of SHAPES (the
    large ones cost the most) drawn from a generator of their own: ``run_bounds``'s joints are untouched."""
    rng = np.random.default_rng([seed, 1])
    start = time.perf_counter()
    for symbols, length in SHAPES:
        for result in checks_for(analyse(mixed_joints(rng, per_shape, symbols, length)), rng):
            result.summary()
    return (time.perf_counter() - start) / (per_shape * len(SHAPES))


def merge(merged: dict, row: dict) -> None:
    if row["theorem"] not in merged:
        merged[row["theorem"]] = row
        return
    into = merged[row["theorem"]]
    for key in ("cases", "hypotheses_held", "violations"):
        into[key] += row[key]
    for key in ("tightest_slack", "tightest_margin"):
        if row[key] is not None:
            into[key] = row[key] if into[key] is None else min(into[key], row[key])


def capacity_rows(denominator: int = 40) -> list[dict]:
    """T4 over every rational 1/2 < tau < kappa < 1 with the denominator: the corrected m_max is admissible and
    m_max + 1 is not; the published floor formula admits an m the condition rejects on integer boundaries."""
    grid = cx.capacity_grid(denominator)
    def corrected_wrong(k, t) -> bool:
        m = cx.neighbour_capacity(k, t)
        return not (m < 0 or cx.cluster_condition(k, t, m)) or cx.cluster_condition(k, t, m + 1)

    def published_wrong(k, t) -> bool:
        m = cx.published_capacity(k, t)
        return m >= 0 and not cx.cluster_condition(k, t, m)

    wrong_corrected = sum(corrected_wrong(k, t) for k, t in grid)
    wrong_published = sum(published_wrong(k, t) for k, t in grid)
    base = {"cases": len(grid), "hypotheses_held": len(grid), "tightest_slack": None, "tightest_margin": None}
    return [{"theorem": "T4 neighbour capacity (corrected)", "statement": "m_max = ceil(kappa/(1-tau) - 1) - 1",
             "published": False, "violations": wrong_corrected, **base},
            {"theorem": "T4 neighbour capacity (published)", "statement": "m_max = floor(kappa/(1-tau) - 1)",
             "published": True, "violations": wrong_published, **base}]


def published_counterexamples() -> dict[str, str]:
    """Exact counterexamples to the published claims spec/theorems.md marks as off, checked here."""
    out = {}
    tie = analyse(cx.certificate_tie()[None])
    assert not tie.unique_argmax[0] and tie.total_error[0] + tie.max_error[0] == 1
    out["T4 neighbour capacity (published)"] = ("kappa=4/5, tau=3/5: published m_max=1, but (1-kappa)+(1-tau) = "
                                                f"tau; {cx.show(cx.certificate_tie())} ties")
    concat = analyse(cx.concatenation_counterexample()[None])
    assert concat_fails(concat)
    out["T3b concatenation of clusters (published)"] = (f"{cx.show(cx.concatenation_counterexample())}: both "
                                                         "clusters certified (kappa=9/10, tau=3/5), p(0000)=0")
    single = analyse(np.array([[0.7, 0.3]]))
    kl = fastdllm_kl(single, np.array([0.35]), published=True)
    assert kl.violations[0]
    out["T2d Fast-dLLM KL (published)"] = ("n=1: p = q = (7/10, 3/10), eps = 7/20: KL = 0, bound (n-1) f_V = 0, "
                                           "0 < 0 fails")
    return out


def concat_fails(a) -> bool:
    result = concatenation_claim(a, [[0, 1], [2, 3]])
    return bool(result.hypotheses[0] and result.violations[0])


def to_markdown(report: dict) -> str:
    lines = [f"{report['cases']} random joints (V <= 4, n <= 4) in {report['seconds']} s "
             f"({report['joints_per_minute']:,} joints/minute)", "",
             "| theorem | published | cases | hypotheses held | violations | tightest slack | counterexample |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        slack = "-" if r["tightest_slack"] is None else f"{r['tightest_slack']:.3g}"
        lines.append(f"| {r['theorem']} | {'yes' if r['published'] else ''} | {r['cases']} | {r['hypotheses_held']} "
                     f"| {r['violations']} | {slack} | {r['counterexample']} |")
    return "\n".join(lines) + "\n"
