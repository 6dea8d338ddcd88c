"""WINO batched over rows, with or without a prefix cache (spec/wino.md WN8). The rule is the reference's
(``wino_step``, row by row); the forward is one call for all rows of a block:

- cache="none": every forward computes the whole canvas and its verification block (tier E against the
  reference at temperature 0; at temperature > 0 also for one row, whose draws come in the same order);
- cache="prefix": the block's first forward fills a K/V cache; the others recompute only the queries from the
  block's first candidate on (the block, the masks after it, the verification block) against the cached
  prefix, whose keys and values stay those of the block's first forward: not exact (the prefix's hidden
  states depend on the block's tokens, as in Fast-dLLM's prefix cache).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from veridec.checks import check_generator
from veridec.checks import check_choice
from veridec.decoding import check_llada_layout, check_logits
from veridec.events import EventDecoded, step_events
from veridec.rules.wino import (FIRST_LAST, WinoParams, check_block_bound, check_prompt,
                                forward_layout, wino_step)
from veridec.trace import Counters, Progress

CACHES = ("none", "prefix")


@torch.no_grad()
def generate(model, prompt: torch.Tensor, gen_length: int = 128, block_length: int = 128, temperature: float = 0.0,
             mask_id: int | None = None, threshold: float = 0.6, threshold_back: float = 0.9, *,
             cache: str = "none", ties: str = "lowest", generator: torch.Generator | None = None) -> EventDecoded:
    """Decode ``prompt`` [R, P]: every row as the reference decodes it, in one forward per step for all rows."""
    check_generator(generator)
    params = WinoParams(gen_length, block_length, temperature, threshold, threshold_back, ties)
    check_choice("cache", cache, CACHES)
    check_llada_layout(model)
    check_prompt(prompt)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    rows, prompt_len = prompt.shape
    width = params.block_length
    canvas = torch.full((rows, prompt_len + gen_length + width), mask_id, dtype=torch.long,
                        device=prompt.device)  # [R, N]
    canvas[:, :prompt_len] = prompt
    run = Run(canvas, [], [[] for _ in range(rows)], Counters())
    for block in range(params.num_blocks):
        _decode_block(model, run, block, prompt_len, params, mask_id, cache, generator)
    forwards = [len(m) for m in run.margins]
    return EventDecoded(run.canvas[:, : prompt_len + gen_length], run.events, forwards, run.margins,
                        run.counters)


@dataclass
class Run:
    canvas: torch.Tensor  # [R, N]
    events: list
    margins: list[list[float]]
    counters: Counters

    @property
    def progress(self) -> Progress:
        """The batch's steps (its longest row's) and model calls, as check_logits names them."""
        return Progress(max(map(len, self.margins)), self.counters.model_calls)


def _decode_block(model, run, block, prompt_len, params, mask_id, cache, generator):
    width, rows = params.block_length, run.canvas.shape[0]
    start = prompt_len + block * width
    positions, bias = forward_layout(prompt_len, params, block, run.canvas.device)  # [N], [N, N]
    candidates = run.canvas == mask_id  # [R, N]
    candidates[:, start + width:] = False
    verified = torch.zeros(rows, width, dtype=torch.bool, device=run.canvas.device)  # [R, B]
    last, bounds, taken = [FIRST_LAST] * rows, candidates.sum(dim=1).tolist(), [0] * rows
    first = int(candidates.any(dim=0).nonzero()[0, 0])  # the block's first candidate in any row, <= start
    forward = _Forward(model, positions, bias, first, cache, run.counters)
    while candidates.any():
        active = candidates.any(dim=1).nonzero()[:, 0].tolist()
        logits = forward(run.canvas, active)  # [R, N, V], rows outside ``active`` unused
        check_logits(logits[active], run.progress)
        for row in active:
            check_block_bound(taken[row], bounds[row], row, block)
            taken[row] += 1
            step = wino_step(logits[row], run.canvas[row], candidates[row], verified[row], last[row], start=start,
                             params=params, mask_id=mask_id, generator=generator)
            run.events += step_events(len(run.margins[row]), row, mask_id, step.commits, step.revokes)
            run.canvas[row], candidates[row], verified[row], last[row] = (step.canvas, step.candidates,
                                                                            step.verified, step.last)
            run.margins[row].append(step.margin)


class _Forward:
    """One block's forwards: full ones (cache="none", and the first of a prefix-cached block), then cached ones
    that recompute positions [first, N) of every row against the cache."""

    def __init__(self, model, positions, bias, first, cache, counters):
        self.model, self.positions, self.bias, self.first = model, positions, bias, first
        self.cache, self.counters, self.kv, self.logits = cache, counters, None, None

    def __call__(self, canvas: torch.Tensor, active: list[int]) -> torch.Tensor:
        rows, length = canvas.shape
        if self.cache == "none":
            out = self.model.raw_forward(canvas[active], self.positions.expand(len(active), -1),
                                         attn_bias=self.bias[None, None]).logits  # [A, N, V]
            logits = out.new_zeros(rows, *out.shape[1:])
            logits[active] = out
            self.counters.add_forward(rows=len(active), queries=length)
            return logits
        if self.kv is None:  # the block's first forward fills the cache
            self.kv = self.model.new_cache(rows, length)
            slots = torch.arange(length, device=canvas.device).expand(rows, -1)  # [R, N]
            self.logits = self.model.raw_forward(canvas, self.positions.expand(rows, -1),
                                                 attn_bias=self.bias[None, None], cache=self.kv, slots=slots).logits
            self.counters.add_forward(rows=rows, queries=length)
            return self.logits
        slots = torch.arange(self.first, length, device=canvas.device).expand(rows, -1)  # [R, W]
        window = self.model.raw_forward(canvas[:, self.first:], self.positions[self.first:].expand(rows, -1),
                                        attn_bias=self.bias[None, None, self.first:], cache=self.kv,
                                        slots=slots).logits  # [R, W, V]
        self.counters.add_forward(rows=rows, queries=length - self.first, full=False)
        self.logits = torch.cat([self.logits[:, : self.first], window], dim=1)  # stale below ``first``: no candidate
        return self.logits
