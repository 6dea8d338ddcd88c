"""Fast-dLLM's parallel decoding without cache: a full forward per step (spec/fastdllm.md F1-F3).

Parameter names are the official ones (``steps``, ``gen_length``, ``block_length``, ``temperature``,
``remasking``, ``mask_id``, ``threshold``); returns ``Decoded(canvas, trace)`` where the official code returns
``(x, nfe)`` (``trace.counters.full_forwards`` is nfe).
"""

from __future__ import annotations

import torch

from veridec.canvas import initial_canvas
from veridec.rules.fastdllm import FastDLLMParams, block_quota, fastdllm_step, quota_at
from veridec.trace import Decoded, Trace, record_step


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, steps: int = 128,
             gen_length: int = 128, block_length: int = 128, temperature: float = 0.0,
             remasking: str = "low_confidence", mask_id: int | None = None, threshold: float | None = None, *,
             inclusive: bool = True, ties: str = "lowest", generator: torch.Generator | None = None,
             record_logits: bool = False) -> Decoded:
    params = FastDLLMParams(steps, gen_length, block_length, temperature, remasking, threshold, inclusive, ties)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    batch, prompt_len = prompt.shape
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    trace = Trace("fastdllm", {**params.__dict__, "mask_id": mask_id}, prompt_len, batch)
    positions = torch.arange(x.shape[1], device=x.device)[None]  # [1, L]
    for block in range(params.num_blocks):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        schedule = block_quota((x[:, start:end] == mask_id).sum(dim=1), params)
        step = 0
        while (x[:, start:end] == mask_id).any():
            if step > block_length + params.steps_per_block:  # every step commits unless the mask is predicted
                raise RuntimeError(f"block {block} stalled after {step} steps: the model predicts the mask token")
            logits = model(x, attention_mask=attention_mask).logits
            trace.counters.add_forward(rows=batch, queries=x.shape[1])
            candidates = (x == mask_id) & (positions < end)
            result = fastdllm_step(logits, x, candidates, params, quota_at(schedule, step), generator)
            record_step(trace, block, x, result.x, mask_id, result.confidence, result.choice_logits, result.order,
                        record_logits)
            x, step = result.x, step + 1
    return Decoded(x, trace)
