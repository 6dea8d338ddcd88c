"""LLaDA's sampler, slow and plain: one full forward of the whole canvas per step (spec/sequential.md SQ1).

Parameter names and defaults are the official ``generate``'s, so switching is an import away:

    from veridec.reference.llada import generate
    canvas, trace = generate(model, prompt, attention_mask, steps=128, gen_length=128, block_length=32)
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import initial_canvas
from veridec.decoding import check_logits
from veridec.rules.llada import LLaDAParams, check_special, llada_step, transfer_schedule
from veridec.trace import Decoded, Trace, record_step


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, steps: int = 128,
             gen_length: int = 128, block_length: int = 128, temperature: float = 0.0, cfg_scale: float = 0.0,
             remasking: str = "low_confidence", mask_id: int | None = None, logits_eos_inf: bool = False,
             confidence_eos_eot_inf: bool = False, *, tokens_per_step: int | None = None, ties: str = "lowest",
             generator: torch.Generator | None = None, record_logits: bool = False) -> Decoded:
    """Decode ``prompt`` [B, P] (left-padded with ``attention_mask`` [B, P]) -> Decoded(canvas [B, P + G], trace).

    Randomness comes from ``generator`` or, when None, torch's global RNG in the official order and shapes.
    """
    check_generator(generator)
    params = LLaDAParams(steps, gen_length, block_length, temperature, cfg_scale, remasking, logits_eos_inf,
                         confidence_eos_eot_inf, tokens_per_step, ties)
    check_special(params, model.special)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    batch, prompt_len = prompt.shape
    prompt_index = x != mask_id  # prompt and padding (masked in the unconditional branch)
    trace = Trace("llada", {**params.__dict__, "mask_id": mask_id}, prompt_len, batch)
    for block in range(params.num_blocks):
        start = prompt_len + block * block_length
        schedule = transfer_schedule((x[:, start: start + block_length] == mask_id).sum(dim=1), params)
        for step in range(schedule.shape[1]):
            logits = _logits(model, x, attention_mask, prompt_index, cfg_scale, mask_id, trace)
            check_logits(logits, trace.progress,
                         what="the logits" + (" after classifier-free guidance" if cfg_scale else ""))
            result = llada_step(logits, x, block_end=start + block_length, num_transfer=schedule[:, step],
                                params=params, special=model.special, mask_id=mask_id, generator=generator)
            record_step(trace, block, x, result.x, mask_id, result.confidence, result.choice_logits, result.order,
                        record_logits)
            x = result.x
    return Decoded(x, trace)


def _logits(model, x, attention_mask, prompt_index, cfg_scale, mask_id, trace):
    """One full forward (two stacked branches under classifier-free guidance) -> logits [B, L, V] (SQ1.5)."""
    if cfg_scale > 0:
        unconditional = x.masked_fill(prompt_index, mask_id)
        mask = None if attention_mask is None else torch.cat([attention_mask, attention_mask])
        both = model(torch.cat([x, unconditional]), attention_mask=mask).logits
        trace.counters.add_forward(rows=2 * x.shape[0], queries=x.shape[1])
        conditional, unconditional = torch.chunk(both, 2, dim=0)
        guided = unconditional + (cfg_scale + 1) * (conditional - unconditional)
        banned = torch.isneginf(conditional) & torch.isneginf(unconditional)  # the formula gives NaN there
        return guided.masked_fill(banned, -torch.inf)
    trace.counters.add_forward(rows=x.shape[0], queries=x.shape[1])
    return model(x, attention_mask=attention_mask).logits
