"""``veridec generate --sampler diffusiongemma``: decode token ids with DiffusionGemma's reference decoder
(spec/diffusiongemma.md: uniform-state canvases) on the shipped tiny checkpoint (``--model diffusiongemma``) or a
DiffusionGemma checkpoint folder, and print the generated ids. The settings are the checkpoint's generation config
(DG7.1) with ``--gen-length`` as ``max_new_tokens`` and ``--steps`` as ``max_denoising_steps``; the draws come from
one generator seeded ``--seed``. Neither model has a tokenizer veridec loads, so the prompt is ``--prompt-ids``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from veridec.models.diffusiongemma import load_diffusiongemma, load_shipped_diffusiongemma
from veridec.models.shipped import model_folder
from veridec.reference.diffusiongemma import generate
from veridec.rules.diffusiongemma import check_length, settings_for

from .arguments import UsageError

SHIPPED = "diffusiongemma"  # the shipped uniform-state checkpoint's name (veridec/assets/diffusiongemma)
FOREIGN = {"block_length": "--block-length", "cfg_scale": "--cfg-scale", "remasking": "--remasking",
           "alg": "--alg", "tokens_per_step": "--tokens-per-step",
           "temperature": "--temperature (its temperatures follow the checkpoint's schedule, t_max -> t_min)"}
FLAGS = {"max_new_tokens": "--gen-length", "max_denoising_steps": "--steps"}  # the settings the command sets


def is_diffusiongemma(name: str) -> bool:
    """``--model`` names a DiffusionGemma model: the shipped one, or a folder whose config.json says so."""
    config = model_folder(name) / "config.json"
    if name == SHIPPED:
        return True
    try:
        return config.is_file() and json.loads(config.read_text()).get("model_type") == "diffusion_gemma"
    except (OSError, ValueError):
        return False


def load(name: str, device):
    """The DiffusionGemma model ``--model`` names; any other model is a usage error saying which sampler fits."""
    if not is_diffusiongemma(name):
        raise UsageError(f"--model {name} is not a DiffusionGemma model (a uniform-state checkpoint, config.json "
                         f"model_type 'diffusion_gemma'); --sampler diffusiongemma takes --model {SHIPPED} (the "
                         "shipped one) or a DiffusionGemma folder; a mask model decodes with --sampler llada, dream "
                         "or sdar")
    try:
        return load_shipped_diffusiongemma(device=device) if name == SHIPPED else load_diffusiongemma(name,
                                                                                                      device=device)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"--model {name}: {err}") from err


def prompt_ids(args, vocab_size: int) -> list[int]:
    """``--prompt-ids`` as token ids, each in [0, vocab_size); text needs a tokenizer these models lack."""
    if args.prompt_ids is None:
        raise UsageError(f"--prompt: --model {args.model} has no tokenizer veridec loads (DiffusionGemma); give the "
                         "prompt as token ids: --prompt-ids 2,5,6,7")
    try:
        ids = [int(part) for part in args.prompt_ids.split(",")]
    except ValueError as err:
        raise UsageError(f"--prompt-ids: comma-separated integers, got {args.prompt_ids!r}") from err
    wrong = [i for i in ids if not 0 <= i < vocab_size]
    if wrong:
        raise UsageError(f"--prompt-ids: token ids must lie in [0, {vocab_size - 1}] (the model's vocabulary), "
                         f"got {wrong}")
    return ids


def settings(args, model, prompt_length: int) -> dict:
    """The call's settings, checked now (before any forward): a bad value names its flag and range."""
    given = dict(max_new_tokens=args.gen_length, max_denoising_steps=args.steps if args.steps is not None else ...)
    try:
        check_length(model, prompt_length, settings_for(model, given))
    except ValueError as err:
        flags = [flag for name, flag in FLAGS.items() if name in str(err)] or ["--model"]
        raise UsageError(f"{' / '.join(flags)}: {err}") from err
    return {name: value for name, value in given.items() if value is not ...}


def run(args, device: torch.device) -> int:
    given = [flag for name, flag in FOREIGN.items() if getattr(args, name) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} do(es) not apply to --sampler diffusiongemma")
    model = load(args.model, device)
    ids = prompt_ids(args, model.vocab_size)
    kw = settings(args, model, len(ids))
    generator = torch.Generator(device=device).manual_seed(args.seed)
    start = time.perf_counter()
    decoded = generate(model, torch.tensor([ids], device=device), generator=generator, **kw)
    seconds = time.perf_counter() - start
    print(" ".join(str(token) for token in shown(decoded, len(ids))))
    print(summary(decoded, model.canvas_length, seconds))
    if args.trace:
        decoded.trace.save(Path(args.trace))
    return 0


def shown(decoded, prompt_length: int) -> list[int]:
    """The generated ids up to the first EOS (DG5: what follows it is padding)."""
    eos = set(decoded.trace.params.get("eos_token_id") or ())
    generated = decoded.canvas[0, prompt_length:].tolist()
    cut = next((i for i, token in enumerate(generated) if token in eos), len(generated))
    return generated[:cut]


def summary(decoded, canvas_length: int, seconds: float) -> str:
    """Canvases, denoising steps, model calls and finished canvas tokens per second (a canvas lands at once:
    never a per-token latency)."""
    trace = decoded.trace
    canvases = (decoded.canvas.shape[1] - trace.prompt_length) // canvas_length
    calls = len(trace.steps)
    rate = canvases * canvas_length / seconds if seconds > 0 else float("inf")
    return (f"canvases {canvases} | denoising steps {calls} | canvas tokens/s {rate:.1f} "
            f"({canvases * canvas_length} tokens in {seconds:.3f} s)")
