"""SGLang's dLLM algorithms held against veridec's rules by logit replay (spec/engines.md), at 200 cases each on
two models, in the sync loop and in first-done-first-out mode; writes the verdicts, the stated differences met
and any failure to a JSON file that benchmarks/engine-conformance.md quotes.

    python -m tools.engine_conformance --sglang /path/to/unzipped-wheel --out benchmarks/engine-conformance.json
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


def run(root, cases: int, models) -> list[dict]:
    rows = []
    for model in models:
        for (name, against, config), fdfo in ((each, fdfo) for fdfo in (False, True) for each in RUNS):
            started = time.perf_counter()
            result = check_engine(name, against, model=model, config=config, max_examples=cases, sglang_root=root,
                                  fdfo=fdfo)
            row = {"algorithm": name, "against": result.against, "config": config or {}, "model": model,
                   "mode": "fdfo" if fdfo else "sync",
                   "passed": result.passed, "cases": result.cases, "steps": result.steps,
                   "differences": result.differences, "seconds": round(time.perf_counter() - started, 1),
                   "failure": None if result.failure is None else result.failure.message,
                   "failure_case": result.failure_case}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", default=None, help="the folder holding sglang/ (default: the installed one)")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/engine-conformance.json"))
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    rows = run(args.sglang, args.cases, args.models)
    write_text_atomic(args.out, json.dumps({"cases_per_run": args.cases, "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
