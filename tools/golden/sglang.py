"""Golden replays of SGLang's dLLM algorithms (spec/engines.md EN6), replayed in CI by tests/test_engine_golden.py.

Loads ``LowConfidence``, ``JointThreshold`` (both of its paths) and ``JointThresholdInDel`` from an sglang
install or an unzipped wheel (``--sglang``: the folder holding ``sglang/``), runs the logit replay
(``veridec.testing.engines``) on small deterministic cases on the shipped ``blocks`` model and on the golden
checkpoint that proposes the mask token, and writes each case's
transcript: per step the blocks, prompt masks and float64 logits SGLang's step was given, SGLang's decisions
(its blocks after the step and its done flags) and veridec's; plus the case's verdict (pass, or the stated
difference that explains its first divergence). Data only: no SGLang code is written.

    python -m tools.golden.sglang --sglang /path/to/unzipped-wheel --out tests/golden/
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import torch

from veridec.files import write_text_atomic
from veridec.testing.engine_check import _builder, _run_case
from veridec.testing.engines import float64_model
from veridec.testing.families.common import ordinary_tokens
from veridec.testing.families.sglang import BUILT_IN, RULES
from veridec.testing.models import load_check_model
from veridec.testing.sglang import ALGORITHMS, load_sglang_algorithm, sglang_root

from .checkpoints import CHECKPOINT_DIR
from .record import _sha256

SGLANG_FILE = "sglang.json"
FORMAT = 1
SEED = 20261205
RUNS = (("LowConfidence", {}), ("JointThreshold", {}), ("JointThreshold", {"vectorized_decoding": True}),
        ("JointThresholdInDel", {}))
MASK_RUNS = (("LowConfidence", {}), ("JointThreshold", {}), ("JointThresholdInDel", {}))
# the shipped blocks model, and the golden checkpoint that proposes the mask token (its stated differences and stalls)
MODELS = (("blocks", RUNS), ("llada-proposes-mask", MASK_RUNS))
DRAWN = 24  # cases drawn per algorithm run, of which the golden keeps some (``_record_model``)


def cases(algorithm: str, model, count: int, rng: random.Random, small: bool = False) -> list[dict]:
    """Small cases (1-2 rows, prompts of 1-4 tokens, 1-6 new tokens in blocks of 1-4; ``small``: one row, 1-4
    tokens in blocks of 1-3, at most 2 post-edit steps), thresholds at drawn confidences of the decode in every
    third case (``{"at_confidence": r}``), logits rounded to float32 (exact float64 values with short decimal
    forms: a smaller file)."""
    tokens, drawn = ordinary_tokens(model), []
    for i in range(count):
        config = {"threshold": {"at_confidence": rng.randint(1, 3)} if i % 3 == 0 else rng.choice((0.95, 0.5, 0.2))}
        if algorithm != "LowConfidence":
            config.update(edit_threshold=rng.choice((0.0, 0.5, 0.9)),
                          max_post_edit_steps=rng.choice((0, 1, 2) if small else (16, 0, 1, 2)))
        prompts = [[rng.choice(tokens) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 1 + (
            not small)))]
        drawn.append({"prompts": prompts, "gen_length": rng.randint(1, 4 if small else 6),
                      "block_size": rng.randint(1, 3 if small else 4), "config": config, "rounding": "float32"})
    return drawn


def record(root: Path, count: int) -> dict:
    rng, out, masks = random.Random(SEED), [], {}
    for name, runs in MODELS:
        model = float64_model(load_check_model(_model_path(name)))
        masks[name] = model.special.mask_id
        out += _record_model(root, name, model, runs, count, rng)
    files = {f"sglang/srt/dllm/{path}": _sha256(root / "sglang" / "srt" / "dllm" / path)
             for path in ("config.py", "algorithm/base.py", *(f"algorithm/{f}.py" for f in ALGORITHMS.values()))}
    return {"format": FORMAT, "sglang": _version(root), "mask_ids": masks, "logits_dtype": "float32",
            "files": files, "cases": out}


def _model_path(name: str) -> str:
    folder = Path(__file__).resolve().parents[2] / "tests" / "golden" / CHECKPOINT_DIR / name
    return str(folder) if folder.is_dir() else name


def _record_model(root: Path, name: str, model, runs, count: int, rng: random.Random) -> list[dict]:
    """Per algorithm run: the first ``count`` passing cases and the first case of every other verdict among
    ``DRAWN`` drawn ones."""
    indel, out = tuple(ordinary_tokens(model)[-2:][::-1]), []
    for algorithm, fixed in runs:
        cls, config_class = load_sglang_algorithm(algorithm, root)
        against, differences = BUILT_IN[algorithm]
        build = _builder(cls, config_class, algorithm, model.special.mask_id, indel)
        kept = {}
        for case in cases(algorithm, model, DRAWN, rng, small=runs is MASK_RUNS):
            case["config"].update(fixed)
            verdict, replay = _run_case(build, RULES[against], differences, model, case, indel, 10.0, record=True)
            if kept.get(verdict, 0) < (count if verdict == "pass" else 1):
                kept[verdict] = kept.get(verdict, 0) + 1
                out.append(_entry(algorithm, against, name, verdict, replay))
    return out


def _entry(algorithm: str, against: str, model: str, verdict: str, replay) -> dict:
    divergence = replay.divergence
    return {"algorithm": algorithm, "against": against, "model": model, "case": replay.case, "verdict": verdict,
            "kind": None if divergence is None else divergence.kind,
            "divergence": None if divergence is None else divergence.message,
            "steps": [_short(step) for step in replay.transcript]}


def _short(step: dict) -> dict:
    """The step with its float32-rounded logits in their shortest float32 decimal form (read back as float32)."""
    logits = [[float(str(np.float32(v))) for v in row] for row in step["logits"]]
    return {**step, "logits": logits}


def _version(root: Path) -> str:
    found = sorted(root.glob("sglang-*.dist-info"))
    return found[0].name.removeprefix("sglang-").removesuffix(".dist-info") if found else "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", default=None, help="the folder holding sglang/ (default: the installed one)")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"))
    parser.add_argument("--cases", type=int, default=3, help="passing cases kept per algorithm run")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    data = record(sglang_root(args.sglang), args.cases)
    write_text_atomic(args.out / SGLANG_FILE, json.dumps(data, separators=(",", ":")) + "\n")
    verdicts = [case["verdict"] for case in data["cases"]]
    print(f"{len(verdicts)} cases: " + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))


if __name__ == "__main__":
    main()
