"""``veridec check FILE.py:FUNCTION --against PRESET``: the command-line face of veridec.testing.check_decoder.
Exit 0 when the candidate is exact (tier E), within the baseline (tier A) or of the same output law (tier S), 1
with the failing case and its reproducer, 2 on a bad argument (one line)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from veridec.adapters import CONVENTIONS
from veridec.files import write_text_atomic
from veridec.rules.common import TIES
from veridec.testing import AGAINST, CACHES, TIERS, CandidateError, check_decoder, load_candidate
from veridec.testing.guard import MAX_CASE_TIMEOUT, WATCHERS, exits_refused
from veridec.testing.official import OFFICIAL_DEFECT_MODES
from veridec.testing.validation import checked_baseline

from veridec.testing.candidates import PROMPT_FORMS
from veridec.testing.families.sglang import RULES as ENGINE_RULES

from .child import child_status, saved_streams
from .engine_command import run_engine_check
from .verdict_files import print_and_write_verdict
from .arguments import UsageError, check_output_dir, check_output_file, integer, model_help, number, probability, seed

# --against -> its --model default (else default)
DEFAULT_MODELS = {"dream": "tiny-dream", "sdar": "tiny-sdar", "fastdllm-v2": "tiny-fastdllm-v2",
                  "diffusiongemma": "diffusiongemma"}


def add_parser(commands) -> None:
    chk = commands.add_parser("check", help="hold a decoder written elsewhere against veridec's (tier E, A or S)")
    for add in (_candidate_arguments, _tier_arguments, _comparison_arguments, _model_arguments, _output_arguments):
        add(chk)
    chk.set_defaults(run=run_check_command)


def _candidate_arguments(chk) -> None:
    """What is checked, against what, on which model and cases."""
    chk.add_argument("candidate", nargs="?", default=None,
                     help="FILE.py:FUNCTION, called as FUNCTION(model, prompt, **settings) (none with --engine)")
    chk.add_argument("--against", default=None, metavar="DECODER",
                     help=f"the veridec decoder to compare with ({', '.join(AGAINST)}); with --engine, the rule "
                          f"({', '.join(ENGINE_RULES)})")
    chk.add_argument("--engine", default=None, metavar="sglang:ALGORITHM",
                     help="check an engine's dLLM algorithm by logit replay (spec/engines.md): sglang:LowConfidence, "
                          "sglang:JointThreshold, sglang:JointThresholdInDel, sglang:Gemma4Renoise (on a "
                          "DiffusionGemma model, default diffusiongemma), or sglang:FILE.py:CLASS (a class written to "
                          "SGLang's DllmAlgorithm contract)")
    chk.add_argument("--fdfo", action="store_true",
                     help="with --engine: SGLang's first-done-first-out mode (one step per round, states carried)")
    chk.add_argument("--sglang-root", default=None, metavar="DIR",
                     help="with --engine sglang:BUILT-IN: the folder holding sglang/ (an unzipped wheel; default: "
                          "the installed sglang)")
    chk.add_argument("--cache", choices=CACHES, default="none", help="its cache policy (fastdllm: prefix, dual)")
    chk.add_argument("--convention", choices=CONVENTIONS, default=None,
                     help="how the candidate calls the model (default: that of the official counterpart)")
    defaults = ", ".join(f"{model} for {against}" for against, model in DEFAULT_MODELS.items())
    chk.add_argument("--model", default=None,
                     help=model_help("check", f"default, {defaults}; the oracles serve tier S against exact laws"))
    chk.add_argument("--trials", type=integer(1, 100_000), default=None,
                     help="cases to draw (default: the tier's, " + ", ".join(
                         f"{t.letter} {t.default_cases}" for t in TIERS.values()) + ")")
    chk.add_argument("--seed", type=seed, default=0)
    chk.add_argument("--max-batch", type=integer(1, 64), default=3, help="the largest batch the candidate takes")
    chk.add_argument("--no-padding", action="store_true", help="the candidate ignores attention masks")
    chk.add_argument("--prompt-form", choices=PROMPT_FORMS, default="auto",
                     help="how the candidate takes the prompt: a tensor, or a dict {'input_ids': ...} as "
                          "JetAstra/SDAR's published block_diffusion_generate reads it (auto: a dict where the prompt "
                          "parameter is annotated as dict, Mapping or BatchEncoding)")


def _tier_arguments(chk) -> None:
    """The tier, and tier S's power."""
    chk.add_argument("--tier", choices=tuple(TIERS), default="E",
                     help="; ".join(f"{t.letter} {t.meaning}" for t in TIERS.values()))
    chk.add_argument("--alpha", type=probability, default=None, help="tier S: the check's false-alarm rate (0.01)")
    chk.add_argument("--delta", type=probability, default=None,
                     help="tier S: the total variation each test detects with probability 0.95 (0.05)")
    chk.add_argument("--samples", type=integer(2, 10_000_000), default=None,
                     help="tier S: samples per side per case (default: derived from --alpha and --delta)")


def _comparison_arguments(chk) -> None:
    """How the two sides are held to each other: ties, tier A's baseline, official defects, knobs, time."""
    chk.add_argument("--ties", choices=TIES, default="lowest",
                     help="exact ties: lowest index (spec SQ0.4) or torch's order (the official code's)")
    chk.add_argument("--baseline", type=Path, default=None,
                     help="tier A: the stored metrics to hold the run against (written when missing)")
    chk.add_argument("--official-defects", "--upstream-defects", dest="official_defects", choices=OFFICIAL_DEFECT_MODES,
                     default="match",
                     help="where the official code fails or deviates (spec EC6): match (a candidate that does the "
                          "same passes, counted apart), fail (ask for better than the official code), skip (leave such "
                          "cases out)")
    chk.add_argument("--no-knobs", action="store_true",
                     help="tiers E and A: skip the search for settings that change nothing on the candidate's side")
    chk.add_argument("--case-timeout", type=number(0.01, MAX_CASE_TIMEOUT), default=None, metavar="SECONDS",
                     help="the time one candidate call may take before it fails its case (default: 20x the "
                          "target's own time on the case + 10 s)")


def _model_arguments(chk) -> None:
    """The candidate's own model (spec EC9), tier A's token agreement (spec EC10) and flip budget (EC13)."""
    chk.add_argument("--candidate-model", default=None, metavar="FILE.py:FACTORY",
                     help="run the candidate on your own model object, returned by FACTORY (called with --model "
                          "when it takes an argument); veridec's decoder runs on --model (spec EC9)")
    chk.add_argument("--hf-model", action="store_true",
                     help="run the candidate on --model's folder loaded with transformers' auto classes (spec EC9)")
    chk.add_argument("--trust-remote-code", action="store_true",
                     help="with --hf-model: run modelling code shipped in the folder (never by default)")
    chk.add_argument("--agreement-top-k", type=integer(1, 1_000_000), default=None, metavar="K",
                     help="tier A: vLLM's token-agreement rule, each side's token in the other's top-K at the first "
                          "divergent position (spec EC10)")
    chk.add_argument("--agreement-max-gap", type=number(1e-12), default=None, metavar="NATS",
                     help="tier A, with --agreement-top-k: the largest log-probability gap allowed there")
    chk.add_argument("--flip-budget", action="store_true",
                     help="tier A with --candidate-model or --hf-model: a decision may differ only where the "
                          "reference's margin is within the port's measured numeric error (spec EC13)")
    chk.add_argument("--flip-rejoin", type=integer(0, 1_000_000), default=None, metavar="K",
                     help="with --flip-budget: the steps a flip's wake may last before the trajectories rejoin "
                          "(default: before the decode ends)")


def _output_arguments(chk) -> None:
    """One case replayed, and where the verdict goes."""
    chk.add_argument("--case", default=None, help="run this one case (JSON, as a report prints it)")
    chk.add_argument("--json", type=Path, default=None, help="write the result as JSON")
    chk.add_argument("--out", type=Path, default=None, help="write check.md and check.json here")
    chk.add_argument("--html", type=Path, default=None, metavar="FILE",
                     help="write the report and its picture (the commit timeline of a failure) as one HTML file")
    chk.add_argument("--quiet", action="store_true", help="no progress bar")


def run_check_command(args) -> int:
    if args.engine is not None:
        return run_engine_check(args)
    _check_decoder_arguments(args)
    check_output_file(args.json, "--json")
    check_output_dir(args.out, "--out", ("check.md", "check.json"))
    case = _parse_case(args.case)
    tier = TIERS[args.tier]
    _check_tier_flags(args, tier)
    baseline = _read_baseline(args.baseline) if tier.uses_baseline else None
    model = args.model or DEFAULT_MODELS.get(args.against, "default")
    watcher = child_status().watch  # the supervisor hears when the candidate's code runs
    WATCHERS.append(watcher)
    hook, threading.excepthook = threading.excepthook, _thread_failed
    try:
        with exits_refused():  # from before the candidate's import to the verdict written (spec EC8)
            with saved_streams():
                try:
                    result = _checked(args, model, baseline, case)
                except (CandidateError, ValueError) as err:
                    raise UsageError(str(err)) from err
            return _write_verdict(args, tier, baseline, result)
    finally:
        WATCHERS.remove(watcher)
        threading.excepthook = hook


def _check_decoder_arguments(args) -> None:
    """A decoder check names its candidate and a veridec decoder (--sglang-root belongs to --engine)."""
    if args.candidate is None:
        raise UsageError("the candidate is required: FILE.py:FUNCTION (or --engine sglang:ALGORITHM)")
    if args.against is None:
        raise UsageError(f"--against is required: one of {', '.join(AGAINST)}")
    if args.against not in AGAINST:
        raise UsageError(f"--against must be one of {', '.join(AGAINST)}, got {args.against!r}")
    if args.sglang_root is not None or args.fdfo:
        raise UsageError(f"{'--sglang-root' if args.sglang_root is not None else '--fdfo'} applies with --engine only")


def _thread_failed(failure) -> None:
    """An exception in a thread the candidate started (one that calls the model past the call limit): one line,
    not a traceback; the verdict comes from the candidate's own call."""
    if failure.exc_type is not SystemExit:
        name = getattr(failure.thread, "name", "?")
        print(f"veridec: note: thread {name!r} (started by the candidate) raised {failure.exc_type.__name__}: "
              f"{failure.exc_value}", file=sys.stderr)


def _write_verdict(args, tier, baseline: dict | None, result) -> int:
    """The report on stdout and in the files asked for (a baseline written when there was none); the exit code."""
    print_and_write_verdict(args, result)
    if tier.uses_baseline and args.baseline and baseline is None:
        write_text_atomic(args.baseline, json.dumps(result.metrics, indent=2))
        print(f"baseline written to {args.baseline}")
    if args.html:
        try:
            result.save_html(args.html)
        except ValueError as err:  # the verdict is printed above; the page asked for could not be written
            print(f"veridec: --{err}", file=sys.stderr)
            return 2
    return 0 if result.passed else 1


def _checked(args, model: str, baseline: dict | None, case: dict | None):
    """The candidate loaded and checked (``check_decoder``) as the arguments say."""
    candidate = load_candidate(args.candidate)
    return check_decoder(candidate, args.against, cache=args.cache, convention=args.convention, model=model,
                         tier=args.tier, max_examples=args.trials,
                         seed=args.seed, max_batch=args.max_batch, padding=False if args.no_padding else None,
                         baseline=baseline, progress=not args.quiet, case=case, ties=args.ties,
                         alpha=0.01 if args.alpha is None else args.alpha,
                         delta=0.05 if args.delta is None else args.delta, samples=args.samples,
                         official_defects=args.official_defects, knobs=not args.no_knobs,
                         case_timeout=args.case_timeout, candidate_model=_candidate_model(args),
                         trust_remote_code=args.trust_remote_code, agreement=_agreement(args),
                         prompt_form=args.prompt_form, flip_budget=args.flip_budget, flip_rejoin=args.flip_rejoin)


def _candidate_model(args) -> str | None:
    """--candidate-model FILE.py:FACTORY, or "hf" for --hf-model (not both; --trust-remote-code only with it)."""
    if args.hf_model and args.candidate_model is not None:
        raise UsageError("--hf-model and --candidate-model both name the candidate's model: give one")
    if args.trust_remote_code and not args.hf_model:
        raise UsageError("--trust-remote-code applies with --hf-model only")
    return "hf" if args.hf_model else args.candidate_model


def _agreement(args) -> dict | None:
    if args.agreement_max_gap is not None and args.agreement_top_k is None:
        raise UsageError("--agreement-max-gap needs --agreement-top-k (the rule's other half)")
    if args.agreement_top_k is None:
        return None
    gap = float("inf") if args.agreement_max_gap is None else args.agreement_max_gap
    return {"top_k": args.agreement_top_k, "max_gap": gap}


def _parse_case(text: str | None) -> dict | None:
    """--case's JSON object (checked further by ``checked_case``); null or any other value is refused here, so
    it never falls back to drawn cases."""
    if text is None:
        return None
    try:
        case = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"--case must be JSON as a report prints it: {err}") from err
    except RecursionError as err:
        raise UsageError("--case must be JSON as a report prints it: it is nested too deeply to read") from err
    if not isinstance(case, dict):
        raise UsageError(f"--case must be a dict (a JSON object) with keys prompt, attention_mask, seed, settings "
                         f"(as a report prints it), got {json.dumps(case)[:200]}")
    return case


def _check_tier_flags(args, tier) -> None:
    """Flags of another tier are usage errors, never silently ignored."""
    if args.baseline is not None and not tier.uses_baseline:
        raise UsageError(f"--baseline holds tier A's measures; it does not apply to --tier {tier.letter}")
    given = [flag for flag, value in (("--samples", args.samples), ("--alpha", args.alpha), ("--delta", args.delta))
             if value is not None]
    if given and not tier.sampled:
        raise UsageError(f"{', '.join(given)} apply to --tier S only, not --tier {tier.letter}")
    if args.no_knobs and tier.sampled:
        raise UsageError("--no-knobs applies to --tier E and A (tier S runs no knob search); drop it")
    if args.agreement_top_k is not None and not tier.uses_baseline:
        raise UsageError(f"--agreement-top-k applies to --tier A only, not --tier {tier.letter}")
    _check_flip_flags(args, tier)


def _check_flip_flags(args, tier) -> None:
    """--flip-budget: tier A on the candidate's own model; --flip-rejoin: with --flip-budget (spec EC13)."""
    if args.flip_rejoin is not None and not args.flip_budget:
        raise UsageError("--flip-rejoin applies with --flip-budget only")
    if args.flip_budget and not tier.uses_baseline:
        raise UsageError(f"--flip-budget applies to --tier A only, not --tier {tier.letter}")
    if args.flip_budget and args.candidate_model is None and not args.hf_model:
        raise UsageError("--flip-budget judges a port on its own model: give --candidate-model or --hf-model")


def _read_baseline(path: Path | None) -> dict | None:
    """The stored tier A measures, or None when the file is to be written (its folder checked writable now)."""
    if path is None:
        return None
    if not path.exists():
        check_output_file(path, "--baseline")
        return None
    if not path.is_file():  # a FIFO or a device: reading it could wait forever
        raise UsageError(f"--baseline {path}: not a regular file (give the JSON file tier A wrote)")
    try:
        return checked_baseline(json.loads(path.read_text(encoding="utf-8")), f"--baseline {path}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise UsageError(f"--baseline {path}: not a readable JSON file ({err})") from err
    except ValueError as err:
        raise UsageError(str(err)) from err
