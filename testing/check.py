"""``check_decoder``: hold a decoder written elsewhere against veridec's, on drawn cases, and shrink a failure.

One case: the candidate runs on the model behind its calling convention (veridec.adapters) and a recording
proxy (veridec.recording); the target runs on the model itself; torch's global RNG is seeded the same before
each. What a case compares and what a run measures depend on the tier (``tiers.TIERS``: E exact, A measured
against a baseline, S output laws); Hypothesis draws the cases and, at tier E, shrinks a failure to the
smallest one.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, reject
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import HypothesisException

from veridec.adapters import adapt
from veridec.checks import check_choice
from veridec.rules.common import TIES

from .agreement import Agreement
from .candidates import fit_candidate
from .exact import HIGHER_IS_WORSE, LOWER_IS_WORSE, CaseOutcome
from .exact_law import check_law_target, is_oracle, oracle_cases
from .explain import explanation
from .guard import MAX_CASE_TIMEOUT
from .knobs import knob_findings
from .models import load_check_model
from .own_model import own_model, preflight
from .report import markdown, reproducer_command, reproducer_snippet, result_dict
from .running import CheckSetup
from .stochastic import check_probability
from .strategies import STRUCTURE, cases
from .targets import target
from .tiers import Tier, tier_named
from .official import OFFICIAL_DEFECT_MODES
from .validation import checked_baseline, checked_case


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
    official_defects: dict = field(default_factory=dict)  # clause -> cases reproducing that official defect
    official_mode: str = "match"  # where the official code fails: match | fail | skip (spec EC6)
    knobs: dict = field(default_factory=dict)  # setting -> effective | no effect | moves differently | not exercised
    knob_failures: list = field(default_factory=list)  # failed knobs: verdict, sentence, case, values, cases tried
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
    case_timeout: float | None = None  # seconds per candidate call when given (else derived per case)
    candidate_model: str | None = None  # the user's own model the candidate ran on (spec EC9): its factory or type
    model_difference: float | None = None  # its preflight logit difference from veridec's model
    numeric_error: float = 0.0  # the error that excuses ties: the one asked for, widened to model_difference
    agreement: str | None = None  # tier A: vLLM's token-agreement rule when asked for (spec EC10), in words

    def to_dict(self) -> dict:
        return result_dict(self)

    def markdown(self) -> str:
        return markdown(self)

    def figure(self):
        """The picture of this result (a matplotlib Figure): the commit timeline of a tier E failure, the drift per
        call of tier A on the candidate's own model, the tests and outputs of a tier S failure."""
        from .figures import figure  # matplotlib, imported when a picture is asked for

        return figure(self)

    def save_html(self, path):
        """The report and its picture as one self-contained HTML file at ``path``; returns the path."""
        from .figures import save_html

        return save_html(self, path)


def check_decoder(candidate: Callable, against: str | Callable = "fastdllm", *, model="default", cache: str = "none",
                  convention: str | None = None, settings=None, tier: str = "E", max_examples: int | None = None,
                  seed: int = 0, max_batch: int = 3, padding: bool | None = None, numeric_error: float = 0.0,
                  baseline: dict | None = None, progress: bool = False, case: dict | None = None,
                  ties: str = "lowest", alpha: float = 0.01, delta: float = 0.05, samples: int | None = None,
                  official_defects: str = "match", knobs: bool = True,
                  case_timeout: float | None = None, candidate_model=None, trust_remote_code: bool = False,
                  agreement: Agreement | dict | None = None, upstream_defects: str | None = None,
                  prompt_form: str = "auto", flip_budget: bool = False, flip_rejoin: int | None = None) -> CheckResult:
    """Hold ``candidate`` against ``against`` (a veridec decoder: llada, fastdllm, dream, with ``cache``; or a
    callable in ``convention``) on ``max_examples`` drawn cases (default: the tier's, 200 at E and A, 5 at S).

    ``model``: a name (default, hmm, tiny-llada, tiny-dream, tiny-sdar, oracle-joint, oracle-hmm), a folder, or a
    model.
    ``settings``: a dict (or a strategy of dicts) held fixed. ``max_batch`` / ``padding``: what the candidate
    supports (padding: whether it takes an ``attention_mask`` unless told). Tier "E" fails on the first divergence
    and shrinks it; "A" runs every case and measures (``case_metrics``), failing only where worse than
    ``baseline``; "S" compares output laws at temperature > 0 (false alarms at most ``alpha``, a TV of ``delta``
    detected with probability 0.95 per test, ``samples`` per side derived unless given; on an oracle model,
    against the exact law of the target's decode, ST7). ``official_defects`` (spec EC6): where the official loop
    the target is exact to fails or deviates, a candidate that does the same "match"es (counted apart), "fail"s
    (better than the official code asked for), or the case is "skip"ped. ``knobs`` (E and A, drawn cases, spec EC7): a
    setting that moves the target but not the candidate fails the check. ``case_timeout`` (spec EC8): the seconds
    one candidate call may take (default 20x the target's own time on the case + 10 s); past it, or on
    ``os._exit``, the candidate fails its case (a timed-out case is reported as drawn, not shrunk).
    ``candidate_model`` (spec EC9): the candidate runs on this model object instead (a ``torch.nn.Module``, or
    "FILE.py:FACTORY" naming a function that returns one, called with ``model`` when that is
    a name or folder and it takes an argument), recorded at its top-level forward; the target runs on ``model``;
    a preflight refuses a model whose weights or logits differ and makes the logit difference the numeric error;
    "hf" loads ``model``'s folder with transformers' auto classes (its own modelling code only with
    ``trust_remote_code=True``). ``agreement`` (tier A, spec EC10): vLLM's token-agreement rule, an ``Agreement``
    or ``{"top_k": k, "max_gap": nats}``; every case must agree at its first divergent position.
    ``prompt_form``: how the candidate takes the prompt: "tensor", "dict" (``{"input_ids": prompt}``, as
    JetAstra/SDAR's published ``block_diffusion_generate``), "auto" (a dict where its prompt parameter is
    annotated as one, else a tensor).
    ``flip_budget`` (tier A with ``candidate_model``, spec EC13): a port on its own lower-precision model may take
    another decision only where the reference's margin is within its measured numeric error, and its trajectory
    must rejoin the reference's (within ``flip_rejoin`` steps; None: before the decode ends); the flips per dtype
    are in ``metrics["flips"]``.
    ``upstream_defects``: the former name of ``official_defects`` (deprecated).
    Returns a CheckResult; raises CandidateError / ValueError for bad arguments."""
    if upstream_defects is not None:
        warnings.warn("check_decoder's upstream_defects is now official_defects", DeprecationWarning, stacklevel=2)
        official_defects = upstream_defects
    return _check(candidate, against, _Options(**{name: value for name, value in locals().items()
                                                  if name not in ("candidate", "against", "upstream_defects")}))


@dataclass(frozen=True)
class _Options:
    """``check_decoder``'s keyword arguments, as given."""

    model: object
    cache: str
    convention: str | None
    settings: object
    tier: str
    max_examples: int | None
    seed: int
    max_batch: int
    padding: bool | None
    numeric_error: float
    baseline: dict | None
    progress: bool
    case: dict | None
    ties: str
    alpha: float
    delta: float
    samples: int | None
    official_defects: str
    knobs: bool
    case_timeout: float | None
    candidate_model: object
    trust_remote_code: bool
    agreement: object
    prompt_form: str
    flip_budget: bool
    flip_rejoin: int | None


def _check(candidate: Callable, against, o: _Options) -> CheckResult:
    """``check_decoder``: its arguments checked, the setup built, the cases run and judged."""
    mode = tier_named(o.tier)
    max_examples = mode.default_cases if o.max_examples is None else o.max_examples
    _check_arguments(max_examples, o.max_batch, o.numeric_error, o.ties, o.alpha, o.delta, o.samples,
                     o.official_defects)
    _check_timeout(o.case_timeout)
    goal = target(against, o.cache, o.convention)
    if mode.letter not in goal.family.tiers:
        raise ValueError(f"tier {mode.letter!r}: the {goal.name} target offers tier {', '.join(goal.family.tiers)} "
                         "only")
    convention = o.convention or goal.convention
    model_name, model_source = (o.model, o.model) if isinstance(o.model, str) else (type(o.model).__name__, None)
    model = load_check_model(o.model) if isinstance(o.model, str) else o.model
    case = None if o.case is None else checked_case(o.case, goal.settings, STRUCTURE,
                                                    getattr(model, "vocab_size", None), goal.length_name, o.max_batch)
    baseline = None if o.baseline is None or not mode.uses_baseline else checked_baseline(o.baseline)
    adapt(model, convention)  # a model the convention cannot serve is a bad argument, said now
    fit = fit_candidate(candidate, goal, o.prompt_form)
    rule = _agreement_rule(o.agreement, mode)
    _check_flip_budget(o.flip_budget, o.flip_rejoin, mode, o.candidate_model)
    own, own_label = own_model(o.candidate_model, model_source, o.trust_remote_code)
    difference = None if own is None else preflight(own, model, convention)
    numeric_error = o.numeric_error if difference is None else max(o.numeric_error, difference)
    exact_law = mode.sampled and is_oracle(model)
    names = {n for n in goal.settings if fit.takes(n)}  # the settings both sides take
    strategy = _strategy(exact_law, mode, model, goal, fit, names, o.cache, o.max_batch, o.padding, o.settings)
    result = CheckResult(_label(candidate), goal.name, convention, model_name, o.tier, o.seed, o.ties,
                         source=getattr(candidate, "__veridec_source__", None), module=getattr(candidate, "__module__",
                         None), alpha=o.alpha, delta=o.delta, samples=o.samples, official_mode=o.official_defects,
                         case_timeout=o.case_timeout, candidate_model=own_label, model_difference=difference,
                         numeric_error=numeric_error,
                         agreement=None if rule is None else rule.describe())
    level = o.alpha / (1 if case is not None else max_examples)  # tier S: Bonferroni over the cases run
    setup = CheckSetup(candidate, fit, goal, model, convention, o.ties, numeric_error, mode.measures_logits,
                       level, o.samples, o.delta, o.progress, o.official_defects, o.case_timeout, own, rule,
                       o.flip_budget, o.flip_rejoin)
    runner = mode.oracle_runner if exact_law else goal.family.runners.get(mode.letter, mode.runner)
    _run(lambda one: runner(setup, one), strategy, result, mode, max_examples, o.progress, case)
    _judge(result, mode, baseline, setup, strategy, names, o.knobs and case is None, o.seed)
    if result.failure is not None and not mode.sampled:
        result.failure.explanation = explanation(setup, result.failure)
    if result.failure is not None:
        result.reproducer, result.command = reproducer_snippet(result, goal, fit, model_name, against, o.cache), \
            reproducer_command(result, against, model_name, o.cache)
    return result


def _judge(result: CheckResult, mode: Tier, baseline: dict | None, setup: CheckSetup, strategy, names: set,
           knobs: bool, seed: int) -> None:
    """The verdicts beyond the cases': tier A's baseline, vLLM's agreement rule, the knob search (E and A)."""
    if mode.uses_baseline:
        _judge_against_baseline(result, baseline)
    if setup.agreement is not None and result.metrics.get("agreement_failures"):
        result.passed = False
    flips = result.metrics.get("flips", {}).get("by_dtype", {})
    if any(entry["failing"] for entry in flips.values()):
        result.passed = False
    if knobs and not mode.sampled:
        # a changed case that diverges is a finding of its own only where the drawn cases found none
        _judge_knobs(result, knob_findings(setup, strategy, names, seed, exact=mode.shrinks and result.passed))


def _strategy(exact_law: bool, mode: Tier, model, goal, fit, names: set, cache: str, max_batch: int,
              padding: bool | None, settings):
    """The cases a check draws: small one-row cases on an oracle (ST7), else cases of the settings the candidate
    names (padding drawn where both sides take an ``attention_mask`` unless told: a callable target may not)."""
    if exact_law:
        check_law_target(goal, cache)
        return oracle_cases(model, names)
    both = fit.takes("attention_mask") and (goal.fit is None or goal.fit.takes("attention_mask"))
    padding = both if padding is None else padding
    return cases(model, goal, names, fit.defaults, max_batch, padding, settings, sampled=mode.sampled)


def _judge_knobs(result: CheckResult, findings: list) -> None:
    """The knobs' verdicts into the result; a knob without effect, or one that moves the candidate otherwise, fails
    it (its case kept for the report, with the cases and values the search tried)."""
    result.knobs = {finding.name: finding.verdict for finding in findings}
    failed = [finding for finding in findings if finding.failed]
    if failed:
        result.passed = False
        result.knob_failures = [{"name": f.name, "verdict": f.verdict, "sentence": f.sentence(), "case": f.case,
                                 "values": list(f.values), "cases_drawn": f.drawn, "cases_moving_target": f.moving}
                                for f in failed]


def _check_arguments(max_examples, max_batch, numeric_error, ties, alpha, delta, samples, official) -> None:
    """check_decoder's numbers and choices, each refused with its name and what it accepts."""
    check_choice("official_defects", official, OFFICIAL_DEFECT_MODES)
    check_probability("alpha", alpha)
    check_probability("delta", delta)
    if samples is not None and (not isinstance(samples, int) or isinstance(samples, bool) or samples < 2):
        raise ValueError(f"samples must be None or an integer >= 2, got {samples!r}")
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(map(repr, TIES))}, got {ties!r}")
    for name, value, low in (("max_examples", max_examples, 1), ("max_batch", max_batch, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not (isinstance(numeric_error, (int, float)) and math.isfinite(numeric_error) and numeric_error >= 0):
        raise ValueError(f"numeric_error must be a finite number >= 0, got {numeric_error!r}")


def _agreement_rule(agreement, mode: Tier) -> Agreement | None:
    """``agreement`` as an Agreement (tier A only); a dict is read with its two keys."""
    if agreement is None:
        return None
    if not mode.uses_baseline:
        raise ValueError(f"agreement (vLLM's token-agreement rule) applies to tier A only, not tier {mode.letter}")
    if isinstance(agreement, dict):
        unknown = sorted(set(agreement) - {"top_k", "max_gap"})
        if unknown:
            raise ValueError(f"agreement: unknown key(s) {unknown}; it takes top_k and max_gap")
        return Agreement(**agreement)
    if not isinstance(agreement, Agreement):
        raise ValueError(f"agreement must be None, an Agreement or a dict, got {type(agreement).__name__}")
    return agreement


def _check_flip_budget(flip_budget, flip_rejoin, mode: Tier, candidate_model) -> None:
    """The decision-flip budget (spec EC13): tier A, a candidate on its own model, a rejoin limit >= 0 or None."""
    if not isinstance(flip_budget, bool):
        raise ValueError(f"flip_budget must be True or False, got {flip_budget!r}")
    if flip_rejoin is not None and (not isinstance(flip_rejoin, int) or isinstance(flip_rejoin, bool)
                                    or flip_rejoin < 0):
        raise ValueError(f"flip_rejoin must be None or an integer >= 0 (steps), got {flip_rejoin!r}")
    if flip_rejoin is not None and not flip_budget:
        raise ValueError("flip_rejoin applies with flip_budget=True only")
    if flip_budget and (not mode.uses_baseline or candidate_model is None):
        raise ValueError(f"flip_budget applies to tier A with a candidate_model (a port on its own model), not tier "
                         f"{mode.letter}{'' if candidate_model is not None else ' without candidate_model'}")


def _check_timeout(case_timeout) -> None:
    if case_timeout is not None and (isinstance(case_timeout, bool) or not isinstance(case_timeout, (int, float))
                                     or not 0 < case_timeout <= MAX_CASE_TIMEOUT):
        raise ValueError(f"case_timeout must be None or a finite number of seconds > 0, at most {MAX_CASE_TIMEOUT:g} "
                         f"(one day), got {case_timeout!r}")


def _run(run_one, strategy, result: CheckResult, mode: Tier, max_examples: int, progress: bool,
         case: dict | None) -> None:
    """Drawn cases (``_search``), or the one ``case`` given (``_replay``), without gradients."""
    with torch.no_grad():
        if case is None:
            _search(run_one, strategy, result, mode, max_examples, progress)
        else:
            _replay(run_one, case, result, mode)


def _label(candidate) -> str:
    return getattr(candidate, "__veridec_source__", None) or getattr(candidate, "__qualname__", repr(candidate))


def _search(run_one, strategy, result: CheckResult, mode: Tier, max_examples: int, progress: bool) -> None:
    """Run drawn cases until one fails (tiers E and S; E then shrinks it) or all pass (tier A runs every case);
    the tier's metrics of the cases run become ``result.metrics``."""
    shrink = mode.shrinks
    from tqdm.auto import tqdm

    bar = tqdm(total=max_examples, desc=f"check {result.candidate}", disable=not progress, unit="case")
    failures, counted, refusals = [], [], []

    @hypothesis_settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                         verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), print_blob=False,
                         report_multiple_bugs=False, phases=(Phase.generate, Phase.shrink) if shrink else
                         (Phase.generate,))
    @hypothesis_seed(result.seed)
    @given(strategy)
    def trial(case):
        if failures and (not shrink or _timed_out(failures[-1])):  # it has been run (shrinking a timeout would
            raise AssertionError("; ".join(failures[-1].problems))  # wait out the limit at every try)
        outcome = run_one(case)
        if outcome.verdict == "skipped":
            result.skipped += 1
            refusals.append(outcome.problems[0])
            reject()
        if not failures:
            result.trials += 1
            bar.update(1)
            result.numeric_ties += outcome.verdict == "tie"
            count_official(result, outcome)
            counted.append(outcome)
        if outcome.failed and not mode.runs_every_case:
            failures.append(outcome)
            raise AssertionError("; ".join(outcome.problems))

    try:
        trial()
    except AssertionError:
        pass
    except HypothesisException as err:  # unsatisfiable draws, or a failure that does not replay
        if not failures:
            raise ValueError(_unchecked(result, refusals, err)) from err
    finally:
        bar.close()
    if failures:
        result.passed, result.trials_to_detection = False, result.trials
        result.failure = failures[-1]  # Hypothesis replays the shrunk case last
        result.first_failing_case = failures[0].case
    result.metrics = mode.metrics(counted)


def _unchecked(result: CheckResult, refusals: list[str], err: Exception) -> str:
    """Why no case could be checked: the target's first refusal where it refused every case run (a model whose
    logits are NaN), else what Hypothesis said."""
    if refusals and result.trials == 0:
        return (f"no case could be checked: the target refused every case drawn ({result.skipped}); its first "
                f"refusal: {refusals[0]}")
    return f"no case could be checked ({result.skipped} refused by the target): {err}"


def _timed_out(outcome) -> bool:
    candidate = getattr(outcome, "candidate", None)
    return bool(getattr(candidate, "timed_out", False))


def _replay(run_one, case: dict, result: CheckResult, mode: Tier) -> None:
    outcome = run_one(case)
    if outcome.verdict == "skipped":
        raise ValueError(f"case: {outcome.problems[0]}")
    result.trials, result.numeric_ties = 1, int(outcome.verdict == "tie")
    count_official(result, outcome)
    result.metrics = mode.metrics([outcome])
    if outcome.failed:
        result.passed, result.trials_to_detection, result.failure = False, 1, outcome
        result.first_failing_case = outcome.case


def count_official(result: CheckResult, outcome) -> None:
    """A case that reproduced an official defect is counted apart, by the clause that documents it."""
    if outcome.verdict == "official":
        clause = outcome.defect.clause
        result.official_defects[clause] = result.official_defects.get(clause, 0) + 1


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
