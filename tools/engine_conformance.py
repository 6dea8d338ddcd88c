"""SGLang's dLLM algorithms held against veridec's rules by logit replay (spec/engines.md), at 200 cases each on
two models, in the sync loop and in first-done-first-out mode; writes the verdicts, the stated differences met
and any failure to a JSON file that benchmarks/engine-conformance.md quotes.

    python -m tools.engine_conformance --sglang /path/to/unzipped-wheel --out benchmarks/engine-conformance.json
    python -m tools.engine_conformance --sglang DIR --renoise --out benchmarks/engine-conformance-renoise.json

``--renoise``: Gemma4Renoise against DiffusionGemma's rule (spec/engines.md EN8) on the two DiffusionGemma models,
seeds 0 and 1, the sync loop only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.testing.engine_check import check_engine

RUNS = (("LowConfidence", None, None), ("LowConfidence", "threshold-strict", None), ("JointThreshold", None, None),
        ("JointThreshold", None, {"vectorized_decoding": True}), ("JointThresholdInDel", None, None))
MODELS = ("blocks", "tiny-sdar")
RENOISE_MODELS = ("diffusiongemma", "tests/golden/checkpoints/diffusiongemma-canvas8")


def run(root, cases: int, models) -> list[dict]:
    runs = [(model, name, against, config, fdfo, 0) for model in models for fdfo in (False, True)
            for name, against, config in RUNS]
    return [_one(root, cases, *each) for each in runs]


def run_renoise(root, cases: int, models) -> list[dict]:
    return [_one(root, cases, model, "Gemma4Renoise", None, None, False, seed) for model in models for seed in (0, 1)]


def _one(root, cases: int, model: str, name: str, against, config, fdfo: bool, seed: int) -> dict:
    started = time.perf_counter()
    result = check_engine(name, against, model=model, config=config, max_examples=cases, sglang_root=root,
                          fdfo=fdfo, seed=seed)
    row = {"algorithm": name, "against": result.against, "config": config or {}, "model": model, "seed": seed,
           "mode": "fdfo" if fdfo else "sync",
           "passed": result.passed, "cases": result.cases, "steps": result.steps,
           "differences": result.differences, "seconds": round(time.perf_counter() - started, 1),
           "failure": None if result.failure is None else result.failure.message,
           "failure_case": result.failure_case}
    print(json.dumps(row), flush=True)
    return row


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", default=None, help="the folder holding sglang/ (default: the installed one)")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=None, help="default: blocks and tiny-sdar (with --renoise, "
                        "diffusiongemma and the golden diffusiongemma-canvas8)")
    parser.add_argument("--renoise", action="store_true", help="Gemma4Renoise against diffusiongemma instead")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/engine-conformance.json"))
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    if args.renoise:
        rows = run_renoise(args.sglang, args.cases, args.models or list(RENOISE_MODELS))
    else:
        rows = run(args.sglang, args.cases, args.models or list(MODELS))
    write_text_atomic(args.out, json.dumps({"cases_per_run": args.cases, "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
