"""The committed counter baseline and the CI regression gate (benchmarks/baseline.json, spec/exactness.md E5).

Each benchmark case (decoder x variant x gen length) on the shipped default model, and on the shipped
block-diffusion model (``blocks/`` cases: decoder x {reference, cached} x block 4 and 32, spec/block_diffusion.md
BD8, BD11), records deterministic numbers: full forwards, query positions per prompt, tokens per step, and
agreement with the same decoder's reference decode (token match, commit-order match). ``regressions`` holds a new
run against the baseline with the tolerances below; improvements never fail. The suite holds the gate at gen 64
(tests/test_baseline.py); the whole grid and the speed floors by hand:

    python -m tools.baseline                # hold this machine's counters against benchmarks/baseline.json
    python -m tools.baseline --update       # rewrite it after an intended change; review its diff
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.files import write_text_atomic
from veridec.models.shipped import load_model
from veridec.rules.presets import PRESETS

from veridec.harness.arguments import UsageError, check_output_file
from veridec.harness.block_rows import batch_of, decoder_pair
from veridec.harness.workloads import BLOCK, prompts_for, row_tokens_per_step, run_variant, single_prompts

DECODERS = ("sequential", "conf-hq", "fastdllm", "factor", "localleap", "eb-hq", "klass-hq", "dapd-hq")
VARIANTS = ("reference", "prefix", "dual")  # "optimized" without cache is Tier E: the reference's counters
GEN_LENGTHS = (64, 128, 256)
BLOCK_DECODERS = ("sequential", "fastdllm", "sdar-static")  # on the shipped block-diffusion model
BLOCK_SIZES = (4, BLOCK)
PROMPTS, SEED = 4, 0
BASELINE = Path(__file__).resolve().parents[1] / "benchmarks" / "baseline.json"  # in the source tree
# Allowed regression before the gate fails: relative for costs and throughput, absolute for agreement. Counters
# are deterministic on one machine; the slack absorbs argmax flips from another CPU's float rounding.
TOLERANCE = {"full_forwards": 0.05, "positions_per_prompt": 0.05, "tokens_per_step": 0.05,
             "token_match": 0.05, "commit_order_match": 0.25}
HIGHER_IS_WORSE = ("full_forwards", "positions_per_prompt")


def case_name(decoder: str, variant: str, gen_length: int) -> str:
    return f"{decoder}/{variant}/gen{gen_length}"


def run_cases(gen_lengths=GEN_LENGTHS, decoders=DECODERS, variants=VARIANTS, model=None) -> dict[str, dict]:
    """Decode every case once -> {case name: record}; ``seconds`` is wall time (not gated)."""
    model = load_model("default", dtype=torch.float32) if model is None else model
    prompt, mask = prompts_for("default", model, PROMPTS, SEED)
    records = {}
    for gen in gen_lengths:
        for decoder in decoders:
            reference = None
            for variant in variants:
                out, seconds = run_variant(model, variant, PRESETS[decoder], prompt, mask, gen, BLOCK)
                reference = reference or out
                comparison = compare_traces(reference.trace, out.trace, reference.canvas, out.canvas)
                counters = out.trace.counters
                records[case_name(decoder, variant, gen)] = {
                    "full_forwards": counters.full_forwards,
                    "positions_per_prompt": counters.query_positions / PROMPTS,
                    "tokens_per_step": round(row_tokens_per_step(out.trace), 4),
                    "token_match": round(comparison.token_match_rate, 4),
                    "commit_order_match": round(comparison.commit_order_match_rate, 4),
                    "seconds": round(seconds, 4)}
    return records


def run_block_cases(gen_lengths=GEN_LENGTHS, model=None) -> dict[str, dict]:
    """The block-diffusion cases -> {case name: record}: the reference on each prompt alone (its counters summed),
    the cached decoder on the left-padded batch, both compared with the reference laid out as the batch."""
    model = load_model("blocks", dtype=torch.float32) if model is None else model
    prompt, mask = prompts_for("blocks", model, PROMPTS, SEED)
    records = {}
    for gen in gen_lengths:
        for decoder in BLOCK_DECODERS:
            for b in BLOCK_SIZES:
                reference, cached = decoder_pair(decoder, b)
                start = time.perf_counter()
                batch = cached(model, prompt, mask, gen_length=gen)
                cached_seconds = time.perf_counter() - start
                start = time.perf_counter()
                alone = [reference(model, single, gen_length=gen) for single in single_prompts(prompt, mask)]
                reference_seconds = time.perf_counter() - start
                expected, canvas = batch_of(alone, prompt, mask, batch.canvas.shape[1], model.special.mask_id)
                expected.counters = _summed(alone)
                runs = {"reference": (expected, canvas, reference_seconds),
                        "cached": (batch.trace, batch.canvas, cached_seconds)}
                for variant, (trace, out, seconds) in runs.items():
                    comparison = compare_traces(expected, trace, canvas, out)
                    records[f"blocks/{decoder}/{variant}-b{b}/gen{gen}"] = {
                        "full_forwards": trace.counters.full_forwards,
                        "positions_per_prompt": trace.counters.query_positions / PROMPTS,
                        "tokens_per_step": round(row_tokens_per_step(trace), 4),
                        "token_match": round(comparison.token_match_rate, 4),
                        "commit_order_match": round(comparison.commit_order_match_rate, 4),
                        "seconds": round(seconds, 4)}
    return records


def _summed(decodes):
    """The counters of single decodes added up."""
    total = type(decodes[0].trace.counters)()
    for decoded in decodes:
        for name, value in vars(decoded.trace.counters).items():
            setattr(total, name, getattr(total, name) + value)
    return total


def regressions(current: dict[str, dict], baseline: dict[str, dict]) -> list[str]:
    """One line per metric of a baseline case that got worse beyond TOLERANCE (or a case that vanished)."""
    problems = []
    for name, base in baseline.items():
        if name not in current:
            problems.append(f"{name}: missing from this run")
            continue
        for metric, tolerance in TOLERANCE.items():
            now, then = current[name][metric], base[metric]
            if metric in HIGHER_IS_WORSE:
                worse = now > then * (1 + tolerance)
            elif metric == "tokens_per_step":
                worse = now < then * (1 - tolerance)
            else:
                worse = now < then - tolerance
            if worse:
                problems.append(f"{name}: {metric} {then} -> {now} (tolerance {tolerance})")
    return problems


def load(path: Path = BASELINE) -> dict[str, dict]:
    return json.loads(Path(path).read_text())["cases"]


def cases_at(cases: dict[str, dict], gen_lengths) -> dict[str, dict]:
    """The cases of ``cases`` decoded at one of ``gen_lengths``."""
    return {name: case for name, case in cases.items() if int(name.rsplit("gen", 1)[1]) in gen_lengths}


def write(records: dict[str, dict], path: Path = BASELINE) -> None:
    deterministic = {name: {k: v for k, v in r.items() if k != "seconds"} for name, r in records.items()}
    meta = {"models": ["default", "blocks"], "prompts": PROMPTS, "block_length": BLOCK, "seed": SEED,
            "torch": torch.__version__, "written": time.strftime("%Y-%m-%d")}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({"meta": meta, "tolerance": TOLERANCE, "cases": deterministic}, indent=1) + "\n")


# Same-run wall-clock ratios held to conservative floors (measured ~10x, ~5x, ~5x on 2 shared cores).
SPEED_FLOORS = {("fastdllm/dual/gen256", "sequential/reference/gen256"): 3.0,
                ("fastdllm/dual/gen256", "fastdllm/reference/gen256"): 2.0,
                ("sequential/dual/gen256", "sequential/reference/gen256"): 2.0}


def speed_shortfalls(records: dict[str, dict]) -> list[str]:
    """Ratios seconds(slow) / seconds(fast) of this run that fall below their floor."""
    problems = []
    for (fast, slow), floor in SPEED_FLOORS.items():
        if fast in records and slow in records:
            ratio = records[slow]["seconds"] / records[fast]["seconds"]
            if ratio < floor:
                problems.append(f"{fast} is only {ratio:.2f}x faster than {slow} (floor {floor}x)")
    return problems


def parse_gen_lengths(text: str) -> tuple[int, ...]:
    """``--gen-lengths``: comma-separated positive multiples of the block length."""
    try:
        gens = tuple(int(g) for g in text.split(","))
    except ValueError as err:
        raise UsageError(f"--gen-lengths must be comma-separated integers, got {text!r}") from err
    if any(g < 1 or g % BLOCK for g in gens):
        raise UsageError(f"--gen-lengths must be positive multiples of the block length {BLOCK}, got {gens}")
    return gens


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.baseline", description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the baseline from this run")
    parser.add_argument("--file", type=Path, default=BASELINE, help="baseline path (default benchmarks/baseline.json)")
    parser.add_argument("--gen-lengths", default="64,128,256")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Hold this run's counters against the baseline (exit 1 on a regression) or rewrite it (``--update``);
    exit 2 with one line on a bad argument."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        gens = parse_gen_lengths(args.gen_lengths)
        if args.update:
            check_output_file(args.file, "--file")
        elif not args.file.is_file():
            raise UsageError(f"--file {args.file}: no counter baseline there (write one with --update)")
    except UsageError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    records = {**run_cases(gens), **run_block_cases(gens)}
    if args.update:
        write(records, args.file)
        print(f"wrote {len(records)} cases to {args.file}")
        return 0
    kept = cases_at(load(args.file), gens)
    problems = regressions(records, kept) + speed_shortfalls(records)
    print("\n".join(problems) if problems else f"{len(kept)} cases within tolerance of {args.file}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
