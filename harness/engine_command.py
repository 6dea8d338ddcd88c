"""``veridec check --engine sglang:ALGORITHM``: the command-line face of veridec.testing.check_engine (spec/engines.md).
Exit 0 when the algorithm takes the rule's decisions at every step of every case (stated differences counted apart),
1 with the first divergence of the shrunk case and its reproducer, 2 on a bad argument (one line)."""

from __future__ import annotations

import json

from veridec.files import write_text_atomic
from veridec.testing.candidates import CandidateError
from veridec.testing.engine_check import check_engine

from .arguments import UsageError, check_output_dir, check_output_file
from .verdict_files import print_and_write_verdict

ENGINES = ("sglang",)


def run_engine_check(args) -> int:
    engine, _, algorithm = args.engine.partition(":")
    if engine not in ENGINES or not algorithm:
        raise UsageError(f"--engine must be ENGINE:ALGORITHM with ENGINE one of {', '.join(ENGINES)}, got "
                         f"{args.engine!r}")
    _refuse_decoder_flags(args)
    check_output_file(args.json, "--json")
    check_output_dir(args.out, "--out", ("check.md", "check.json", "reproducer.json"))
    try:
        result = check_engine(algorithm, args.against, model=args.model,
                              max_examples=200 if args.trials is None else args.trials, seed=args.seed,
                              max_rows=args.max_batch, sglang_root=args.sglang_root, fdfo=args.fdfo)
    except (CandidateError, ValueError) as err:  # ContractError is a ValueError
        raise UsageError(str(err)) from err
    print_and_write_verdict(args, result)
    if args.out and result.reproducer is not None:
        write_text_atomic(args.out / "reproducer.json", json.dumps(result.reproducer))
    return 0 if result.passed else 1


def _refuse_decoder_flags(args) -> None:
    """The decoder check's own flags are usage errors with --engine, never silently ignored."""
    given = [flag for flag, value in (("a candidate FILE.py:FUNCTION", args.candidate), ("--case", args.case),
                                      ("--baseline", args.baseline), ("--html", args.html),
                                      ("--candidate-model", args.candidate_model), ("--samples", args.samples),
                                      ("--alpha", args.alpha), ("--delta", args.delta),
                                      ("--case-timeout", args.case_timeout), ("--convention", args.convention),
                                      ("--agreement-top-k", args.agreement_top_k),
                                      ("--flip-rejoin", args.flip_rejoin))
             if value is not None]
    given += [flag for flag, on in (("--hf-model", args.hf_model), ("--no-padding", args.no_padding),
                                    ("--no-knobs", args.no_knobs), ("--trust-remote-code", args.trust_remote_code),
                                    ("--flip-budget", args.flip_budget),
                                    ("--tier " + args.tier, args.tier != "E"), ("--cache " + args.cache,
                                                                               args.cache != "none"),
                                    ("--ties " + args.ties, args.ties != "lowest"),
                                    ("--prompt-form " + args.prompt_form, args.prompt_form != "auto")) if on]
    if given:
        raise UsageError(f"{', '.join(given)} do not apply with --engine (an engine check is tier E by logit replay; "
                         "give the algorithm as --engine sglang:ALGORITHM or sglang:FILE.py:CLASS)")
