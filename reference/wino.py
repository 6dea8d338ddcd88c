"""WINO's decoder, slow and plain (spec/wino.md): one forward of the canvas and its verification block per
step; tokens drafted in one step can be revoked in a later one.

Parameter names and defaults are the official ``decoding_wino``'s:

    from veridec.reference.wino import generate
    result = generate(model, prompt, gen_length=128, block_length=128, threshold=0.6, threshold_back=0.9)
    result.canvas, result.events, result.forwards
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.decoding import check_llada_layout, check_logits
from veridec.events import EventDecoded, step_events
from veridec.rules.wino import (FIRST_LAST, WinoParams, check_block_bound, check_prompt,
                                forward_layout, wino_step)
from veridec.trace import Counters, Progress


@torch.no_grad()
def generate(model, prompt: torch.Tensor, gen_length: int = 128, block_length: int = 128, temperature: float = 0.0,
             mask_id: int | None = None, threshold: float = 0.6, threshold_back: float = 0.9, *,
             ties: str = "lowest", generator: torch.Generator | None = None) -> EventDecoded:
    """Decode each row of ``prompt`` [R, P] as the official function decodes it alone (WN1)."""
    check_generator(generator)
    params = WinoParams(gen_length, block_length, temperature, threshold, threshold_back, ties)
    check_llada_layout(model)
    check_prompt(prompt)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    counters, events, canvases, forwards, margins = Counters(), [], [], [], []
    for row in range(prompt.shape[0]):
        canvas, row_margins = _decode_row(model, prompt[row], params, mask_id, generator, row, events, counters)
        canvases.append(canvas)
        forwards.append(len(row_margins))
        margins.append(row_margins)
    return EventDecoded(torch.stack(canvases), events, forwards, margins, counters)


def _decode_row(model, prompt, params, mask_id, generator, row, events, counters):
    prompt_len, width = prompt.shape[0], params.block_length
    canvas = torch.full((prompt_len + params.gen_length + width,), mask_id, dtype=torch.long,
                        device=prompt.device)  # [N]
    canvas[:prompt_len] = prompt
    margins = []
    for block in range(params.num_blocks):
        start = prompt_len + block * width
        positions, bias = forward_layout(prompt_len, params, block, canvas.device)  # [N], [N, N]
        candidates = canvas == mask_id  # [N]
        candidates[start + width:] = False
        verified = torch.zeros(width, dtype=torch.bool, device=canvas.device)  # [B]
        last, bound, taken = FIRST_LAST, int(candidates.sum()), 0
        while candidates.any():
            check_block_bound(taken, bound, row, block)
            taken += 1
            logits = model.raw_forward(canvas[None], positions[None], attn_bias=bias[None, None]).logits[0]
            counters.add_forward(rows=1, queries=canvas.shape[0])
            check_logits(logits[None], Progress(len(margins), counters.model_calls))
            step = wino_step(logits, canvas, candidates, verified, last, start=start, params=params,
                             mask_id=mask_id, generator=generator)
            events += step_events(len(margins), row, mask_id, step.commits, step.revokes)
            canvas, candidates, verified, last = step.canvas, step.candidates, step.verified, step.last
            margins.append(step.margin)
    return canvas[: prompt_len + params.gen_length], margins

