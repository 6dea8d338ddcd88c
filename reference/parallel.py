"""Every parallel rule, slow and plain: one full forward of the whole canvas per step (spec/parallel.md P1).

    from veridec.reference.parallel import decode
    from veridec.rules.presets import preset
    canvas, trace = decode(model, prompt, rule=preset("localleap"), gen_length=64, block_length=32)
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import initial_canvas
from veridec.decoding import (check_decode_args, check_logits, check_model_supports, check_progress, decode_params,
                              step_budget)
from veridec.models.interface import scoring_queries
from veridec.rules.parallel import new_state, symmetrized_dependency
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_step


@torch.no_grad()
def decode(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, rule,
           gen_length: int = 128, block_length: int = 32, temperature: float = 0.0,
           remasking: str = "low_confidence", mask_id: int | None = None, ties: str = "lowest",
           generator: torch.Generator | None = None, record_logits: bool = False, name: str | None = None,
           guide=None) -> Decoded:
    """Decode ``prompt`` [B, P] (left-padded with ``attention_mask``) in semi-AR blocks with ``rule``: each
    block runs full forwards until it has no mask left; candidates are the masks before the block's end.
    ``guide(x, logits, counters) -> logits``, when given, steers every step's logits (cached reward guidance,
    spec/guidance.md G7b)."""
    check_generator(generator)
    check_decode_args(gen_length, block_length, temperature, remasking, ties)
    check_model_supports(model, rule)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    batch, prompt_len = prompt.shape
    trace = Trace(name or rule.name, decode_params(rule, gen_length, block_length, temperature, remasking, mask_id),
                  prompt_len, batch)
    state = new_state(rule, batch, x.shape[1], x.device)
    positions = torch.arange(x.shape[1], device=x.device)  # [L]
    needs_attention = getattr(rule, "needs_attention", False)
    for block in range(gen_length // block_length):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        at_start = (x[:, start:end] == mask_id).sum(dim=1)  # [B]
        budget = step_budget((x == mask_id) & (positions < end)[None], rule,
                             sampled=temperature > 0 or remasking == "random")
        step = 0
        while (x[:, start:end] == mask_id).any():
            check_progress(step, block, budget, trace)
            out = model(x, attention_mask=attention_mask, output_attentions=True) if needs_attention else \
                model(x, attention_mask=attention_mask)
            trace.counters.add_forward(rows=batch, queries=x.shape[1])
            query = scoring_queries(x.shape[1], model.logit_shift, attention_mask, x.device)  # [B, L]
            dependency = symmetrized_dependency(out.attentions, rule, query, query) if needs_attention else None
            live = (x[:, start:end] == mask_id).any(dim=1, keepdim=True)  # [B, 1] rows still decoding the block
            candidates = (x == mask_id) & (positions < end)[None] & live  # [B, L]
            check_logits(out.logits, trace.progress, where=candidates)  # where the step acts (SQ0.6)
            logits = out.logits if guide is None else guide(x, out.logits, trace.counters)
            if guide is not None:
                check_logits(logits, trace.progress, what="the guided logits", where=candidates)
            result = parallel_step(rule, logits, x, candidates,
                                   temperature=temperature, remasking=remasking, ties=ties, generator=generator,
                                   block_step=step, block_masks_at_start=at_start,
                                   block_masks=(x[:, start:end] == mask_id).sum(dim=1), block_length=block_length,
                                   dependency=dependency, state=state)
            record_step(trace, block, x, result.x, mask_id, result.confidence, result.choice_logits, result.order,
                        record_logits)
            x, step = result.x, step + 1
    return Decoded(x, trace)
