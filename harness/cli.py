"""The ``veridec`` command: generate, verify, exactness, bounds, experiment, check (argparse and dispatch; the work
lives in the harness modules; maintainers' tools, which need a checkout, are under tools/). Exit codes: 0
success, 1 a failed check or an internal failure (its message on stderr), 2 a bad argument (one line on stderr,
before any computation)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads sleep instead of spinning

import torch  # noqa: E402

from veridec.files import write_text_atomic  # noqa: E402
from veridec.rules.common import REMASKING  # noqa: E402
from veridec.rules.dream import ALGS as DREAM_ALGS  # noqa: E402
from veridec.rules.presets import PRESETS  # noqa: E402

from . import check_command, exactness, supervise  # noqa: E402
from .distributed import Group, world_size  # noqa: E402
from . import generate as generate_command  # noqa: E402
from .arguments import (UsageError, check_device, check_output_dir, check_output_file, integer,  # noqa: E402
                        load_model_arg, number, seed)
from .checks.registry import VerifyResult, VerifyContext, all_checks, format_table, results_to_json  # noqa: E402
from .records import weights_sha256  # noqa: E402
from .units import Unit, announce_resume, run_recorded  # noqa: E402
from .workloads import BLOCK  # noqa: E402

SAMPLERS = ("llada", "dream")
EXPERIMENTS = ("models", "parallel", "speculative", "fastguide")
MAX_PROMPTS = 4096  # exactness --prompts: a batch beyond this is a typo, not a table
REAL_EXIT = os._exit  # taken before any candidate is imported (one may replace os._exit)
TABLE_FILES = ("exactness.md", "exactness.json")  # what verify and exactness write into --out


def main(argv: list[str] | None = None) -> int:
    """Run a command: 0 success, 1 a failed check or an internal failure (its message, no traceback; set
    VERIDEC_DEBUG=1 for one), 2 a bad argument. ``veridec check`` run as the process (``argv`` None: the
    command line) runs in a supervised child process (``supervise``) that ends with its code (``end_process``),
    so that an ``atexit`` handler or a thread the candidate left behind can neither change the code nor keep the
    process alive, and a candidate that stalls or kills its process still ends in a verdict."""
    if argv is None and supervise.wanted(sys.argv[1:]):
        return supervise.run_supervised(sys.argv[1:])
    command, code = _dispatch(argv)
    if argv is None and command == "check":
        supervise.child_status().send("exit", code)
        end_process(code)
    return code


def _dispatch(argv: list[str] | None) -> tuple[str | None, int]:
    """Parse and run: (the subcommand, None where parsing failed; the exit code)."""
    command = None
    try:
        args = build_parser().parse_args(argv)
        command = args.command
        return command, args.run(args)
    except UsageError as err:
        print(f"veridec: error: {err}", file=sys.stderr)
        return command, 2
    except Exception as err:  # an internal failure: its message, exit 1
        if os.environ.get("VERIDEC_DEBUG"):
            raise
        print(f"veridec: error: {type(err).__name__}: {err}", file=sys.stderr)
        return command, 1


def end_process(code: int) -> None:
    """Flush stdout and stderr, then end the process with ``code`` at once (``os._exit``: no atexit handlers, no
    waiting for threads)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be said there
            pass
    REAL_EXIT(code)


class Parser(argparse.ArgumentParser):
    """argparse whose errors are usage errors: one line on stderr, exit code 2 (subcommands inherit it)."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="veridec", description="Verified decoders for masked diffusion LMs.")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_generate_parser, _verify_parser, _exactness_parser, _bounds_parser, _experiment_parser,
                check_command.add_parser):
        add(commands)
    return parser


def _generate_parser(commands) -> None:
    gen = commands.add_parser("generate", help="decode a prompt with a reference sampler")
    gen.add_argument("--prompt", required=True, help="prompt text; the mask token's text marks infill positions")
    _model_args(gen)
    gen.add_argument("--sampler", choices=SAMPLERS, default="llada")
    gen.add_argument("--gen-length", type=integer(1), default=64)
    gen.add_argument("--block-length", type=integer(1), default=None, help="LLaDA block length (default: gen length)")
    gen.add_argument("--steps", type=integer(1), default=None, help="denoising steps (default: gen length)")
    gen.add_argument("--temperature", type=number(), default=0.0)
    gen.add_argument("--remasking", choices=REMASKING, default=None, help="LLaDA: low_confidence (default) | random")
    gen.add_argument("--cfg-scale", type=number(), default=None, help="LLaDA: classifier-free guidance (default 0)")
    gen.add_argument("--alg", choices=DREAM_ALGS, default=None, help="Dream's position rule (default entropy)")
    gen.add_argument("--tokens-per-step", type=integer(1), default=None, help="fixed top-k per step (Conf baseline)")
    gen.add_argument("--seed", type=seed, default=0)
    gen.add_argument("--trace", type=Path, default=None, help="write the decode trace as JSON")
    gen.set_defaults(run=generate_command.run)


def _verify_parser(commands) -> None:
    ver = commands.add_parser("verify", help="run the verification checks on a model; non-zero exit on failure")
    _model_args(ver)
    ver.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    ver.add_argument("--quick", action="store_true", help="fewer cases per check")
    ver.add_argument("--seed", type=seed, default=0)
    ver.add_argument("--only", default=None, help="run checks whose name contains this text")
    ver.add_argument("--no-table", action="store_true", help="skip the exactness table")
    ver.add_argument("--out", type=Path, default=None,
                     help="write exactness.md and exactness.json here; the checks and rows are recorded there as "
                          "they finish (a rerun resumes; needed under torchrun)")
    ver.add_argument("--fresh", action="store_true", help="with --out: recompute every check and row")
    ver.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                     help="the model's dtype; rounding measured one precision up (float32: a float64 copy; "
                          "bfloat16: a float32 copy, never float64: for 8B checkpoints)")
    ver.set_defaults(run=run_verify)


def _exactness_parser(commands) -> None:
    exa = commands.add_parser("exactness", help="the full exactness table: every preset x variant")
    _model_args(exa)
    exa.add_argument("--out", type=Path, default=Path("results"))
    exa.add_argument("--quick", action="store_true", help="2 prompts, gen length 32")
    exa.add_argument("--decoders", default=None, help="comma-separated preset names, wino or editing (default: all)")
    exa.add_argument("--prompts", type=integer(1, MAX_PROMPTS), default=8)
    exa.add_argument("--gen-length", type=integer(1), default=64)
    exa.add_argument("--block-length", type=integer(1), default=BLOCK)
    exa.add_argument("--seed", type=seed, default=0)
    exa.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                     help="the model's dtype for the table; tolerances from a rerun one precision up (bfloat16: "
                          "float32, never a float64 copy)")
    exa.add_argument("--fresh", action="store_true",
                     help="recompute every row (default: resume from --out's exactness.records.jsonl)")
    exa.set_defaults(run=run_exactness)


def _bounds_parser(commands) -> None:
    bnd = commands.add_parser("bounds", help="check every theorem of spec/theorems.md on random joints")
    bnd.add_argument("--cases", type=integer(1, 10**9), default=None,
                     help="joints to generate (default 100,000); with --decoders, oracles per family (default 20)")
    bnd.add_argument("--decoders", action="store_true",
                     help="instead: the exact output laws of the sampled decoders on oracle models (TD1)")
    bnd.add_argument("--temperature", type=number(0.0), default=1.0, help="with --decoders: the sampling temperature")
    bnd.add_argument("--seed", type=seed, default=0)
    bnd.add_argument("--json", type=Path, default=None, help="write the table as JSON")
    bnd.add_argument("--quiet", action="store_true", help="no progress bar (it shows the rate and the time left)")
    bnd.set_defaults(run=run_bounds_command)


def _experiment_parser(commands) -> None:
    exp = commands.add_parser("experiment", help="run a measurement; writes markdown + JSON under --out")
    exp.add_argument("name", choices=EXPERIMENTS,
                     help="models: how the shipped models decode; parallel: steps vs quality per decoder preset; "
                          "speculative: draft trees and the lossless chain vs their base decoders; "
                          "fastguide: reward-guided decoding, FastGuide vs the guided baselines")
    exp.add_argument("--out", type=Path, default=Path("results"))
    exp.add_argument("--quick", action="store_true", help="a reduced run (a minute or two on 2 cores)")
    exp.add_argument("--seed", type=seed, default=0)
    exp.add_argument("--quiet", action="store_true", help="no progress bar")
    exp.add_argument("--fresh", action="store_true",
                     help="recompute every unit (default: resume from --out's NAME.records.jsonl)")
    exp.set_defaults(run=run_experiment)


def _model_args(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--model", default="default", help="default | hmm | path to a LLaDA/Dream model folder")
    sub.add_argument("--device", default="cpu")
    sub.add_argument("--quiet", action="store_true", help="no progress bar")


# ------------------------------------------------------------------------------------------- verify
def run_verify(args) -> int:
    device = check_device(args.device)
    if args.fresh and args.out is None:
        raise UsageError("--fresh recomputes the records of --out; give --out")
    check_output_dir(args.out, "--out", TABLE_FILES)
    check_output_file(args.json, "--json")
    checks = [c for name, c in all_checks().items() if args.only is None or args.only in name]
    if not checks:
        raise UsageError(f"--only {args.only!r} matches no check")
    if world_size() > 1 and args.out is None:
        raise UsageError("under torchrun, verify needs --out: the processes share their results through its records")
    group = Group.join(device)
    try:
        return verify_in_group(args, checks, group, group.device(device))
    finally:
        group.leave()


def verify_in_group(args, checks, group: Group, device: torch.device) -> int:
    """The checks (each a unit: recorded in --out/verify.records.jsonl, shared among torchrun's processes), then
    the exactness table; rank 0 prints and writes the results."""
    dtype = getattr(torch, args.dtype)
    higher = torch.float64 if dtype == torch.float32 else torch.float32  # one precision up (spec E3)
    context = VerifyContext(load_model_arg(args.model, device, dtype), load_model_arg(args.model, device, higher),
                            args.seed, args.quick)
    weights = weights_sha256(context.model) if args.out else None
    units = [Unit({"check": item.name, "weights": weights}, partial(run_verify_check, item, context))
             for item in checks]
    found = run_recorded(units, args.out, "verify", {"run": "verify", "model": args.model, "dtype": args.dtype,
                                                     "seed": args.seed, "quick": args.quick},
                         group, args.fresh, args.quiet)
    prompts, gen = exactness.QUICK_SIZE if args.quick else exactness.VERIFY_SIZE
    table = dict(model_name=args.model, decoders=exactness.VERIFY_DECODERS, prompts=prompts, gen_length=gen,
                 block_length=BLOCK, seed=args.seed, device=device, loaded=context.model, quiet=args.quiet,
                 dtype=dtype)
    rows = [] if args.no_table or args.only else \
        shared_table(args, group, table, models={args.model: (context.model, weights)})
    if group.rank > 0:
        return 0
    results = [VerifyResult(**result) for result in found]
    if rows:
        results.append(exactness.exactness_result(rows))
    print(format_table(results))
    if rows:
        print("\nExactness table (tier E rows must match the reference exactly):\n")
        print(exactness.to_markdown(rows))
    if args.out and rows:
        exactness.write_table(rows, args.out, exactness.table_meta(args.model, prompts, gen, BLOCK, args.seed))
    if args.json:
        write_text_atomic(args.json, json.dumps({"model": args.model, "seed": args.seed, "quick": args.quick,
                                         "checks": results_to_json(results),
                                         "exactness": [asdict(r) for r in rows]}, indent=2))
    return 0 if all(r.passed for r in results) else 1


def run_exactness(args) -> int:
    decoders = [*sorted(PRESETS), *exactness.EVENT_DECODERS] if args.decoders is None else args.decoders.split(",")
    unknown = [name for name in decoders if name not in PRESETS and name not in exactness.EVENT_DECODERS]
    if unknown:
        raise UsageError(f"--decoders: unknown preset(s) {unknown}; the presets are {sorted(PRESETS)} and "
                         f"{sorted(exactness.EVENT_DECODERS)}")
    prompts, gen = exactness.QUICK_SIZE if args.quick else (args.prompts, args.gen_length)
    if gen % args.block_length:
        raise UsageError(f"--gen-length {gen} must be a multiple of --block-length {args.block_length}")
    device = check_device(args.device)
    check_output_dir(args.out, "--out", TABLE_FILES)
    dtype = getattr(torch, args.dtype)
    load_model_arg(args.model, "meta", dtype)  # a clear error for a bad --model before the table starts
    group = Group.join(device)
    try:
        table = dict(model_name=args.model, decoders=decoders, prompts=prompts, gen_length=gen,
                     block_length=args.block_length, seed=args.seed, device=group.device(device), quiet=args.quiet,
                     dtype=dtype)
        rows = shared_table(args, group, table)
        if group.rank > 0:
            return 0
        exactness.write_table(rows, args.out, exactness.table_meta(args.model, prompts, gen, args.block_length,
                                                                   args.seed))
        print(exactness.to_markdown(rows))
        return 0 if exactness.all_exact(rows) else 1
    finally:
        group.leave()


def run_verify_check(item, context: VerifyContext) -> dict:
    return asdict(item.run(context))


def shared_table(args, group: Group, table: dict, models: dict | None = None) -> list:
    """The exactness table, resumable when ``args.out`` is given; under torchrun each rank computes its share,
    then rank 0 merges the records and returns the whole table (the other ranks: their own rows). ``models``:
    name -> (model, weights sha256) already loaded and hashed."""
    records = exactness.records_for(args.out, table["model_name"], table["prompts"], table["gen_length"],
                                    table["block_length"], table["seed"], args.fresh, group, table["dtype"]) \
        if args.out else None
    announce_resume(records, args.quiet, group)
    models = {} if models is None else models  # loaded and hashed once, reused by rank 0's merge pass
    try:
        rows = exactness.build_table(**table, records=records, group=group, models=models)
    except BaseException:
        group.all_ok(False)  # the other ranks stop waiting and fail too
        raise
    if not group.all_ok(True):
        raise RuntimeError("another rank of this torchrun failed; its error is in its own output")
    if group.world > 1 and group.rank == 0:
        records.merge()
        rows = exactness.build_table(**{**table, "quiet": True}, records=records, models=models)  # all recorded
    return rows


# ------------------------------------------------------------------------------------------- bounds
def run_bounds_command(args) -> int:
    from veridec.proofs_checks.table import run_bounds, to_markdown

    from .checks.bounds import OFF_AS_PUBLISHED

    check_output_file(args.json, "--json")
    if args.decoders:
        return run_decoder_laws(args)
    report = run_bounds(cases=args.cases or 100_000, seed=args.seed, progress=not args.quiet)
    print(to_markdown(report))
    if args.json:
        write_text_atomic(args.json, json.dumps(report, indent=2))
    broken = [r["theorem"] for r in report["rows"] if r["violations"] and r["theorem"] not in OFF_AS_PUBLISHED]
    if broken:
        print("violated: " + ", ".join(broken))
    return 1 if broken else 0


def run_decoder_laws(args) -> int:
    """``veridec bounds --decoders``: TD1's table; exit 1 if a law does not sum to 1 (an enumeration fault) or
    TD2's bound is violated."""
    from veridec.proofs_checks.laws import decoder_table, table_markdown

    rows = decoder_table(cases=args.cases or 20, seed=args.seed, temperature=args.temperature, progress=not args.quiet)
    print(table_markdown(rows, args.temperature), end="")
    if args.json:
        write_text_atomic(args.json, json.dumps({"temperature": args.temperature, "rows": rows}, indent=2))
    return 0 if all(r["mass_error"] < 1e-9 and not r["violations"] for r in rows) else 1


# ------------------------------------------------------------------------------------------- experiment
def run_experiment(args) -> int:
    """One experiment; under torchrun its units are shared among the processes and rank 0 writes the report."""
    check_output_dir(args.out, "--out", (f"{args.name}.md", f"{args.name}.json"))
    module = importlib.import_module(f"veridec.harness.experiments.{args.name}")
    group = Group.join(torch.device("cpu"))
    try:
        report = module.run(args.out, quick=args.quick, seed=args.seed, quiet=args.quiet, group=group,
                            fresh=args.fresh)
    finally:
        group.leave()
    if report is not None:
        print((args.out / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
