"""Tiny random models in the official layouts (LLaDA, Dream, SDAR), so tests exercise the real loading code.

Weights are random but not degenerate: norm weights and q/k/v biases are perturbed away from 1 and 0, so a
mapping mistake between two tensors of the same shape changes the logits and is caught.
"""

from __future__ import annotations

import types

from pathlib import Path

import torch

from .checkpoint import save_pretrained
from .interface import SpecialTokens
from .layouts import LAYOUTS
from .transformer import BidirectionalTransformer, TransformerConfig

TINY_SIZES = dict(hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
LAYOUT_OPTIONS = {"llada": {}, "dream": dict(qkv_bias=True), "fastdllm_v2": dict(qkv_bias=True),
                  "sdar": dict(qk_norm=True, explicit_head_dim=16)}  # SDAR: head_dim apart from hidden / heads


def random_model(layout: str = "llada", seed: int = 0, dtype: torch.dtype = torch.float32,
                 vocab_size: int | None = None, **sizes) -> BidirectionalTransformer:
    """A randomly initialised model of ``layout`` (a name of ``LAYOUTS``) with the character tokenizer attached.

    ``sizes`` override TINY_SIZES and other TransformerConfig fields; ``vocab_size`` defaults to the
    tokenizer's length rounded up to a multiple of 4 (an embedding padded past the tokenizer, like LLaDA's).
    """
    from .tokenizer import char_tokenizer  # transformers (1.2 s) loads with the first tokenizer, not with veridec

    facts = LAYOUTS[layout]
    tokenizer = char_tokenizer(layout)
    vocab = vocab_size or -(-len(tokenizer) // 4) * 4
    cfg = TransformerConfig(vocab_size=vocab, **{**TINY_SIZES, **LAYOUT_OPTIONS[layout], **sizes})
    special = SpecialTokens(mask_id=tokenizer.mask_token_id, eos_id=tokenizer.eos_token_id,
                            eot_id=tokenizer.convert_tokens_to_ids(facts.eot_token), pad_id=tokenizer.pad_token_id)
    model = BidirectionalTransformer(cfg, special, layout, facts.logit_shift)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float64, device=generator.device)
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * noise)
            elif name.endswith(".bias"):
                param.copy_(0.2 * noise)
            elif name == "embed.weight":
                param.copy_(noise)
            else:
                param.copy_(noise / param.shape[1] ** 0.5)
    model.tokenizer = tokenizer
    return model.to(dtype).eval()


def write_tiny_checkpoint(folder: str | Path, layout: str = "llada", seed: int = 0,
                          dtype: torch.dtype = torch.float32, max_shard_bytes: int | None = None,
                          **sizes) -> Path:
    """Write a random tiny model as an official-layout folder; returns the folder."""
    return save_pretrained(random_model(layout, seed, dtype, **sizes), folder, max_shard_bytes=max_shard_bytes)


def never_predicts_mask(model):
    """Random tiny models give the mask token real probability (trained ones do not), and a decoder whose
    model proposes the mask keeps the position masked. This patches the model's core forward so the mask
    token's logit is -inf everywhere (full, prefill and cached forwards alike). Returns the model; a copy
    (``copy.deepcopy``, as precision reruns make) carries the patch on its own weights."""
    model.raw_forward = types.MethodType(_raw_forward_without_mask, model)
    return model


def _raw_forward_without_mask(self, *args, **kwargs):
    out = type(self).raw_forward(self, *args, **kwargs)
    out.logits[..., self.special.mask_id] = -torch.inf
    return out
