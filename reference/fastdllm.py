"""Fast-dLLM's parallel decoding without cache: a full forward per step (spec/fastdllm.md FD1-FD4).

Parameter names are the official ones (``steps``, ``gen_length``, ``block_length``, ``temperature``,
``remasking``, ``mask_id``, ``threshold``, ``factor``); returns ``Decoded(canvas, trace)`` where the official
code returns ``(x, nfe)`` (``trace.counters.full_forwards`` is nfe).
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.rules.fastdllm import FastDLLMParams

from .parallel import decode


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, steps: int = 128,
             gen_length: int = 128, block_length: int = 128, temperature: float = 0.0,
             remasking: str = "low_confidence", mask_id: int | None = None, threshold: float | None = None,
             factor: float | None = None, *, inclusive: bool = True, last_rank: str = "commit", ties: str = "lowest",
             generator: torch.Generator | None = None, record_logits: bool = False):
    check_generator(generator)
    params = FastDLLMParams(steps, gen_length, block_length, temperature, remasking, threshold, factor, inclusive,
                            last_rank, ties)
    return decode(model, prompt, attention_mask, rule=params.rule, gen_length=gen_length, block_length=block_length,
                  temperature=temperature, remasking=remasking, mask_id=mask_id, ties=ties, generator=generator,
                  record_logits=record_logits, name="fastdllm")
