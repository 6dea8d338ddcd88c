"""Fast-dLLM v2's loop with the exact prefix cache (spec/fastdllm_v2.md V2.10): the rows of a batch side by side,
each block's steps one cached forward of the whole block against the finished blocks' keys and values, the block
stored once complete (its last output giving the next boundary token). ``use_block_cache=True`` is the published
approximate block cache (V2.8, tier A): one row; a sub-block step recomputes only the sub-block against the block's
keys and values from the last refresh.

    from veridec.optimized.fastdllm_v2 import generate
    decoded = generate(model, prompt, max_new_tokens=64, small_block_size=8, threshold=0.9)
"""

from __future__ import annotations

import torch

from veridec.checks import check_flag, check_generator
from veridec.decoding import check_logits
from veridec.rules.fastdllm_v2 import (V2Params, boundary_token, check_v2_model, current_sub_block, stop_reached,
                                       sub_block_step, token_shift, v2_canvas)
from veridec.trace import Decoded, RowStep, Trace, record_rows

from .compiled import compiled


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, max_new_tokens: int,
             block_size: int = 32, small_block_size: int = 8, threshold: float = 1.0, temperature: float = 0.0,
             top_p: float = 0.95, stop_token: int | None = None, use_block_cache: bool = False,
             mask_id: int | None = None, generator: torch.Generator | None = None, record_logits: bool = False,
             compile: bool | dict = False) -> Decoded:
    """Decode left-padded prompts [B, P] as ``veridec.reference.fastdllm_v2.generate`` does (same canvas, same
    commits per row; one step per model call, the rows side by side). ``compile``: True (or torch.compile options)
    runs the block calls compiled, one graph per shape (``veridec.optimized.compiled``); the loop is the same."""
    check_generator(generator)
    check_flag("use_block_cache", use_block_cache)
    check_v2_model(model)
    model = compiled(model, compile)
    params = V2Params(max_new_tokens, block_size, small_block_size, threshold, temperature, top_p, stop_token)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    if use_block_cache and prompt.shape[0] > 1:
        raise ValueError("use_block_cache: one row at a time (the published refresh decision is taken over all rows "
                         "of a batch, so a row's output would depend on the others, V2.8)")
    stop = model.special.eos_id if stop_token is None else stop_token
    x, lengths, blocks = v2_canvas(model, prompt, attention_mask, params, mask_id)
    name = "fastdllm-v2-block-cache" if use_block_cache else "fastdllm-v2-prefix-cache"
    trace = Trace(name, {**params.__dict__, "stop_token": stop, "mask_id": mask_id, "use_block_cache": use_block_cache},
                  prompt.shape[1], prompt.shape[0])
    run = _Run(model, x, lengths, params, stop, mask_id, trace, generator, record_logits, use_block_cache)
    run.decode(blocks)
    return Decoded(x, trace)


class _Run:
    """One decode's state: the canvas x [B, T], the static cache of finished blocks, which rows have stopped."""

    def __init__(self, model, x, lengths, params: V2Params, stop, mask_id, trace, generator, record_logits,
                 block_cache):
        self.model, self.x, self.lengths, self.params = model, x, lengths, params
        self.stop, self.mask_id, self.trace, self.generator = stop, mask_id, trace, generator
        self.record_logits, self.block_cache = record_logits, block_cache
        self.rows = x.shape[0]
        self.cache = model.block_cache(self.rows, x.shape[1] - 1)
        self.stopped = [False] * self.rows

    def decode(self, blocks: int) -> None:
        b = self.params.block_size
        first = min(self.lengths) // b
        if first:  # V2.3: the whole blocks every prompt fills, in one forward
            self._store(0, first * b)
        for block in range(first, blocks):
            if all(self.stopped):
                return
            self._decode_block(block * b, (block + 1) * b)
            if all(self.stopped):
                return
            self._store(block * b, (block + 1) * b)

    def _store(self, start: int, end: int) -> None:
        """V2.7: blocks start..end written into the cache; each row whose next position is a mask gets its boundary
        token there (the argmax of the last output), unless it has stopped."""
        raw = self.model.forward_blocks(self.x[:, start:end], start, self.cache, self.params.block_size,
                                        store=True).logits  # [B, W, V] raw: query j scores token start + j + 1
        self.trace.counters.add_forward(rows=self.rows, queries=end - start, full=False)
        last = raw[:, -1]  # [B, V] scores position end
        check_logits(last[:, None], self.trace.progress, offset=end)
        records = [self._boundary(row, end, last[row]) for row in range(self.rows)]
        self._record(end // self.params.block_size - 1, records)  # the step of the last block stored

    def _boundary(self, row: int, position: int, logits: torch.Tensor) -> RowStep:
        if self.stopped[row] or self.x[row, position] != self.mask_id:
            return self._empty()
        self.x[row, position], record = boundary_token(logits, position, self.record_logits)
        self._check_stop(row)
        return record

    def _decode_block(self, start: int, end: int) -> None:
        """V2.4-V2.6: steps until every live row's block is complete, each row in its own current sub-block."""
        fresh = None  # the sub-block whose block cache is current (use_block_cache)
        while True:
            subs = [None if self.stopped[row] else current_sub_block(self.x[row, start:end] == self.mask_id,
                                                                     self.params.small_block_size)
                    for row in range(self.rows)]
            if all(sub is None for sub in subs):
                return
            if self.block_cache:
                logits, fresh = self._block_cache_logits(start, end, subs[0], fresh)
            else:
                logits = self._block_logits(start, end)
            self._step(start, subs, logits)

    def _block_logits(self, start: int, end: int) -> torch.Tensor:
        """The whole block against the cache (not stored), token-shifted: [B, b, V] (V2.5)."""
        raw = self.model.forward_blocks(self.x[:, start:end], start, self.cache, self.params.block_size,
                                        store=False).logits
        self.trace.counters.add_forward(rows=self.rows, queries=end - start, full=False)
        return token_shift(raw)

    def _block_cache_logits(self, start: int, end: int, sub: int, fresh):
        """V2.8, one row: a refresh (the whole block, its keys and values written into the cache's slots of the
        block) at the block's first step and while the sub-block's first position is a mask; else the sub-block
        alone against the finished blocks and the block's keys and values, its own rewritten. Returns the logits of
        the whole block's width [1, b, V] (those outside the sub-block unused) and the refreshed marker."""
        s = self.params.small_block_size
        lo, hi = start + sub * s, start + (sub + 1) * s
        if fresh is None or self.x[0, lo] == self.mask_id:
            raw = self.model.forward_blocks(self.x[:, start:end], start, self.cache, self.params.block_size,
                                            store=True).logits
            self.trace.counters.add_forward(rows=1, queries=end - start, full=False)
            return token_shift(raw), sub
        positions = torch.arange(lo, hi, device=self.x.device)[None]  # [1, s]
        visible = torch.arange(self.cache.length, device=self.x.device) < end  # [L] the finished blocks and this one
        bias = torch.zeros(self.cache.length, device=self.x.device).masked_fill(~visible, float("-inf"))[None, None,
                                                                                                        None]
        raw = self.model.forward_cached(self.x[:, lo:hi], positions, self.cache, write=True, attn_bias=bias,
                                        check=False).logits  # [1, s, V]
        self.trace.counters.add_forward(rows=1, queries=s, full=False)
        logits = torch.zeros(1, end - start, raw.shape[-1], dtype=raw.dtype, device=raw.device)  # [1, b, V]
        logits[:, lo - start:hi - start] = token_shift(raw)  # the published shift inside the sub-block
        return logits, fresh

    def _step(self, start: int, subs: list, logits: torch.Tensor) -> None:
        s = self.params.small_block_size
        records = []
        for row, sub in enumerate(subs):
            if sub is None:
                records.append(self._empty())
                continue
            lo, hi = start + sub * s, start + (sub + 1) * s
            check_logits(logits[row:row + 1, lo - start:hi - start], self.trace.progress, offset=lo)
            self.x[row, lo:hi], record = sub_block_step(logits[row, lo - start:hi - start], self.x[row, lo:hi],
                                                        self.x[row, lo:hi] == self.mask_id, self.params, lo,
                                                        self.mask_id, self.generator, self.record_logits)
            records.append(record)
            self._check_stop(row)
        self._record(start // self.params.block_size, records)

    def _check_stop(self, row: int) -> None:
        self.stopped[row] = stop_reached(self.x[row, self.lengths[row]:], self.stop, self.mask_id)

    def _empty(self) -> RowStep:
        return RowStep([], [], [], [], float("inf"), [] if self.record_logits else None)

    def _record(self, block: int, records: list) -> None:
        record_rows(self.trace, block, records, self.record_logits)
