"""``veridec generate``: decode a text prompt with a reference sampler (LLaDA's, Dream's, or SDAR's block diffusion
on a block-diffusion model) and print the text; DiffusionGemma's sampler: ``generate_diffusiongemma``."""

from __future__ import annotations

import sys
import time

import torch
from tqdm import tqdm

from veridec.decoding import is_block_model
from veridec.reference.block_diffusion import block_diffusion_generate
from veridec.reference.dream import diffusion_generate
from veridec.reference.llada import generate
from veridec.rules.dream import DreamParams
from veridec.rules.llada import LLaDAParams
from veridec.rules.sdar import SDARParams
from veridec.throughput import throughput

from . import generate_diffusiongemma as diffusiongemma
from .arguments import UsageError, check_device, check_output_file, load_model_arg

LLADA_ONLY = {"cfg_scale": "--cfg-scale", "remasking": "--remasking"}
DREAM_ONLY = {"alg": "--alg"}
FOREIGN = {  # the flags each sampler does not take
    "llada": {**DREAM_ONLY},
    "dream": {"block_length": "--block-length", **LLADA_ONLY},
    "sdar": {**LLADA_ONLY, **DREAM_ONLY, "tokens_per_step": "--tokens-per-step"},
}
SDAR_BLOCK = 4  # --sampler sdar's default block length (SDAR's released chat models decode in blocks of 4)


class ProgressModel:
    """Ticks a progress bar once per forward; everything else is the wrapped model."""

    def __init__(self, model, bar):
        self.model, self.bar = model, bar

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **options):
        self.bar.update(1)
        return self.model(x, attention_mask=attention_mask, **options)


def run(args) -> int:
    device = check_device(args.device)
    check_output_file(args.trace, "--trace")
    if args.sampler == "diffusiongemma":
        return diffusiongemma.run(args, device)
    if diffusiongemma.is_diffusiongemma(args.model):
        raise UsageError(f"--model {args.model} is a uniform-state DiffusionGemma model (no mask token): use "
                         "--sampler diffusiongemma with --prompt-ids")
    if args.prompt_ids is not None:
        raise UsageError(f"--prompt-ids applies to --sampler diffusiongemma; --sampler {args.sampler} takes "
                         "--prompt text (the model's tokenizer encodes it)")
    args.temperature = 0.0 if args.temperature is None else args.temperature
    model = load_model_arg(args.model, device)
    if model.tokenizer is None:
        raise UsageError(f"--model {args.model}: the folder has no tokenizer, so text prompts cannot be encoded")
    check_sampler_fits(args, model)
    ids = encode_prompt(model.tokenizer, args.prompt)
    if len(ids) + args.gen_length > model.max_length:
        raise UsageError(f"--prompt ({len(ids)} tokens) + --gen-length ({args.gen_length}) exceeds the model's "
                         f"context of {model.max_length} tokens")
    steps = args.gen_length if args.steps is None else args.steps
    decode = sampler(args, steps)  # validates every sampling argument before any forward
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    total = None if args.tokens_per_step or args.sampler == "sdar" else steps
    with tqdm(total=total, disable=args.quiet, desc="decoding", leave=False) as bar:
        decoded = decode(ProgressModel(model, bar), torch.tensor([ids], device=device))
    seconds = time.perf_counter() - start
    print(render(model, decoded.canvas[0], len(ids)))
    trace = decoded.trace
    speed = throughput(decoded.canvas, len(ids), seconds, model_calls=trace.counters.model_calls,
                       eos_id=model.special.eos_id, mask_id=model.special.mask_id, dtype=model.dtype)
    print(f"steps {len(trace.steps)} | full forwards {trace.counters.full_forwards} | "
          f"tokens/step {trace.tokens_per_step():.2f} | {speed.summary()}")
    warn_masks_left(shown(model, decoded.canvas[0], len(ids)), model.special.mask_id, args.sampler)
    if args.trace:
        trace.save(args.trace)
    return 0


def sampler(args, steps: int):
    """The reference sampler the arguments ask for, as prompt -> Decoded; its parameters validated now (a bad
    value, or a flag the other sampler takes, is a usage error)."""
    given = [flag for name, flag in FOREIGN[args.sampler].items() if getattr(args, name) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} do(es) not apply to --sampler {args.sampler}")
    try:
        if args.sampler == "sdar":
            block = SDAR_BLOCK if args.block_length is None else args.block_length
            kw = dict(gen_length=args.gen_length, block_length=block,
                      denoising_steps=block if args.steps is None else args.steps, temperature=args.temperature)
            SDARParams(**kw)
            return lambda model, prompt: cut(block_diffusion_generate(
                model, prompt, stopping_criteria_idx=eos_stops(model), **kw), prompt.shape[1] + args.gen_length)
        if args.sampler == "llada":
            kw = dict(steps=steps, gen_length=args.gen_length,
                      block_length=args.gen_length if args.block_length is None else args.block_length,
                      temperature=args.temperature, cfg_scale=args.cfg_scale or 0.0,
                      remasking=args.remasking or "low_confidence", tokens_per_step=args.tokens_per_step)
            LLaDAParams(**kw)
            return lambda model, prompt: generate(model, prompt, **kw)
        kw = dict(steps=steps, alg=args.alg or "entropy", temperature=args.temperature,
                  tokens_per_step=args.tokens_per_step)
        DreamParams(**kw)
    except ValueError as err:
        raise UsageError(str(err)) from err
    return lambda model, prompt: diffusion_generate(model, prompt, max_new_tokens=args.gen_length, **kw)


def eos_stops(model) -> list[int] | None:
    """SDAR's stop list: the model's EOS, or none (decode to gen_length) when the model names no EOS."""
    return None if model.special.eos_id is None else [model.special.eos_id]


def cut(decoded, length: int):
    """The decode's canvas cut to ``length`` (block diffusion fills its last block past gen_length)."""
    return decoded._replace(canvas=decoded.canvas[:, :length])


def check_sampler_fits(args, model) -> None:
    """--sampler sdar on a block-diffusion model (SDAR layout), the others on a bidirectional one."""
    blocks = is_block_model(model)
    if blocks != (args.sampler == "sdar"):
        kind = "a block-diffusion model (SDAR layout)" if blocks else "bidirectional (not a block-diffusion model)"
        use = "--sampler sdar" if blocks else "--sampler llada or dream"
        raise UsageError(f"--model {args.model} is {kind}; use {use}")


def shown(model, canvas: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """The canvas up to the first EOS after the prompt (what ``render`` prints)."""
    if model.special.eos_id is None:
        return canvas
    eos = (canvas[prompt_length:] == model.special.eos_id).nonzero()
    return canvas if eos.numel() == 0 else canvas[:prompt_length + int(eos[0])]


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
    return model.tokenizer.decode(shown(model, canvas, prompt_length).tolist())


def warn_masks_left(canvas: torch.Tensor, mask_id: int, sampler_name: str) -> None:
    """Say so on stderr when the decode ends with masked positions (spec SQ1.3: LLaDA's schedule commits as many
    tokens per block as the block had masks, and masks inside the prompt compete for them)."""
    left = int((canvas == mask_id).sum())
    if left:
        why = ("LLaDA's schedule commits as many tokens per block as the block had masks, and the masks inside "
               "the prompt compete for them (as in the official generate.py); --sampler dream fills every mask"
               if sampler_name == "llada" else "the model proposed the mask token itself")
        print(f"veridec: note: {left} position(s) still masked: {why}", file=sys.stderr)
