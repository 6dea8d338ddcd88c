"""FastGuide with exact recomputation (spec/guidance.md GF2): Algorithm 1 where every recomputation is a full
forward of the canvas. The reference the sparse decoder (``veridec.optimized.fastguide``) is held against.
"""

from __future__ import annotations

import torch

from veridec.guidance.fastguide import FastGuideParams, hybrid_step, start
from veridec.guidance.guide import GuidanceParams
from veridec.trace import Decoded


class ExactRecompute:
    """Every recomputation is a full forward of the canvas (response logits)."""

    def __init__(self, model, attention_mask, prompt_len: int, counters):
        self.model, self.attention_mask, self.prompt_len, self.counters = model, attention_mask, prompt_len, counters

    def full(self, x: torch.Tensor) -> torch.Tensor:
        self.counters.add_forward(rows=x.shape[0], queries=x.shape[1])
        return self.model(x, attention_mask=self.attention_mask).logits[:, self.prompt_len:]

    def candidate(self, x: torch.Tensor, previous: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        return self.full(x)[torch.arange(x.shape[0], device=x.device), slot]


@torch.no_grad()
def generate(model, prompt: torch.Tensor, reward, prompt_texts: list[str], attention_mask=None, *,
             gen_length: int = 128, params: FastGuideParams = FastGuideParams(),
             guidance: GuidanceParams = GuidanceParams(), generator: torch.Generator | None = None) -> Decoded:
    """Decode ``prompt`` [B, P] with FastGuide, exact recomputation; one trace step per hybrid step."""
    x, attention_mask, bound, trace = start("fastguide-exact", model, prompt, reward, prompt_texts, attention_mask,
                                           gen_length, params, guidance, generator)
    mask_id, prompt_len = model.special.mask_id, prompt.shape[1]
    recomputer = ExactRecompute(model, attention_mask, prompt_len, trace.counters)
    while (x[:, prompt_len:] == mask_id).any():
        x = hybrid_step(x, prompt_len, recomputer, bound, params, guidance, mask_id, trace, generator)
    return Decoded(x, trace)
