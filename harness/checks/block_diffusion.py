"""Verify checks for block diffusion (spec/block_diffusion.md BD8): the cached, batched decoder against the
reference, on random SDAR-layout models of two sizes built here on the CPU (veridec verify's model is not
block-causal; the check is of the decoders' logic, whatever --device says)."""

from __future__ import annotations

import torch

from veridec.models import random_model
from veridec.optimized.block_diffusion import block_diffusion_generate as cached_generate
from veridec.reference.block_diffusion import block_diffusion_generate as reference_generate

from .registry import VerifyContext, check

SIZES = {"tiny": dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48),
         "wider": dict(num_layers=4, hidden_size=128, num_heads=8, num_kv_heads=4, intermediate_size=256)}
SETTINGS = {"greedy": dict(temperature=0.0, remasking_strategy="low_confidence_static"),
            "sampled": dict(temperature=1.0, top_k=5, remasking_strategy="low_confidence_dynamic",
                            confidence_threshold=0.3)}


@check("block-diffusion/cached-batch-equals-reference",
       "BD8: a left-padded batch of 4 through the cached decoder = each row alone through the reference (float64)")
def cached_batch_equals_reference(ctx: VerifyContext):
    cases, failed = 0, []
    for size, dims in SIZES.items():
        model = random_model("sdar", 14 + ctx.seed, dtype=torch.float64, **dims)
        prompts = _prompts(ctx, model)
        for name, sampling in SETTINGS.items():
            settings = dict(gen_length=10, block_length=4, denoising_steps=3, **sampling)
            cases += len(prompts)
            failed += [f"{size}/{name}/row {row}" for row in _rows_differing(model, prompts, settings)]
    return cases, not failed, None, "", ("rows differ: " + ", ".join(failed)) if failed else \
        "2 model sizes x greedy and sampled, 4 prompts of 2-9 tokens, gen 10, block 4, 3 steps"


def _prompts(ctx: VerifyContext, model) -> list[list[int]]:
    """Four prompts of distinct lengths (one shorter than a block, one of whole blocks), drawn on the host."""
    g = ctx.generator(31)
    return [torch.randint(0, model.special.mask_id, (length,), generator=g, device="cpu").tolist()
            for length in (2, 4, 6, 9)]


def _rows_differing(model, prompts: list[list[int]], settings: dict) -> list[int]:
    """The rows whose canvas in the batch (after its padding) is not the reference's for that row alone; one
    generator per row, the same seed on both sides."""
    mask_id, pad_id, width = model.special.mask_id, model.special.pad_id, max(map(len, prompts))
    x = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device="cpu")  # [4, P]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device="cpu")  # [4, P]
    seeded = lambda row: torch.Generator().manual_seed(40 + row)  # noqa: E731
    batch = cached_generate(model, x, mask_id, attention_mask=mask, **settings,
                            generator=[seeded(row) for row in range(len(prompts))]).canvas  # [4, W]
    differing = []
    for row, prompt in enumerate(prompts):
        alone = reference_generate(model, torch.tensor([prompt], device="cpu"), mask_id, **settings,
                                   generator=seeded(row)).canvas[0]  # [T]
        pad = width - len(prompt)
        if not torch.equal(batch[row, pad:pad + alone.shape[0]], alone):
            differing.append(row)
    return differing
