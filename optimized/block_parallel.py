"""veridec's parallel rules inside the blocks of a block-diffusion model, cached and batched (spec/block_diffusion.md
BD11): the canvas, padding, prefill, block cache and stores of ``veridec.optimized.block_diffusion`` (BD8), each
block's steps taken by ``parallel_step`` (spec/parallel.md P1) on the block's logits.

    from veridec.optimized.block_parallel import parallel_generate
    from veridec.rules.presets import preset
    decoded = parallel_generate(model, prompt, attention_mask, rule=preset("fastdllm"), gen_length=64,
                                block_length=8)
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.decoding import (check_block_rule, check_logits, check_progress, check_sampling, decode_params,
                              step_budget)
from veridec.rules.parallel import new_state
from veridec.rules.sdar import SDARParams
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_step

from . import block_diffusion
from .block_diffusion import layout_canvas, row_layout
from .compiled import compiled


@torch.no_grad()
def parallel_generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, rule,
                      gen_length: int = 128, block_length: int = 8, temperature: float = 0.0,
                      remasking: str = "low_confidence", ties: str = "lowest", stopping_criteria_idx=None,
                      mask_id: int | None = None, generator: torch.Generator | None = None,
                      record_logits: bool = False, compile: bool | dict = False) -> Decoded:
    """Decode ``prompt`` [B, P] (left padding where ``attention_mask`` is 0) with ``rule`` in blocks of
    ``block_length``; returns each row's canvas after its padding as given (BD8.2's layout) and the trace. At
    temperature 0 every row equals its ``veridec.reference.block_diffusion.parallel_generate`` decode; sampled,
    the batch draws over [B, b, V] with one generator (a row alone draws over [1, b, V]). ``compile``: the block
    calls compiled (``veridec.optimized.compiled``), the loop and the rule the same."""
    check_generator(generator)
    check_sampling(temperature, remasking, ties)
    check_block_rule(rule)
    params = SDARParams(gen_length, block_length, stopping_criteria_idx=stopping_criteria_idx, ties=ties)
    model = compiled(model, compile)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    layout = row_layout(prompt, attention_mask, params, model.max_length)
    x = layout_canvas(layout, mask_id, prompt.device)  # [B, T]
    trace = Trace(f"{rule.name}-blocks-cached",
                  decode_params(rule, gen_length, block_length, temperature, remasking, mask_id), prompt.shape[1],
                  x.shape[0])
    sampling = dict(temperature=temperature, remasking=remasking, ties=ties, generator=generator)
    run = Run(model, params, layout, x, mask_id, trace, rule, sampling, record_logits)
    return run.decode(prompt)


class Run(block_diffusion.Run):
    """``block_diffusion.Run`` whose blocks are decoded by a parallel rule; ``state``: the rule's memory over the
    canvas."""

    def __init__(self, model, params, layout, x, mask_id, trace, rule, sampling: dict, record_logits: bool):
        super().__init__(model, params, layout, x, mask_id, trace, [sampling["generator"]] * x.shape[0],
                         record_logits=record_logits)
        self.rule, self.sampling, self.state = rule, sampling, new_state(rule, *x.shape, x.device)

    def decode_block(self, block: int) -> bool:
        """The rule's steps while a live row has masks in the block (rows whose block is done wait), then the
        store; False when no row goes on."""
        b = self.params.block_length
        start, end = block * b, (block + 1) * b
        live = self.live_rows(end)  # [B]
        if not live.any():
            return False
        sampled = self.sampling["temperature"] > 0 or self.sampling["remasking"] == "random"
        at_start = (self.x[:, start:end] == self.mask_id).sum(dim=1)  # [B]
        budget = step_budget((self.x[:, start:end] == self.mask_id) & live[:, None], self.rule, sampled)
        step = 0
        while (candidates := (self.x[:, start:end] == self.mask_id) & live[:, None]).any():  # [B, b]
            check_progress(step, block, budget, self.trace)
            logits = self.forward(start, b, store=False)  # [B, b, V]
            check_logits(logits, self.trace.progress, where=candidates, offset=start)
            result = parallel_step(self.rule, logits, self.x[:, start:end], candidates, **self.sampling,
                                   offset=start, block_step=step, block_masks_at_start=at_start,
                                   block_masks=candidates.sum(dim=1), block_length=b, state=self.state)
            record_step(self.trace, block, self.x[:, start:end], result.x, self.mask_id, result.confidence,
                        result.choice_logits, result.order, self.record_logits,
                        offset=[start + shift for shift in self.offset])  # in the output's layout
            self.x[:, start:end], step = result.x, step + 1
        self.forward(start, b, store=True)
        self.update_stops(live, end)
        return True
