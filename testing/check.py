"""``check_decoder``: hold a decoder written elsewhere against veridec's, on drawn cases, and shrink a failure.

One case: the candidate runs on the model behind its calling convention (veridec.adapters) and a recording
proxy (veridec.recording); the target runs on the model itself; torch's global RNG is seeded the same before
each. Tier E (exact) asks for the same tokens, the same commit order (step by step, from the recorded calls),
the same counters (model calls, full forwards, query positions; spec N8) and, where the candidate reports one,
an ``nfe`` equal to its model calls. A divergence is excused only as a numeric tie: its decision margin is at
most ``numeric_error`` (default 0: the candidate's forwards are the target's own, so exact ties are decided
by the lowest-index rule, spec SQ0.4). Hypothesis draws the cases and shrinks a failure to the smallest one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, reject
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import HypothesisException

from veridec.adapters import adapt
from veridec.canvas import initial_canvas
from veridec.compare import Divergence, compare_traces, token_match_rate

from .candidates import fit_candidate
from .exact_law import check_law_target, is_oracle, oracle_cases, run_exact_law_case
from .models import check_model
from .report import markdown, reproducer_command, reproducer_snippet, result_dict
from .running import CALL_SLACK, Side, case_tensors, full_canvas, resolve_case, run_candidate, run_target
from .stochastic import check_probability, law_metrics, run_law_case
from .strategies import cases
from .targets import Target, target


@dataclass
class CaseOutcome:
    case: dict
    verdict: str  # "exact" | "tie" | "diverged" | "skipped"
    problems: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    diagnosis: dict = field(default_factory=dict)
    target: Side = field(default_factory=Side)
    candidate: Side = field(default_factory=Side)
    token_match: float | None = None
    commit_order_match: float | None = None  # share of rows with the same commit order (when both traced)

    @property
    def failed(self) -> bool:
        return self.verdict == "diverged"


def run_case(candidate: Callable, fit, goal: Target, model, case: dict, convention: str,
             numeric_error: float = 0.0, ties: str = "lowest", measure_logits: bool = False) -> CaseOutcome:
    """Run both sides on ``case`` and compare them (see the module docstring); ``measure_logits``: also the
    candidate's logit error (tier A)."""
    prompt, mask = case_tensors(case, model)
    try:
        case = resolve_case(case, model, prompt, mask)
    except ValueError as err:  # a prompt no decoder reads (spec SQ0.6)
        return CaseOutcome(case, "skipped", [f"the target refused the case: ValueError: {err}"])
    ours = run_target(goal, model, prompt, mask, case, convention, ties)
    if ours.error is not None:
        return CaseOutcome(case, "skipped", [f"the target refused the case: {ours.error}"], target=ours)
    limit = 2 * ours.counters.model_calls + CALL_SLACK
    theirs = run_candidate(candidate, fit, goal, model, prompt, mask, case, convention, limit, measure_logits)
    outcome = CaseOutcome(case, "exact", target=ours, candidate=theirs)
    _compare(outcome, model, prompt, mask, numeric_error)
    return outcome


def _compare(outcome: CaseOutcome, model, prompt, mask, numeric_error: float) -> None:
    ours, theirs, problems = outcome.target, outcome.candidate, outcome.problems
    prompt_length = prompt.shape[1]
    if theirs.error is not None:
        problems.append(f"the candidate failed: {theirs.error}")
        outcome.verdict = "diverged"
        return
    canvas = full_canvas(theirs.canvas, ours.canvas)
    if canvas is None:
        problems.append(f"the candidate returned shape {tuple(theirs.canvas.shape)}, the target "
                        f"{tuple(ours.canvas.shape)}")
        outcome.verdict = "diverged"
        return
    theirs.canvas = canvas
    outcome.token_match = token_match_rate(ours.canvas.cpu(), canvas.cpu(), prompt_length)
    tie = False
    if theirs.trace is not None and ours.trace is not None:
        comparison = compare_traces(ours.trace, theirs.trace, numeric_error=numeric_error)
        divergence = comparison.first_divergence
        outcome.commit_order_match = comparison.commit_order_match_rate
        if divergence is not None:
            tie = divergence.tie and numeric_error > 0
            outcome.divergence = divergence
            outcome.diagnosis = diagnose(model, ours, divergence, prompt, mask)
            if not tie:
                problems.append(f"commit order differs from step {divergence.step} (row {divergence.row}, "
                                f"position {divergence.position})")
    if not tie and not torch.equal(canvas.cpu(), ours.canvas.cpu()):
        row, position = (canvas.cpu() != ours.canvas.cpu()).nonzero()[0].tolist()
        problems.append(f"tokens differ (first at row {row}, position {position}: target "
                        f"{int(ours.canvas[row, position])}, candidate {int(canvas[row, position])}; token match "
                        f"{outcome.token_match:.3f})")
    _compare_costs(ours, theirs, problems)
    if ours.hook_calls != theirs.hook_calls:
        problems.append(f"Dream's hooks were called differently: target {_hook_steps(ours)}, candidate "
                        f"{_hook_steps(theirs)}")
    outcome.verdict = "diverged" if problems else ("tie" if tie else "exact")


def _hook_steps(side: Side) -> str:
    """The hook calls as ``tokens@None logits@0 tokens@0 ...`` (at most 12)."""
    calls = [f"{name.split('_')[1]}@{step}" for name, step, _ in side.hook_calls]
    return " ".join(calls[:12]) + (f" ... ({len(calls)} calls)" if len(calls) > 12 else "")


def _compare_costs(ours: Side, theirs: Side, problems: list[str]) -> None:
    fields = ("model_calls", "full_forwards", "query_positions")
    a = {name: getattr(ours.counters, name) for name in fields}
    b = {name: getattr(theirs.counters, name) for name in fields}
    if a != b:
        problems.append(f"counters differ (spec N8): target {a}, candidate {b}")
    if theirs.nfe is not None and theirs.nfe != b["model_calls"]:
        problems.append(f"the candidate reports nfe={theirs.nfe} but made {b['model_calls']} model calls")


def diagnose(model, ours: Side, divergence: Divergence, prompt, mask) -> dict:
    """What decided the first divergent step, as a full forward of the canvas before it sees it: each side's
    token at the position with its probability, and the logit margin (top1 - top2) there."""
    step = divergence.step
    length = ours.canvas.shape[1]
    _, full_mask = initial_canvas(model, prompt, mask, length - prompt.shape[1], model.special.mask_id)
    canvas = _canvas_before(ours.canvas, ours.trace, step, model.special.mask_id).to(model.device)  # [B, L]
    with torch.no_grad():
        logits = model(canvas, attention_mask=full_mask).logits[divergence.row, divergence.position].double().cpu()
    probabilities = logits.softmax(-1)
    top = logits.topk(2).values
    token = lambda t: None if t is None else {"token": t, "probability": probabilities[t].item()}
    return {"step": step, "row": divergence.row, "position": divergence.position, "kind": divergence.kind,
            "target": token(divergence.token_a), "candidate": token(divergence.token_b),
            "logit_margin": (top[0] - top[1]).item(),
            "decision_margin": None if math.isnan(divergence.margin) else divergence.margin}


def _canvas_before(final: torch.Tensor, trace, step: int, mask_id: int) -> torch.Tensor:
    """The final canvas [B, L] with every commit of ``step`` and later masked again."""
    canvas = final.detach().cpu().clone()
    for record in trace.steps[step:]:
        for row, positions in enumerate(record.positions):
            canvas[row, positions] = mask_id
    return canvas


@dataclass
class CheckResult:
    """The outcome of ``check_decoder``; ``passed`` is the verdict, ``failure`` the shrunk failing case."""

    candidate: str
    against: str
    convention: str
    model: str
    tier: str
    seed: int
    ties: str = "lowest"
    trials: int = 0
    numeric_ties: int = 0  # divergences excused as within numeric_error
    skipped: int = 0
    trials_to_detection: int | None = None
    failure: CaseOutcome | None = None
    first_failing_case: dict | None = None  # the case that first failed, before shrinking
    metrics: dict = field(default_factory=dict)  # tier A
    passed: bool = True
    reproducer: str = ""
    command: str = ""
    source: str | None = None  # FILE.py:FUNCTION when loaded with load_candidate
    module: str | None = None  # the candidate's module otherwise
    alpha: float = 0.01  # tier S: the check's false-alarm rate
    delta: float = 0.05  # tier S: the TV each test detects with probability 0.95
    samples: int | None = None  # tier S: samples per side when given (else derived from alpha and delta)

    def to_dict(self) -> dict:
        return result_dict(self)

    def markdown(self) -> str:
        return markdown(self)


def check_decoder(candidate: Callable, against: str | Callable = "fastdllm", *, model="default", cache: str = "none",
                  convention: str | None = None, settings=None, tier: str = "E", max_examples: int | None = None,
                  seed: int = 0, max_batch: int = 3, padding: bool | None = None, numeric_error: float = 0.0,
                  baseline: dict | None = None, progress: bool = False, case: dict | None = None,
                  ties: str = "lowest", alpha: float = 0.01, delta: float = 0.05,
                  samples: int | None = None) -> CheckResult:
    """Hold ``candidate`` against ``against`` (a veridec decoder: llada, fastdllm, dream, with ``cache``; or a
    callable in ``convention``) on ``max_examples`` drawn cases (default 50; tier S: 5).

    ``model``: a name (default, hmm, tiny-llada, tiny-dream), a model folder, or a model object. ``settings``: a
    dict (or a strategy of dicts) of settings held fixed. ``max_batch`` / ``padding``: what the candidate
    supports (padding defaults to whether it takes an ``attention_mask``). Tier "E" fails on the first
    divergence and shrinks it; tier "A" runs every case and measures (``case_metrics``) the exact rate, token and
    commit-order match, the logit error of the candidate's cached calls and both sides' counters, failing only
    where worse than ``baseline`` (a previous ``metrics``). Tier "S" compares output laws at temperature > 0 from
    independent samples (spec/stochastic.md): false-alarm rate at most ``alpha`` over the whole check, a TV of
    ``delta`` detected with probability 0.95 per test (``samples`` per side derived from both unless given); on
    an oracle model (``oracle-joint``, ``oracle-hmm`` or an Oracle) the candidate's samples are held against the
    exact law of the target's decode instead (ST7).
    Returns a CheckResult; raises CandidateError / ValueError for bad arguments."""
    if tier not in ("E", "A", "S"):
        raise ValueError(f"tier must be 'E', 'A' or 'S', got {tier!r}")
    max_examples = (5 if tier == "S" else 50) if max_examples is None else max_examples
    check_probability("alpha", alpha)
    check_probability("delta", delta)
    if samples is not None and (not isinstance(samples, int) or isinstance(samples, bool) or samples < 2):
        raise ValueError(f"samples must be None or an integer >= 2, got {samples!r}")
    if ties not in ("lowest", "torch"):
        raise ValueError(f"ties must be 'lowest' or 'torch', got {ties!r}")
    for name, value, low in (("max_examples", max_examples, 1), ("max_batch", max_batch, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not (isinstance(numeric_error, (int, float)) and math.isfinite(numeric_error) and numeric_error >= 0):
        raise ValueError(f"numeric_error must be a finite number >= 0, got {numeric_error!r}")
    goal = target(against, cache, convention)
    convention = convention or goal.convention
    model_name = model if isinstance(model, str) else type(model).__name__
    model = check_model(model) if isinstance(model, str) else model
    adapt(model, convention)  # a model the convention cannot serve is a bad argument, said now
    fit = fit_candidate(candidate, goal)
    padding = fit.takes("attention_mask") if padding is None else padding
    names = {n for n in goal.settings if fit.takes(n)}
    exact_law = tier == "S" and is_oracle(model)
    if exact_law:
        check_law_target(goal, cache)
        strategy = oracle_cases(model, names)
    else:
        strategy = cases(model, goal, names, fit.defaults, max_batch, padding, settings, sampled=tier == "S")
    result = CheckResult(_label(candidate), goal.name, convention, model_name, tier, seed, ties,
                         source=getattr(candidate, "__veridec_source__", None),
                         module=getattr(candidate, "__module__", None), alpha=alpha, delta=delta,
                         samples=samples)
    level = alpha / (1 if case is not None else max_examples)  # tier S: Bonferroni over the cases run
    if tier != "S":
        run_one = lambda case: run_case(candidate, fit, goal, model, case, convention, numeric_error, ties,
                                        tier == "A")
    elif exact_law:
        run_one = lambda case: run_exact_law_case(candidate, fit, goal, model, case, convention, level, samples,
                                                  delta)
    else:
        run_one = lambda case: run_law_case(candidate, fit, goal, model, case, convention, level, samples, delta,
                                            ties, progress)
    with torch.no_grad():
        if case is None:
            _search(run_one, strategy, result, max_examples, progress, shrink=tier == "E",
                    metrics=law_metrics if tier == "S" else case_metrics)
        else:
            _replay(run_one, _checked_case(case), result)
    if tier == "A":
        _judge_against_baseline(result, baseline)
    if result.failure is not None:
        result.reproducer = reproducer_snippet(result, goal, fit, model_name, against, cache)
        result.command = reproducer_command(result, against, model_name, cache)
    return result


def _label(candidate) -> str:
    return getattr(candidate, "__veridec_source__", None) or getattr(candidate, "__qualname__", repr(candidate))


def _search(run_one, strategy, result: CheckResult, max_examples: int, progress: bool, shrink: bool = True,
            metrics=None) -> None:
    """Run drawn cases until one fails (tiers E and S; E then shrinks it) or all pass; ``metrics`` of the cases
    run become ``result.metrics``."""
    from tqdm.auto import tqdm

    bar = tqdm(total=max_examples, desc=f"check {result.candidate}", disable=not progress, unit="case")
    failures, counted = [], []

    @hypothesis_settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                         verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), print_blob=False,
                         report_multiple_bugs=False, phases=(Phase.generate, Phase.shrink) if shrink else
                         (Phase.generate,))
    @hypothesis_seed(result.seed)
    @given(strategy)
    def trial(case):
        if failures and not shrink:  # Hypothesis replays the failing case: it has been run
            raise AssertionError("; ".join(failures[-1].problems))
        outcome = run_one(case)
        if outcome.verdict == "skipped":
            result.skipped += 1
            reject()
        if not failures:
            result.trials += 1
            bar.update(1)
            result.numeric_ties += outcome.verdict == "tie"
            counted.append(outcome)
        if outcome.failed and result.tier != "A":
            failures.append(outcome)
            raise AssertionError("; ".join(outcome.problems))

    try:
        trial()
    except AssertionError:
        pass
    except HypothesisException as err:  # unsatisfiable draws, or a failure that does not replay
        if not failures:
            raise ValueError(f"no case could be checked ({result.skipped} refused by the target): {err}") from err
    finally:
        bar.close()
    if failures:
        result.passed, result.trials_to_detection = False, result.trials
        result.failure = failures[-1]  # Hypothesis replays the shrunk case last
        result.first_failing_case = failures[0].case
    result.metrics = (metrics or case_metrics)(counted)


COST_FIELDS = ("model_calls", "full_forwards", "query_positions")
LOWER_IS_WORSE = ("exact_rate", "mean_token_match", "commit_order_match")
HIGHER_IS_WORSE = ("max_logit_error", *(f"candidate_{name}" for name in COST_FIELDS))


def case_metrics(outcomes: list[CaseOutcome]) -> dict:
    """Tier A's measures over the cases run (spec EC3): the share exact (or a numeric tie), the mean token match,
    the mean commit-order match (share of rows), the largest logit error of the candidate's cached calls against
    full forwards (None: it made none, or it was not measured), and each side's mean counters (N8)."""
    mean = lambda values: sum(values) / len(values) if values else None
    orders = [o.commit_order_match for o in outcomes if o.commit_order_match is not None]
    errors = [o.candidate.logit_error for o in outcomes if o.candidate.logit_error is not None]
    metrics = {"cases": len(outcomes), "exact_rate": mean([o.verdict in ("exact", "tie") for o in outcomes]),
               "mean_token_match": mean([o.token_match or 0.0 for o in outcomes]),
               "commit_order_match": mean(orders), "max_logit_error": max(errors, default=None)}
    for side in ("target", "candidate"):
        counters = [getattr(o, side).counters for o in outcomes if getattr(o, side).counters is not None]
        metrics.update({f"{side}_{name}": mean([getattr(c, name) for c in counters]) for name in COST_FIELDS})
    return metrics


def _replay(run_one, case: dict, result: CheckResult) -> None:
    outcome = run_one(case)
    if outcome.verdict == "skipped":
        raise ValueError(f"case: {outcome.problems[0]}")
    result.trials, result.numeric_ties = 1, int(outcome.verdict == "tie")
    result.metrics = (law_metrics if result.tier == "S" else case_metrics)([outcome])
    if outcome.failed:
        result.passed, result.trials_to_detection, result.failure = False, 1, outcome
        result.first_failing_case = outcome.case


def _checked_case(case: dict) -> dict:
    """A case as the strategies write it: prompt [B][P], attention_mask [B][P] or None, seed, settings."""
    if not isinstance(case, dict) or set(case) != {"prompt", "attention_mask", "seed", "settings"}:
        raise ValueError("case must be a dict with keys prompt, attention_mask, seed, settings (as a report "
                         f"prints it), got {case!r}"[:300])
    if not isinstance(case["settings"], dict) or not isinstance(case["seed"], int):
        raise ValueError("case: settings must be a dict and seed an integer")
    return case


def _judge_against_baseline(result: CheckResult, baseline: dict | None) -> None:
    """Tier A: worse than ``baseline`` in any measure fails: a lower exact rate, token match or commit-order
    match, a larger logit error, more model calls, full forwards or query positions per case."""
    result.passed = True
    if baseline is None:
        return
    both = lambda name: result.metrics.get(name) is not None and baseline.get(name) is not None
    worse = [name for name in LOWER_IS_WORSE if both(name) and result.metrics[name] < baseline[name]]
    worse += [name for name in HIGHER_IS_WORSE if both(name) and result.metrics[name] > baseline[name]]
    if worse:
        result.passed = False
        result.metrics["regressed"] = {name: (baseline[name], result.metrics[name]) for name in worse}
