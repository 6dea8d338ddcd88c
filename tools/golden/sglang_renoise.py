"""Golden replays of SGLang's ``Gemma4Renoise`` (spec/engines.md EN8), replayed in CI by
tests/test_engine_renoise.py.

Loads ``Gemma4Renoise`` from an sglang install or an unzipped wheel (``--sglang``: the folder holding ``sglang/``),
runs the uniform-state logit replay (``veridec.testing.engine_renoise``) against DiffusionGemma's rule on drawn
cases of the shipped DiffusionGemma (canvas 16) and of the golden checkpoint ``diffusiongemma-canvas8``, and
writes per case its settings, its verdict and, per step, the canvases SGLang's step was given and SGLang's
decisions (its canvases after the step and its done flags); the first ``--logit-cases`` cases of each model also
carry the step's float32 logits (logits in, decisions out, replayable with no model). Data only: no SGLang code is
written.

    python -m tools.golden.sglang_renoise --sglang /path/to/unzipped-wheel --out tests/golden/
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import torch

from veridec.files import write_text_atomic
from veridec.testing.engine_renoise_check import renoise_builder, renoise_model, run_renoise_case
from veridec.testing.families.sglang import BUILT_IN
from veridec.testing.families.sglang_renoise import BOUNDS, CONFIDENCE, SCHEDULES, SEEDS, STABILITY
from veridec.testing.sglang import load_sglang_algorithm, sglang_root

from .checkpoints import CHECKPOINT_DIR
from .record import _sha256
from .sglang import _version

RENOISE_FILE = "sglang_renoise.json"
FORMAT = 1
SEED = 20261206
MODELS = (("diffusiongemma", 200), ("diffusiongemma-canvas8", 40))  # model, cases


def cases(model, count: int, rng: random.Random) -> list[dict]:
    """1-3 rows of BOS and 0-5 ordinary tokens, 1-2 canvases, the knobs of testing.families.sglang_renoise (1-8
    steps; every fourth case the checkpoint's 16 steps and SGLang's default knobs)."""
    bos, drawn = model.config.text_config.bos_token_id, []
    for i in range(count):
        t_min, t_max = rng.choice(SCHEDULES)
        config = {"max_denoising_steps": rng.randint(1, 8), "entropy_bound": rng.choice(BOUNDS), "t_min": t_min,
                  "t_max": t_max, "stability_threshold": rng.choice(STABILITY),
                  "confidence_threshold": rng.choice(CONFIDENCE), "seed": rng.choice(SEEDS)}
        if i % 4 == 0:
            config = {"max_denoising_steps": 16, "entropy_bound": 0.1, "t_min": 0.4, "t_max": 0.8,
                      "stability_threshold": 1, "confidence_threshold": 0.005, "seed": None}
        prompts = [[bos] + [rng.randint(4, model.vocab_size - 1) for _ in range(rng.randint(0, 5))]
                   for _ in range(rng.randint(1, 3))]
        drawn.append({"prompts": prompts, "canvases": rng.randint(1, 2), "config": config, "rid": f"g{i}"})
    return drawn


def record(root: Path, logit_cases: int) -> dict:
    rng, out = random.Random(SEED), []
    cls, config_class = load_sglang_algorithm("Gemma4Renoise", root)
    for name, count in MODELS:
        model = renoise_model(_model_path(name))
        build = renoise_builder(cls, config_class, "Gemma4Renoise", model)
        for i, case in enumerate(cases(model, count, rng)):
            verdict, replay = run_renoise_case(build, BUILT_IN["Gemma4Renoise"][1], model, case, 10.0, record=True)
            out.append(_entry(name, verdict, replay, with_logits=i < logit_cases))
    path = "sglang/srt/dllm/algorithm/gemma4_renoise.py"
    return {"format": FORMAT, "sglang": _version(root), "logits_dtype": "float32",
            "files": {path: _sha256(root / path), "sglang/srt/dllm/algorithm/base.py":
                      _sha256(root / "sglang/srt/dllm/algorithm/base.py")}, "cases": out}


def _model_path(name: str) -> str:
    folder = Path(__file__).resolve().parents[2] / "tests" / "golden" / CHECKPOINT_DIR / name
    return str(folder) if folder.is_dir() else name


def _entry(model: str, verdict: str, replay, with_logits: bool) -> dict:
    divergence = replay.divergence
    steps = [{"canvas": s["canvas"], "step": s["step"], "input_ids": s["input_ids"], "engine": s["engine"],
              **({"logits": [float(str(np.float32(v))) for v in np.ravel(s["logits"])]} if with_logits else {})}
             for s in replay.transcript]
    return {"model": model, "case": replay.case, "verdict": verdict,
            "kind": None if divergence is None else divergence.kind,
            "divergence": None if divergence is None else divergence.message, "steps": steps}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", default=None, help="the folder holding sglang/ (default: the installed one)")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"))
    parser.add_argument("--logit-cases", type=int, default=8, help="cases per model whose logits are kept")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    data = record(sglang_root(args.sglang), args.logit_cases)
    write_text_atomic(args.out / RENOISE_FILE, json.dumps(data, separators=(",", ":")) + "\n")
    for name, _ in MODELS:
        verdicts = [case["verdict"] for case in data["cases"] if case["model"] == name]
        print(f"{name}: {len(verdicts)} cases: " + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))


if __name__ == "__main__":
    main()
