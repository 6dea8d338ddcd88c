"""The ``veridec`` command: generate, verify, exactness, bounds, experiment, check (argparse and dispatch; the work
lives in the harness modules; maintainers' tools, which need a checkout, are under tools/). Exit codes: 0
success, 1 a failed check or an internal failure (its message on stderr), 2 a bad argument (one line on stderr,
before any computation).

The installed ``veridec`` command enters through ``supervise.main``, which runs ``veridec check`` in a supervised
child and every other command here; ``python -m veridec.harness.cli`` (torchrun's form, and the supervised
child's) runs any command in this process."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings
from dataclasses import asdict
from functools import partial
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads sleep instead of spinning

import torch  # noqa: E402

from veridec.files import write_text_atomic  # noqa: E402
from veridec.rules.common import REMASKING  # noqa: E402
from veridec.rules.dream import ALGS as DREAM_ALGS  # noqa: E402
from veridec.rules.presets import PRESETS  # noqa: E402

from . import check_command, exactness  # noqa: E402
from .child import end_check  # noqa: E402
from .distributed import Group, world_size  # noqa: E402
from . import generate as generate_command  # noqa: E402
from .arguments import (UsageError, check_device, check_output_dir, check_output_file, integer,  # noqa: E402
                        load_model_arg, model_help, number, seed)
from .compiled_rows import BACKENDS  # noqa: E402
from .family_rows import FAMILY_MODELS, load_table_model, table_prompts  # noqa: E402
from .checks.registry import VerifyResult, VerifyContext, all_checks, format_table, results_to_json  # noqa: E402
from .records import weights_sha256  # noqa: E402
from .units import Unit, announce_resume, run_recorded  # noqa: E402
from .workloads import BLOCK, table_models  # noqa: E402

SAMPLERS = ("llada", "dream", "sdar", "diffusiongemma")
EXPERIMENTS = ("models", "parallel", "speculative", "fastguide")
MAX_PROMPTS = 4096  # exactness --prompts: a batch beyond this is a typo, not a table
EXACTNESS_SIZE = (8, 64)  # exactness's (--prompts, --gen-length) when neither --quick nor the flag is given
DREAM_STEPS_PER_TOKEN = 4  # generate --sampler dream: at most this many --steps per generated token
LONG_RUN_S = 3600  # bounds: a run estimated past this needs --yes
BOUNDS_PROBE_FROM = 1_000_000  # bounds --cases: from here the time is measured and announced first
TABLE_FILES = ("exactness.md", "exactness.json")  # what verify and exactness write into --out


def main(argv: list[str] | None = None) -> int:
    """Run a command in this process: 0 success, 1 a failed check or an internal failure (its message, no
    traceback; set VERIDEC_DEBUG=1 for one), 2 a bad argument. ``veridec check`` as the installed command runs
    here in the supervised child (``supervise`` decides and starts it): run as the process (``argv`` None: the
    command line), the check ends with its code (``end_check``), so that an ``atexit`` handler or a thread the
    candidate left behind can neither change the code nor keep the process alive."""
    formatted, warnings.formatwarning = warnings.formatwarning, _one_line_warning
    try:
        command, code = _dispatch(argv)
    finally:
        warnings.formatwarning = formatted
    if argv is None and command == "check":
        end_check(code)
    return code


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"veridec: warning: {message}\n"


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
    prompt = gen.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text; the mask token's text marks infill positions")
    prompt.add_argument("--prompt-ids", default=None,
                        help="the prompt as comma-separated token ids (--sampler diffusiongemma: its models have no "
                             "tokenizer)")
    _model_args(gen, "default; a block-diffusion model decodes with --sampler sdar, a DiffusionGemma model with "
                     "DiffusionGemma's sampler")
    gen.add_argument("--sampler", choices=SAMPLERS, default="llada",
                     help="llada | dream | sdar (a block-diffusion model) | diffusiongemma (a uniform-state model: "
                          "--model diffusiongemma, the shipped one, or a DiffusionGemma folder; with --prompt-ids)")
    gen.add_argument("--gen-length", type=integer(1), default=64)
    gen.add_argument("--block-length", type=integer(1), default=None,
                     help="LLaDA block length (default: gen length); sdar: the block size (default 4)")
    gen.add_argument("--steps", type=integer(1), default=None,
                     help="denoising steps (default: gen length; at most gen length with llada, "
                          f"{DREAM_STEPS_PER_TOKEN} x gen length with dream); sdar: steps per block (default and "
                          "most: the block length); diffusiongemma: most steps per canvas (default: the "
                          "checkpoint's max_denoising_steps)")
    gen.add_argument("--temperature", type=number(), default=None, help="sampling temperature (default 0: greedy)")
    gen.add_argument("--remasking", choices=REMASKING, default=None, help="LLaDA: low_confidence (default) | random")
    gen.add_argument("--cfg-scale", type=number(), default=None, help="LLaDA: classifier-free guidance (default 0)")
    gen.add_argument("--alg", choices=DREAM_ALGS, default=None, help="Dream's position rule (default entropy)")
    gen.add_argument("--tokens-per-step", type=integer(1), default=None, help="fixed top-k per step (Conf baseline)")
    gen.add_argument("--seed", type=seed, default=0)
    gen.add_argument("--trace", type=Path, default=None, help="write the decode trace as JSON")
    gen.set_defaults(run=run_generate)


def _verify_parser(commands) -> None:
    ver = commands.add_parser("verify", help="run the verification checks on a model; non-zero exit on failure")
    _model_args(ver, "default")
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
    _model_args(exa, "default, whose table brings hmm's rows along")
    exa.add_argument("--out", type=Path, default=Path("results"))
    exa.add_argument("--quick", action="store_true",
                     help=f"{exactness.QUICK_SIZE[0]} prompts, gen length {exactness.QUICK_SIZE[1]} (then give neither "
                          "--prompts nor --gen-length)")
    exa.add_argument("--decoders", default=None, help="comma-separated preset names, wino, editing, the SDAR "
                     "strategies, diffusiongemma or fastdllm-v2 (default: all)")
    exa.add_argument("--prompts", type=integer(1, MAX_PROMPTS), default=None,
                     help=f"prompts in the batch (default {EXACTNESS_SIZE[0]})")
    exa.add_argument("--gen-length", type=integer(1), default=None,
                     help=f"tokens to generate (default {EXACTNESS_SIZE[1]}; prompt + gen length within the model's "
                          "context)")
    exa.add_argument("--block-length", type=integer(1), default=BLOCK)
    exa.add_argument("--compile", choices=tuple(BACKENDS), default=None,
                     help="also decode each optimized variant with its forwards under torch.compile with this backend "
                          "and hold it to eager (aot_eager: tier E, equal; inductor: tier A, the difference shown)")
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
    bnd.add_argument("--temperature", type=number(0.0), default=None,
                     help="with --decoders only: the sampling temperature (default 1.0)")
    bnd.add_argument("--yes", action="store_true",
                     help=f"run even when the measured estimate exceeds {LONG_RUN_S // 3600} hour")
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


def _model_args(sub: argparse.ArgumentParser, default: str) -> None:
    sub.add_argument("--model", default="default", help=model_help("shipped", default))
    sub.add_argument("--device", default="cpu")
    sub.add_argument("--quiet", action="store_true", help="no progress bar")


# ----------------------------------------------------------------------------------------- generate
def run_generate(args) -> int:
    if args.sampler != "diffusiongemma":
        check_steps(args)
    return generate_command.run(args)


def check_steps(args) -> None:
    """``--steps`` within what a decode can use: LLaDA commits at least one token per step until the block is
    full, so a step past one per generated token commits nothing (each still a forward: a typo of 10^9 steps
    would exhaust memory before the first); Dream's time grid may take more steps than tokens (the official
    golden cases take up to 2.5 per token), up to DREAM_STEPS_PER_TOKEN per token. With ``--tokens-per-step``
    the steps are not used, so giving both is an error."""
    if args.steps is None:
        return
    if args.tokens_per_step is not None:
        raise UsageError("--steps does not apply with --tokens-per-step (it commits K tokens per step until no mask "
                         "is left); drop one of them")
    if args.sampler == "sdar":
        top = generate_command.SDAR_BLOCK if args.block_length is None else args.block_length
        why, given = "a block's schedule commits nothing past one step per position", f"--block-length {top}"
    else:
        top = (1 if args.sampler == "llada" else DREAM_STEPS_PER_TOKEN) * args.gen_length
        why = "a LLaDA step past one per generated token commits nothing" if args.sampler == "llada" else \
            f"at most {DREAM_STEPS_PER_TOKEN} Dream steps per generated token"
        given = f"--gen-length {args.gen_length}"
    if args.steps > top:
        raise UsageError(f"--steps: must lie in [1, {top}] for --sampler {args.sampler} with {given} ({why}), "
                         f"got {args.steps}")


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
    with Group.join(device) as group:
        return verify_in_group(args, checks, group, group.device(device))


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
    others = [*exactness.EVENT_DECODERS, *exactness.SDAR_DECODERS, *exactness.FAMILY_DECODERS]
    decoders = [*sorted(PRESETS), *others] if args.decoders is None else args.decoders.split(",")
    unknown = [name for name in decoders if name not in PRESETS and name not in others]
    if unknown:
        raise UsageError(f"--decoders: unknown preset(s) {unknown}; the presets are {sorted(PRESETS)} and "
                         f"{others}")
    prompts, gen = exactness_size(args)
    device = check_device(args.device)
    check_output_dir(args.out, "--out", TABLE_FILES)
    dtype = getattr(torch, args.dtype)
    check_context(args, prompts, gen, dtype)  # a bad --model or a canvas past its context: before the table
    with Group.join(device) as group:
        table = dict(model_name=args.model, decoders=decoders, prompts=prompts, gen_length=gen,
                     block_length=args.block_length, seed=args.seed, device=group.device(device), quiet=args.quiet,
                     dtype=dtype, compile=args.compile)
        rows = shared_table(args, group, table)
        if group.rank > 0:
            return 0
        exactness.write_table(rows, args.out, exactness.table_meta(args.model, prompts, gen, args.block_length,
                                                                   args.seed))
        print(exactness.to_markdown(rows))
        return 0 if exactness.all_exact(rows) else 1


def exactness_size(args) -> tuple[int, int]:
    """(prompts, gen length): --quick's, or the flags' (EXACTNESS_SIZE where not given); an explicit size
    beside --quick, which would replace it, is an error, as is a gen length that blocks do not tile."""
    given = [flag for flag, value in (("--prompts", args.prompts), ("--gen-length", args.gen_length))
             if value is not None]
    if args.quick and given:
        raise UsageError(f"--quick sets the size ({exactness.QUICK_SIZE[0]} prompts, gen length "
                         f"{exactness.QUICK_SIZE[1]}); drop {' and '.join(given)} or --quick")
    if args.quick:
        prompts, gen = exactness.QUICK_SIZE
    else:
        prompts = EXACTNESS_SIZE[0] if args.prompts is None else args.prompts
        gen = EXACTNESS_SIZE[1] if args.gen_length is None else args.gen_length
    if gen % args.block_length:
        flag = "--quick's gen length" if args.quick else "--gen-length"
        raise UsageError(f"{flag} {gen} must be a multiple of --block-length {args.block_length}")
    return prompts, gen


def check_context(args, prompts: int, gen: int, dtype) -> None:
    """Each model of the table (loaded on the meta device: no weights read) takes its longest prompt plus
    ``gen`` tokens within its context, else a usage error naming the largest --gen-length that fits."""
    for name in table_models(args.model):
        family = name in FAMILY_MODELS  # tiny: built for real (their own prompts, no tokenizer needed)
        model = load_table_model(name, "cpu", dtype) if family else load_model_arg(name, "meta", dtype)
        if name != "hmm" and not family and model.tokenizer is None:
            raise UsageError(f"--model {name}: the folder has no tokenizer, so the table's text prompts cannot be "
                             "encoded")
        longest = table_prompts(name, model, prompts, args.seed)[0].shape[1]
        if longest + gen <= model.max_length:
            continue
        flag = "--quick's gen length" if args.quick else "--gen-length"
        room = (model.max_length - longest) // args.block_length * args.block_length
        fits = f"--gen-length must lie in [{args.block_length}, {room}] (multiples of --block-length " \
               f"{args.block_length})" if room >= args.block_length else \
               f"no block of {args.block_length} fits: lower --block-length or --prompts"
        raise UsageError(f"{flag} {gen}: the longest of the {prompts} prompts ({longest} tokens) + {gen} exceeds "
                         f"the context of model {name!r} ({model.max_length} tokens); {fits}")


def run_verify_check(item, context: VerifyContext) -> dict:
    return asdict(item.run(context))


def shared_table(args, group: Group, table: dict, models: dict | None = None) -> list:
    """The exactness table, resumable when ``args.out`` is given; under torchrun each rank computes its share,
    then rank 0 merges the records and returns the whole table (the other ranks: their own rows). ``models``:
    name -> (model, weights sha256) already loaded and hashed."""
    records = exactness.records_for(args.out, table["model_name"], table["prompts"], table["gen_length"],
                                    table["block_length"], table["seed"], args.fresh, group, table["dtype"],
                                    table.get("compile")) if args.out else None
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

    if args.temperature is not None and not args.decoders:
        raise UsageError("--temperature applies to --decoders only (the theorem table samples no decoder); drop it "
                         "or add --decoders")
    check_output_file(args.json, "--json")
    if args.decoders:
        return run_decoder_laws(args)
    cases = args.cases or 100_000
    if cases >= BOUNDS_PROBE_FROM:
        from veridec.proofs_checks.table import seconds_per_joint

        per_joint = seconds_per_joint(args.seed)
        announce_duration(f"bounds --cases {cases}", per_joint * cases,
                          f"{per_joint * 1e6:.2g} us per joint, measured on a sample of each shape", args)
    report = run_bounds(cases=cases, seed=args.seed, progress=not args.quiet)
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

    cases, temperature = args.cases or 20, 1.0 if args.temperature is None else args.temperature

    def first_case(seconds: float) -> None:
        announce_duration(f"bounds --decoders --cases {cases}", seconds * cases,
                          f"{seconds:.2g} s per oracle, measured on the first", args)

    rows = decoder_table(cases=cases, seed=args.seed, temperature=temperature, progress=not args.quiet,
                         on_first_case=first_case)
    print(table_markdown(rows, temperature), end="")
    if args.json:
        write_text_atomic(args.json, json.dumps({"temperature": temperature, "rows": rows}, indent=2))
    return 0 if all(r["mass_error"] < 1e-9 and not r["violations"] for r in rows) else 1


def announce_duration(what: str, seconds: float, basis: str, args) -> None:
    """Say on stderr how long a run will take (not with --quiet); past LONG_RUN_S without --yes, refuse it
    instead (a usage error: nothing more is computed)."""
    estimate = f"{what}: about {duration(seconds)} ({basis})"
    if seconds > LONG_RUN_S and not args.yes:
        raise UsageError(f"{estimate}, over {LONG_RUN_S // 3600} hour: pass --yes to run it, or lower --cases")
    if not args.quiet:
        print(f"veridec: {estimate}", file=sys.stderr)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


# ------------------------------------------------------------------------------------------- experiment
def run_experiment(args) -> int:
    """One experiment; under torchrun its units are shared among the processes and rank 0 writes the report."""
    check_output_dir(args.out, "--out", (f"{args.name}.md", f"{args.name}.json"))
    module = importlib.import_module(f"veridec.harness.experiments.{args.name}")
    with Group.join(torch.device("cpu")) as group:
        report = module.run(args.out, quick=args.quick, seed=args.seed, quiet=args.quiet, group=group,
                            fresh=args.fresh)
    if report is not None:
        print((args.out / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
