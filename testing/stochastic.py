"""Tier S: two decoders compared by their output laws, from independent samples (spec/stochastic.md).

For one case, each side decodes ``N`` times under its own seeds; the outputs (the generated tokens of every row,
as one tuple) are compared by chi-square tests of homogeneity (scipy.stats.chi2_contingency): the whole output,
each position's token and each adjacent pair's tokens, every test over at most ``MAX_CELLS`` cells (the most
frequent values of the pooled sample, each seen at least ``MIN_POOLED`` times, the rest pooled into one cell).
The case fails when a Bonferroni-corrected p-value is below ``alpha`` (ST2). ``samples_for_power`` gives the
``N`` that detects a total variation of ``delta`` over a test's cells with probability ``power`` (ST3).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from .running import CALL_SLACK, CheckSetup, case_tensors, drawn_canvas, resolve_case, run_candidate, run_target

MAX_CELLS = 20  # cells per test: df <= 19
MIN_POOLED = 5  # a value gets its own cell when the two samples together hold it this often


@dataclass
class LawComparison:
    """The tests of one case: each (name, statistic, df, p) and the verdict at the corrected level."""

    samples: int
    tests: list[tuple[str, float, int, float]] = field(default_factory=list)
    alpha: float = 0.01

    @property
    def smallest_p(self) -> float:
        return min((p for *_, p in self.tests), default=1.0)

    @property
    def corrected_p(self) -> float:
        """Bonferroni over the case's tests (ST2)."""
        return min(1.0, self.smallest_p * max(1, len(self.tests)))

    @property
    def differs(self) -> bool:
        return self.corrected_p < self.alpha

    def worst(self) -> tuple[str, float, int, float] | None:
        return min(self.tests, key=lambda t: t[3], default=None)


def compare_laws(a: list[tuple], b: list[tuple], alpha: float) -> LawComparison:
    """Hold two equal-sized samples of outputs (tuples of tokens) against each other: the whole output, each
    position, each adjacent pair (``alpha`` for the case as a whole; Bonferroni inside)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"the two samples must be non-empty and of one size, got {len(a)} and {len(b)}")
    result = LawComparison(len(a), alpha=alpha)
    for name, view in views(len(a[0])):
        statistic, df, p = homogeneity(Counter(map(view, a)), Counter(map(view, b)))
        result.tests.append((name, statistic, df, p))
    return result


def views(length: int) -> list[tuple[str, Callable]]:
    """What the tests look at in an output of ``length`` tokens: all of it, each position, each adjacent pair
    (2 x length views)."""
    return ([("output", lambda o: o)] + [(f"position {i}", (lambda i: lambda o: o[i])(i)) for i in range(length)]
            + [(f"pair {i},{i + 1}", (lambda i: lambda o: o[i:i + 2])(i)) for i in range(length - 1)])


def homogeneity(a: Counter, b: Counter) -> tuple[float, int, float]:
    """Chi-square test that two samples share a law, over the pooled cells (ST1); (statistic, df, p)."""
    from scipy import stats  # imported when a test runs: 1.3 s every command would pay
    pooled = a + b
    ranked = sorted(pooled, key=lambda value: (-pooled[value], repr(value)))
    own = [value for value in ranked if pooled[value] >= MIN_POOLED][: MAX_CELLS - 1]
    rest = pooled.keys() - set(own)
    table = np.array([[side[value] for value in own] + [sum(side[value] for value in rest)] for side in (a, b)])
    table = table[:, table.sum(axis=0) > 0]  # [2, cells]
    if table.shape[1] < 2:
        return 0.0, 0, 1.0  # one value on both sides: nothing can differ
    statistic, p, df, _ = stats.chi2_contingency(table, correction=False)
    return float(statistic), int(df), float(p)


def goodness_of_fit(outputs: list[tuple], law: dict[tuple, float], alpha: float) -> LawComparison:
    """Hold a sample of outputs against an exact law (ST6): the whole output, each position and each adjacent
    pair, each by Pearson's goodness of fit to the law's margin (``alpha`` for the whole; Bonferroni inside)."""
    if not outputs:
        raise ValueError("the sample must hold at least one output")
    check_law_table(law)
    length = len(next(iter(law)))
    wrong = next((o for o in outputs if len(o) != length), None)
    if wrong is not None:
        raise ValueError(f"an output has {len(wrong)} tokens, the law's outcomes {length}: {wrong}")
    result = LawComparison(len(outputs), alpha=alpha)
    for name, view in views(length):
        margin: dict = {}
        for outcome, probability in law.items():
            margin[view(outcome)] = margin.get(view(outcome), 0.0) + probability
        statistic, df, p = pearson_fit(Counter(map(view, outputs)), margin)
        result.tests.append((name, statistic, df, p))
    return result


def check_law_table(law: dict) -> None:
    """A law is a non-empty dict of equal-length tuples to probabilities >= 0 summing to 1 (within 1e-9)."""
    if not isinstance(law, dict) or not law:
        raise ValueError("law must be a non-empty dict {outcome tuple: probability}")
    lengths = {len(outcome) for outcome in law}
    if len(lengths) != 1 or any(not isinstance(outcome, tuple) for outcome in law):
        raise ValueError(f"law's outcomes must be tuples of one length, got lengths {sorted(lengths)}")
    total = sum(law.values())
    if any(not (p >= 0) for p in law.values()) or not abs(total - 1) <= 1e-9:
        raise ValueError(f"law's probabilities must be >= 0 and sum to 1 (within 1e-9), got a sum of {total!r}")


def pearson_fit(observed: Counter, law: dict) -> tuple[float, int, float]:
    """Pearson's chi-square goodness of fit of ``observed`` counts to ``law`` (ST6): (statistic, df, p). Cells:
    the values whose expected count n p reaches MIN_POOLED, most probable first (ties by their text), at most
    MAX_CELLS - 1, and one cell pooling the rest, its least probable own values moved into it until its
    expected count reaches MIN_POOLED too (the cells are the law's, not the sample's). A value the law gives
    probability 0 rejects outright (statistic inf, p = 0)."""
    from scipy import stats  # imported when a test runs: 1.3 s every command would pay
    n = sum(observed.values())
    if any(law.get(value, 0.0) <= 0 for value in observed):
        return math.inf, 0, 0.0
    ranked = sorted(law, key=lambda value: (-law[value], repr(value)))
    own = [value for value in ranked if n * law[value] >= MIN_POOLED][: MAX_CELLS - 1]
    rest = sum(law[value] for value in ranked[len(own):])
    while own and 0 < n * rest < MIN_POOLED:
        rest += law[own.pop()]
    expected = [n * law[value] for value in own] + ([n * rest] if rest > 0 else [])
    counts = [observed[value] for value in own] + ([n - sum(observed[value] for value in own)] if rest > 0 else [])
    if len(counts) < 2:
        return 0.0, 0, 1.0  # one cell: nothing can differ
    expected = np.array(expected) * n / sum(expected)  # float64 sums to n exactly enough for scipy's check
    statistic, p = stats.chisquare(counts, expected)
    return float(statistic), len(counts) - 1, float(p)


def samples_for_power(delta: float, alpha: float, power: float = 0.95, df: int = MAX_CELLS - 1,
                      exact_law: bool = False) -> int:
    """The samples per side at which a chi-square test at level ``alpha`` with ``df`` degrees of freedom detects
    two laws at total variation ``delta`` (over its cells) with probability ``power`` (ST3): the noncentrality
    of N samples per side is N * sum (p - q)^2 / (p + q) >= 2 N delta^2. ``exact_law``: the samples of one side
    held against an exact law q (ST6), N * sum (p - q)^2 / q >= 4 N delta^2."""
    check_probability("delta", delta)
    check_probability("alpha", alpha)
    check_probability("power", power)
    return max(1, math.ceil(_noncentrality_needed(alpha, df, power) / (_per_sample(exact_law) * delta**2)))


def detectable_delta(samples: int, alpha: float, power: float = 0.95, df: int = MAX_CELLS - 1,
                     exact_law: bool = False) -> float:
    """The smallest total variation ``samples_for_power`` would detect with ``samples`` per side."""
    return math.sqrt(_noncentrality_needed(alpha, df, power) / (_per_sample(exact_law) * samples))


def _per_sample(exact_law: bool) -> float:
    """The noncentrality one sample (per side) contributes at least, per delta^2 (ST3, ST6)."""
    return 4.0 if exact_law else 2.0


def _noncentrality_needed(alpha: float, df: int, power: float) -> float:
    """The smallest noncentrality at which the level-``alpha`` test with ``df`` degrees of freedom rejects with
    probability ``power`` (bisection to float64 resolution; the power increases with the noncentrality)."""
    from scipy import stats  # imported when a test runs: 1.3 s every command would pay
    critical = stats.chi2.isf(alpha, df)
    low, high = 0.0, 1.0
    while stats.ncx2.sf(critical, df, high) < power:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (low, middle) if stats.ncx2.sf(critical, df, middle) >= power else (middle, high)
    return high


def check_probability(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


@dataclass
class LawOutcome:
    """Tier S's outcome of one case (``verdict``: "same law", "differs", "failed" or "skipped")."""

    case: dict
    verdict: str
    problems: list[str] = field(default_factory=list)
    comparison: LawComparison | None = None
    samples: int = 0
    delta: float | None = None  # the TV each test detects with probability 0.95 at its level
    top: dict = field(default_factory=dict)  # each side's most frequent outputs, with counts

    @property
    def failed(self) -> bool:
        return self.verdict in ("differs", "failed")


def run_law_case(setup: CheckSetup, case: dict) -> LawOutcome:
    """Decode ``case`` ``setup.samples`` times on each side (seeds 2i on ours, 2i + 1 on theirs, offset by the
    case's seed) and compare the laws of the generated tokens at the case's level (ST2); ``samples=None``: as
    many as detect a TV of ``setup.delta`` with probability 0.95 (ST3)."""
    model, goal = setup.model, setup.goal
    prompt, mask = case_tensors(case, model)
    try:
        case = resolve_case(case, model, prompt, mask, goal)
    except ValueError as err:
        return LawOutcome(case, "skipped", [f"the target refused the case: ValueError: {err}"])
    mask_id = model.special.mask_id
    decoded = prompt.shape[0] * case["settings"][goal.length_name] + int((prompt == mask_id).sum())  # filled
    tests = 2 * decoded  # the whole output, each position, each adjacent pair
    n = setup.samples or samples_for_power(setup.delta, setup.level / tests)
    ours, theirs = [], []
    for i in tqdm(range(n), desc="samples per side", unit="pair", disable=not setup.progress, leave=False):
        drawn = {**case, "seed": case["seed"] + 2 * i}
        target = run_target(setup, prompt, mask, drawn)
        if target.error is not None:
            return LawOutcome(case, "skipped", [f"the target refused the case: {target.error}"])
        limit = 2 * target.counters.model_calls + CALL_SLACK
        side = run_candidate(setup, prompt, mask, {**drawn, "seed": drawn["seed"] + 1}, limit,
                             target_seconds=target.seconds)
        canvas, problem = drawn_canvas(side, target.canvas, prompt.shape[1])
        if problem is not None:
            return failed_draw(case, i, problem, n)
        ours.append(_decoded_tokens(target.canvas, prompt, mask_id))
        theirs.append(_decoded_tokens(canvas, prompt, mask_id))
    top = {"target": Counter(ours).most_common(5), "candidate": Counter(theirs).most_common(5)}
    return judged(case, compare_laws(ours, theirs, setup.level), detectable_delta(n, setup.level / tests), top,
                  "the output laws differ", "samples per side")


def failed_draw(case: dict, draw: int, problem: str, samples: int) -> LawOutcome:
    return LawOutcome(case, "failed", [f"the candidate failed on draw {draw}: {problem}"], samples=samples)


def judged(case: dict, comparison: LawComparison, detectable: float, top: dict, finding: str,
           counted: str) -> LawOutcome:
    """A comparison's outcome: its verdict and, when the laws differ, the test that fired and its numbers."""
    n = comparison.samples
    outcome = LawOutcome(case, "differs" if comparison.differs else "same law", comparison=comparison, samples=n,
                         delta=detectable, top=top)
    if comparison.differs:
        name, statistic, df, p = comparison.worst()
        outcome.problems.append(f"{finding}: {name}, chi-square {statistic:.4g} on {df} df, p = {p:.3g} (Bonferroni "
                                f"over {len(comparison.tests)} tests: {comparison.corrected_p:.3g} < "
                                f"{comparison.alpha:.3g}), {n} {counted}")
    return outcome


def _decoded_tokens(canvas: torch.Tensor, prompt: torch.Tensor, mask_id: int) -> tuple:
    """The tokens of every position the decode filled (prompt masks, then each row's generation) as one tuple."""
    canvas = canvas.cpu()
    prompt = prompt.cpu()
    filled = canvas[:, : prompt.shape[1]][prompt == mask_id]  # [prompt masks]
    return tuple(filled.tolist()) + tuple(canvas[:, prompt.shape[1]:].reshape(-1).tolist())


def law_metrics(outcomes: list[LawOutcome]) -> dict:
    """Tier S over the cases run: samples per side, the TV each test detects (power 0.95) and the smallest
    corrected p-value."""
    compared = [o for o in outcomes if o.comparison is not None]
    return {"cases": len(outcomes), "samples_per_side": [o.samples for o in compared],
            "detectable_tv": max((o.delta for o in compared), default=None),
            "smallest_corrected_p": min((o.comparison.corrected_p for o in compared), default=None)}


def check_law(sample: Callable[[int], list[tuple]], law: dict[tuple, float], alpha: float = 0.01,
              delta: float = 0.05, samples: int | None = None) -> LawOutcome:
    """Hold a sampler against an exact law (ST6), e.g. a decoder on an oracle model against
    ``proofs_checks.laws.decoder_law``: ``sample(n)`` draws n outputs (tuples of the law's length; the caller
    seeds it), by default as many as detect a total variation ``delta`` in any test with probability 0.95."""
    check_probability("alpha", alpha)
    check_law_table(law)
    if samples is not None and (not isinstance(samples, int) or isinstance(samples, bool) or samples < 1):
        raise ValueError(f"samples must be None (derived from alpha and delta) or an integer >= 1, got {samples!r}")
    n = law_samples(law, alpha, delta, samples)
    outputs = [tuple(output) for output in sample(n)]
    if len(outputs) != n:
        raise ValueError(f"sample({n}) returned {len(outputs)} outputs")
    return fit_outcome({"samples": n}, outputs, law, alpha, "the sample does not follow the law", ("law", "sample"))


def law_samples(law: dict, alpha: float, delta: float, samples: int | None) -> int:
    """ST6's N: ``samples`` when given, else what detects a TV of ``delta`` in each of the law's 2 x length
    tests at ``alpha`` over them, with probability 0.95."""
    return samples if samples is not None else samples_for_power(delta, alpha / _tests(law), exact_law=True)


def fit_outcome(case: dict, outputs: list[tuple], law: dict, alpha: float, finding: str,
                sides: tuple[str, str]) -> LawOutcome:
    """ST6's verdict on ``outputs`` against ``law``, the report naming the two ``sides`` (the law's five most
    probable outcomes with their expected counts, the sample's five most frequent with their counts)."""
    n = len(outputs)
    expected = [(outcome, round(n * p, 1)) for outcome, p in sorted(law.items(), key=lambda item: -item[1])[:5]]
    top = {sides[0]: expected, sides[1]: Counter(outputs).most_common(5)}
    return judged(case, goodness_of_fit(outputs, law, alpha), detectable_delta(n, alpha / _tests(law), exact_law=True),
                  top, finding, "samples")


def _tests(law: dict) -> int:
    """The views of an outcome of the law's length: the whole, each position, each adjacent pair."""
    return 2 * len(next(iter(law)))
