"""Golden traces of transformers' ``DiffusionGemmaForBlockDiffusion.generate`` (spec/diffusiongemma.md DG8),
replayed on every CI run by tests/test_diffusiongemma_golden.py with both of veridec's decoders.

Runs the official ``generate`` of the installed transformers (or of the one under ``--site``, a site-packages
folder of another venv, put first on ``sys.path``) on two tiny random DiffusionGemma checkpoints loaded in float64
(eager experts, SDPA attention: DG1.2): the shipped ``veridec/assets/diffusiongemma`` (canvas 16) and
``tests/golden/checkpoints/diffusiongemma-canvas8`` (canvas 8, vocabulary 48), both trained from the seeded random
models of ``CHECKPOINTS`` by ``python -m tools.training.diffusiongemma --checkpoint NAME``.
Per case: the settings (the generate keywords, the cache implementation among them), torch's seed, the prompt and
its padding, the returned sequences and tokens_per_forward, and every denoising step as the official loop ran it:
the steps remaining, the rows still denoising, the canvas fed to the decoder (its random start and every renoising
are torch's draws, visible there) and the accepted positions. Data only: nothing of transformers is copied.

    python -m tools.golden.diffusiongemma [--site SITE_PACKAGES] [--out tests/golden/] [--cases 220]

Canvas tokens are written one character each (``ALPHABET``, vocabularies up to 64); acceptances as 0/1 strings.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_FILE = "diffusiongemma.json"
ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
SHIPPED_GENERATION = {"max_new_tokens": 32, "max_denoising_steps": 16, "t_min": 0.4, "t_max": 0.8,
                      "sampler_config": {"entropy_bound": 0.1, "_cls_name": "EntropyBoundSamplerConfig"},
                      "stability_threshold": 1, "confidence_threshold": 0.005, "eos_token_id": 1, "pad_token_id": 0}
CHECKPOINTS = {  # name: (folder, seed, canvas, initializer range, text overrides, generation config) of the
    # random model tools.training.diffusiongemma starts from
    "shipped": ("veridec/assets/diffusiongemma", 0, 16, 0.05, {}, SHIPPED_GENERATION),
    "canvas8": ("tests/golden/checkpoints/diffusiongemma-canvas8", 1, 8, 0.05,
                {"vocab_size": 48, "hidden_size": 32, "intermediate_size": 32, "moe_intermediate_size": 16}, {}),
}
STEPS = (1, 2, 3, 4, 5)
BOUNDS = (0.1, 0.5, 2.0, 0.02)
SCHEDULES = ((0.4, 0.8), (0.001, 0.002), (0.9, 1.5), (None, None))  # the second: practically greedy
STABILITY = (1, 0, 2, 3, None)
CONFIDENCE = (0.005, 0.05, 0.4, 1.0, None)
EOS = (None, 1, [1, 3])


def cases(count: int) -> list[dict]:
    """``count`` cases drawn from a fixed seed: the first few cover every corner on purpose (greedy-like and
    sampled, one and several canvases, each stop setting, EOS, padding, both caches)."""
    rng = random.Random(20261206)
    out = []
    for index in range(count):
        model = "canvas8" if index % 3 == 2 else "shipped"
        canvas = CHECKPOINTS[model][2]
        batch = 1 + index % 3 if index >= 6 else 1
        length = rng.randint(1, 6)
        vocab = 48 if model == "canvas8" else 32
        rows = [[rng.randrange(4, vocab) for _ in range(length)] for _ in range(batch)]
        mask = None
        if batch > 1 and rng.random() < 0.6:
            real = [rng.randint(1, length) for _ in range(batch)]
            mask = [[0] * (length - n) + [1] * n for n in real]
            rows = [[0] * (length - n) + row[length - n:] for row, n in zip(rows, real)]
        out.append({"id": index, "model": model, "seed": rng.randrange(2**31), "prompt": rows,
                    "attention_mask": mask, "settings": _settings(rng, index, canvas)})
    return out


def _settings(rng: random.Random, index: int, canvas: int) -> dict:
    t_min, t_max = SCHEDULES[index % 4] if index < 40 else rng.choice(SCHEDULES)
    settings = {"max_new_tokens": rng.choice((canvas // 2, canvas, canvas, 2 * canvas, 3 * canvas - 3)),
                "max_denoising_steps": rng.choice(STEPS), "sampler_config": {"entropy_bound": rng.choice(BOUNDS)},
                "t_min": t_min, "t_max": t_max, "stability_threshold": rng.choice(STABILITY),
                "confidence_threshold": rng.choice(CONFIDENCE), "eos_token_id": rng.choice(EOS),
                "pad_token_id": rng.choice((0, 0, None)),
                "cache_implementation": "static" if index % 5 == 4 else "dynamic"}
    if index % 17 == 16:  # the checkpoint's generation config and the official defaults decide the rest
        settings = {"max_new_tokens": canvas, "max_denoising_steps": rng.choice(STEPS)}
    return settings


def _official_settings(settings: dict) -> dict:
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    kwargs = dict(settings)
    if "sampler_config" in kwargs:
        kwargs["sampler_config"] = EntropyBoundSamplerConfig(**kwargs["sampler_config"])
    if kwargs.get("cache_implementation") == "static":
        kwargs["disable_compile"] = True  # the static cache would compile the loop (not on a CPU recorder)
    return kwargs


def record_case(model, case: dict) -> dict:
    """Run the official generate on ``case`` with torch seeded, its denoising steps observed from outside."""
    import torch

    steps = []
    original = model._denoising_step

    def observed(**kwargs):
        before = kwargs["finished_denoising"].clone()
        result = original(**kwargs)
        accepted = kwargs["sampler"].accepted_token_mask
        steps.append({"remaining": int(kwargs["cur_step"]), "active": _bits(~before),
                      "input": [_tokens(row) for row in kwargs["current_canvas"].tolist()],
                      "accepted": [_bits(row) for row in accepted]})
        return result

    model._denoising_step = observed
    try:
        prompt = torch.tensor(case["prompt"])
        mask = None if case["attention_mask"] is None else torch.tensor(case["attention_mask"])
        torch.manual_seed(case["seed"])
        extra = {} if mask is None else {"attention_mask": mask}
        out = model.generate(prompt, **extra, **_official_settings(case["settings"]))
    finally:
        del model._denoising_step
    return {**case, "sequences": out.sequences.tolist(),
            "tokens_per_forward": [round(float(v), 9) for v in out.tokens_per_forward], "steps": steps}


def _tokens(row: list[int]) -> str:
    return "".join(ALPHABET[t] for t in row)


def _bits(row) -> str:
    return "".join("1" if bool(flag) else "0" for flag in row.tolist())


def load_official(name: str):
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    folder = ROOT / CHECKPOINTS[name][0]
    return DiffusionGemmaForBlockDiffusion.from_pretrained(folder, dtype=torch.float64, attn_implementation="sdpa",
                                                           experts_implementation="eager").eval()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "golden"))
    parser.add_argument("--site", help="a site-packages folder whose transformers records (first on sys.path)")
    parser.add_argument("--cases", type=int, default=220)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.site:
        sys.path.insert(0, args.site)
    import torch
    import transformers

    from .checkpoints import content_sha256

    torch.set_num_threads(1)
    models = {name: load_official(name) for name in CHECKPOINTS}
    started = time.perf_counter()
    recorded = [record_case(models[case["model"]], case) for case in cases(args.cases)]
    data = {"format": 1, "transformers": transformers.__version__, "torch": torch.__version__, "dtype": "float64",
            "alphabet": ALPHABET, "checkpoints": {name: {"folder": spec[0], "sha256": content_sha256(ROOT / spec[0])}
                                                  for name, spec in CHECKPOINTS.items()}, "cases": recorded}
    path = Path(args.out) / OUT_FILE
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"{len(recorded)} cases in {time.perf_counter() - started:.1f} s -> {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
