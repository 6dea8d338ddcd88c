"""The ``veridec`` command: generate, verify, exactness, bounds, baseline, experiment, train (argparse and
dispatch; the work lives in the harness modules). Bad arguments: one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads sleep instead of spinning

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from veridec.models.shipped import load_model  # noqa: E402
from veridec.rules.dream import ALGS as DREAM_ALGS  # noqa: E402
from veridec.rules.common import REMASKING  # noqa: E402

from veridec.rules.presets import PRESETS, preset  # noqa: E402

from . import exactness  # noqa: E402
from .checks.registry import VerifyContext, all_checks, format_table, results_to_json  # noqa: E402
from .workloads import BLOCK  # noqa: E402

SAMPLERS = ("llada", "dream")
EXPERIMENTS = ("models", "parallel", "speculative", "fastguide")


class UsageError(ValueError):
    """A bad command-line argument (exit code 2)."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError) as err:  # validation errors name the argument and its range
        print(f"veridec: error: {err}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="veridec", description="Verified decoders for masked diffusion LMs.")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_generate_parser, _verify_parser, _exactness_parser, _bounds_parser, _baseline_parser,
                _experiment_parser, _train_parser):
        add(commands)
    return parser


def _generate_parser(commands) -> None:
    gen = commands.add_parser("generate", help="decode a prompt with a reference sampler")
    gen.add_argument("--prompt", required=True, help="prompt text; the mask token's text marks infill positions")
    _model_args(gen)
    gen.add_argument("--sampler", choices=SAMPLERS, default="llada")
    gen.add_argument("--gen-length", type=int, default=64)
    gen.add_argument("--block-length", type=int, default=None, help="LLaDA block length (default: gen length)")
    gen.add_argument("--steps", type=int, default=None, help="denoising steps (default: gen length)")
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--remasking", choices=REMASKING, default="low_confidence")
    gen.add_argument("--cfg-scale", type=float, default=0.0)
    gen.add_argument("--alg", choices=DREAM_ALGS, default="entropy", help="Dream's position-selection rule")
    gen.add_argument("--tokens-per-step", type=int, default=None, help="fixed top-k per step (Conf baseline)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--trace", type=Path, default=None, help="write the decode trace as JSON")
    gen.set_defaults(run=run_generate)


def _verify_parser(commands) -> None:
    ver = commands.add_parser("verify", help="run the verification checks on a model; non-zero exit on failure")
    _model_args(ver)
    ver.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    ver.add_argument("--quick", action="store_true", help="fewer cases per check")
    ver.add_argument("--seed", type=int, default=0)
    ver.add_argument("--only", default=None, help="run checks whose name contains this text")
    ver.add_argument("--no-table", action="store_true", help="skip the exactness table")
    ver.add_argument("--out", type=Path, default=None, help="write exactness.md and exactness.json here")
    ver.set_defaults(run=run_verify)


def _exactness_parser(commands) -> None:
    exa = commands.add_parser("exactness", help="the full exactness table: every preset x variant")
    _model_args(exa)
    exa.add_argument("--out", type=Path, default=Path("results"))
    exa.add_argument("--quick", action="store_true", help="2 prompts, gen length 32")
    exa.add_argument("--decoders", default=None, help="comma-separated preset names (default: all)")
    exa.add_argument("--prompts", type=int, default=8)
    exa.add_argument("--gen-length", type=int, default=64)
    exa.add_argument("--block-length", type=int, default=BLOCK)
    exa.add_argument("--seed", type=int, default=0)
    exa.set_defaults(run=run_exactness)


def _bounds_parser(commands) -> None:
    bnd = commands.add_parser("bounds", help="check every theorem of spec/theorems.md on random joints")
    bnd.add_argument("--cases", type=int, default=100_000)
    bnd.add_argument("--seed", type=int, default=0)
    bnd.add_argument("--json", type=Path, default=None, help="write the table as JSON")
    bnd.set_defaults(run=run_bounds_command)


def _baseline_parser(commands) -> None:
    base = commands.add_parser("baseline", help="hold the benchmark counters against benchmarks/baseline.json")
    base.add_argument("--update", action="store_true", help="rewrite the baseline from this run")
    base.add_argument("--file", type=Path, default=None, help="baseline path (default benchmarks/baseline.json)")
    base.add_argument("--gen-lengths", default="64,128,256")
    base.set_defaults(run=run_baseline)


def _experiment_parser(commands) -> None:
    exp = commands.add_parser("experiment", help="run a measurement; writes markdown + JSON under --out")
    exp.add_argument("name", choices=EXPERIMENTS,
                     help="models: how the shipped models decode; parallel: steps vs quality per decoder preset; "
                          "speculative: draft trees and the lossless chain vs their base decoders; "
                          "fastguide: reward-guided decoding, FastGuide vs the guided baselines")
    exp.add_argument("--out", type=Path, default=Path("results"))
    exp.add_argument("--quick", action="store_true", help="a reduced run (a minute or two on 2 cores)")
    exp.add_argument("--seed", type=int, default=0)
    exp.set_defaults(run=run_experiment)


def _train_parser(commands) -> None:
    train = commands.add_parser("train", help="retrain a shipped model: tasks | hmm (python -m "
                                              "veridec.harness.training.dllm -h) or reward (python -m "
                                              "veridec.harness.training.reward -h)")
    train.add_argument("train_args", nargs=argparse.REMAINDER)
    train.set_defaults(run=run_train)


def _model_args(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--model", default="default", help="default | hmm | path to a LLaDA/Dream model folder")
    sub.add_argument("--device", default="cpu")
    sub.add_argument("--quiet", action="store_true", help="no progress bar")


def check_device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise UsageError(f"--device {name!r} is not a device name ({err})") from err
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise UsageError(f"--device {name}: no such CUDA device (available: {torch.cuda.device_count()})")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError("--device mps: MPS is not available")
    return device


# ------------------------------------------------------------------------------------------- generate
class ProgressModel:
    """Ticks a progress bar once per forward; everything else is the wrapped model."""

    def __init__(self, model, bar):
        self.model, self.bar = model, bar

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None):
        self.bar.update(1)
        return self.model(x, attention_mask=attention_mask)


def run_generate(args) -> int:
    device = check_device(args.device)
    model = load_model(args.model, device=device)
    if model.tokenizer is None:
        raise UsageError(f"--model {args.model}: the folder has no tokenizer, so text prompts cannot be encoded")
    ids = encode_prompt(model.tokenizer, args.prompt)
    if len(ids) + args.gen_length > model.max_length:
        raise UsageError(f"--prompt ({len(ids)} tokens) + --gen-length ({args.gen_length}) exceeds the model's "
                         f"context of {model.max_length} tokens")
    steps = args.gen_length if args.steps is None else args.steps
    decode = sampler(args, steps)  # validates every sampling argument before any forward
    torch.manual_seed(args.seed)
    start = time.time()
    with tqdm(total=None if args.tokens_per_step else steps, disable=args.quiet, desc="decoding", leave=False) as bar:
        decoded = decode(ProgressModel(model, bar), torch.tensor([ids], device=device))
    seconds = time.time() - start
    print(render(model, decoded.canvas[0], len(ids)))
    trace = decoded.trace
    print(f"steps {len(trace.steps)} | full forwards {trace.counters.full_forwards} | "
          f"tokens/step {trace.tokens_per_step():.2f} | {seconds:.2f} s")
    if args.trace:
        trace.save(args.trace)
    return 0


def sampler(args, steps: int):
    """The reference sampler the arguments ask for, as prompt -> Decoded; its parameters validated now."""
    from veridec.reference.dream import diffusion_generate
    from veridec.reference.llada import generate
    from veridec.rules.dream import DreamParams
    from veridec.rules.llada import LLaDAParams

    if args.gen_length < 1:
        raise UsageError(f"--gen-length must be >= 1, got {args.gen_length}")
    if args.sampler == "llada":
        kw = dict(steps=steps, gen_length=args.gen_length, block_length=args.block_length or args.gen_length,
                  temperature=args.temperature, cfg_scale=args.cfg_scale, remasking=args.remasking,
                  tokens_per_step=args.tokens_per_step)
        LLaDAParams(**kw)
        return lambda model, prompt: generate(model, prompt, **kw)
    kw = dict(steps=steps, alg=args.alg, temperature=args.temperature, tokens_per_step=args.tokens_per_step)
    DreamParams(**kw)
    return lambda model, prompt: diffusion_generate(model, prompt, max_new_tokens=args.gen_length, **kw)


def encode_prompt(tokenizer, text: str) -> list[int]:
    if not text:
        raise UsageError("--prompt must not be empty")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if tokenizer.decode(ids) != text:
        raise UsageError(f"--prompt: the model's tokenizer cannot encode {text!r} faithfully "
                         f"(it decodes back as {tokenizer.decode(ids)!r}); use characters in its vocabulary")
    return ids


def render(model, canvas: torch.Tensor, prompt_length: int) -> str:
    """The decoded text, cut at the first EOS after the prompt (masks left undecoded show as the mask token)."""
    ids = canvas.tolist()
    eos = model.special.eos_id
    if eos is not None and eos in ids[prompt_length:]:
        ids = ids[: prompt_length + ids[prompt_length:].index(eos)]
    return model.tokenizer.decode(ids)


# ------------------------------------------------------------------------------------------- verify
def run_verify(args) -> int:
    device = check_device(args.device)
    context = VerifyContext(load_model(args.model, device=device, dtype=torch.float32),
                            load_model(args.model, device=device, dtype=torch.float64), args.seed, args.quick)
    checks = [c for name, c in all_checks().items() if args.only is None or args.only in name]
    if not checks:
        raise UsageError(f"--only {args.only!r} matches no check")
    results = [item.run(context) for item in tqdm(checks, disable=args.quiet, desc="verify", leave=False)]
    prompts, gen = exactness.QUICK_SIZE if args.quick else exactness.VERIFY_SIZE
    rows = [] if args.no_table or args.only else \
        exactness.build_table(args.model, exactness.VERIFY_DECODERS, prompts, gen, seed=args.seed, device=device,
                              loaded=context.model, quiet=args.quiet)
    if rows:
        results.append(exactness.exactness_result(rows))
    print(format_table(results))
    if rows:
        print("\nExactness table (tier E rows must match the reference exactly):\n")
        print(exactness.to_markdown(rows))
    if args.out and rows:
        exactness.write_table(rows, args.out, exactness.table_meta(args.model, prompts, gen, BLOCK, args.seed))
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "seed": args.seed, "quick": args.quick,
                                         "checks": results_to_json(results),
                                         "exactness": [asdict(r) for r in rows]}, indent=2))
    return 0 if all(r.passed for r in results) else 1


def run_exactness(args) -> int:
    decoders = sorted(PRESETS) if args.decoders is None else args.decoders.split(",")
    for name in decoders:
        preset(name)  # a clear error for unknown names
    prompts, gen = exactness.QUICK_SIZE if args.quick else (args.prompts, args.gen_length)
    rows = exactness.build_table(args.model, decoders, prompts, gen, args.block_length, args.seed,
                                 device=check_device(args.device), quiet=args.quiet)
    exactness.write_table(rows, args.out, exactness.table_meta(args.model, prompts, gen, args.block_length,
                                                               args.seed))
    print(exactness.to_markdown(rows))
    return 0 if exactness.all_exact(rows) else 1


# ------------------------------------------------------------------------------------------- bounds
def run_bounds_command(args) -> int:
    from veridec.proofs_checks.table import run_bounds, to_markdown

    from .checks.bounds import OFF_AS_PUBLISHED

    if args.cases < 1:
        raise UsageError(f"--cases must be >= 1, got {args.cases}")
    report = run_bounds(cases=args.cases, seed=args.seed)
    print(to_markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    broken = [r["theorem"] for r in report["rows"] if r["violations"] and r["theorem"] not in OFF_AS_PUBLISHED]
    if broken:
        print("violated: " + ", ".join(broken))
    return 1 if broken else 0


# ------------------------------------------------------------------------------------------- baseline
def run_baseline(args) -> int:
    from . import baseline

    path = args.file or baseline.BASELINE
    gens = tuple(int(g) for g in args.gen_lengths.split(","))
    records = baseline.run_cases(gens)
    if args.update:
        baseline.write(records, path)
        print(f"wrote {len(records)} cases to {path}")
        return 0
    kept = {k: v for k, v in baseline.load(path).items() if int(k.rsplit("gen", 1)[1]) in gens}
    problems = baseline.regressions(records, kept) + baseline.speed_shortfalls(records)
    print("\n".join(problems) if problems else f"{len(kept)} cases within tolerance of {path}")
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------- experiment
def run_experiment(args) -> int:
    module = importlib.import_module(f"veridec.harness.experiments.{args.name}")
    module.run(args.out, quick=args.quick, seed=args.seed)
    print((args.out / f"{args.name}.md").read_text())
    return 0


# ------------------------------------------------------------------------------------------- train
def run_train(args) -> int:
    """``veridec train {tasks,hmm} ...`` (training.dllm) or ``veridec train reward ...`` (training.reward)."""
    if args.train_args[:1] == ["reward"]:
        from .training.reward import main as train_reward_main

        train_reward_main(args.train_args[1:])
        return 0
    from .training.dllm import main as train_main

    train_main(args.train_args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
