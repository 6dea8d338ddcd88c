"""Fast-dLLM v2's loop, slow and plain (spec/fastdllm_v2.md): each row on its own, each step a full block-causal
forward of the canvas up to the block's end, no cache. Parameter names and defaults are the published ``generate``'s:

    from veridec.reference.fastdllm_v2 import generate
    decoded = generate(model, prompt, max_new_tokens=64, small_block_size=8, threshold=0.9)
    decoded.canvas, decoded.trace
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.decoding import check_logits
from veridec.rules.fastdllm_v2 import (V2Params, boundary_token, check_v2_model, current_sub_block, stop_reached,
                                       sub_block_step, v2_canvas)
from veridec.trace import Decoded, RowStep, Trace, record_rows


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, max_new_tokens: int,
             block_size: int = 32, small_block_size: int = 8, threshold: float = 1.0, temperature: float = 0.0,
             top_p: float = 0.95, stop_token: int | None = None, mask_id: int | None = None,
             generator: torch.Generator | None = None, record_logits: bool = False) -> Decoded:
    """Decode left-padded prompts [B, P] (V2.3-V2.9); returns the canvas [B, T] (row b: its prompt from position 0,
    then the generation; positions after a row's stop stay as they were) and the trace (the rows one after the
    other, one step per model call: sub-block steps and boundary tokens)."""
    check_generator(generator)
    check_v2_model(model)
    params = V2Params(max_new_tokens, block_size, small_block_size, threshold, temperature, top_p, stop_token)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    stop = model.special.eos_id if stop_token is None else stop_token
    x, lengths, blocks = v2_canvas(model, prompt, attention_mask, params, mask_id)
    trace = Trace("fastdllm-v2-reference", {**params.__dict__, "stop_token": stop, "mask_id": mask_id},
                  prompt.shape[1], prompt.shape[0])
    for row, length in enumerate(lengths):
        _decode_row(model, x[row:row + 1], length, blocks, params, stop, mask_id, trace, row, generator, record_logits)
    return Decoded(x, trace)


def _decode_row(model, x, length: int, blocks: int, params: V2Params, stop: int, mask_id: int, trace: Trace,
                row: int, generator, record_logits: bool) -> None:
    """One row x [1, T] (a view of the canvas) from the block holding its first generated position (V2.3)."""
    b, s = params.block_size, params.small_block_size
    for block in range(length // b, blocks):
        start, end = block * b, (block + 1) * b
        if x[0, start] == mask_id and _boundary(model, x, start, params, stop, mask_id, trace, (row, length),
                                                record_logits):
            return  # V2.7: a prompt of whole blocks; the stop may be this very token
        while (sub := current_sub_block(x[0, start:end] == mask_id, s)) is not None:
            logits = model(x[:, :end], block_size=b).logits[0, start:end]  # [b, V] token-aligned (V2.1)
            trace.counters.add_forward(rows=1, queries=end)
            check_logits(logits[None], trace.progress, offset=start)
            lo, hi = start + sub * s, start + (sub + 1) * s
            x[0, lo:hi], record = sub_block_step(logits[lo - start:hi - start], x[0, lo:hi], x[0, lo:hi] == mask_id,
                                                 params, lo, mask_id, generator, record_logits)
            _record(trace, block, row, record, record_logits)
            if stop_reached(x[0, length:], stop, mask_id):
                return
        if _boundary(model, x, end, params, stop, mask_id, trace, (row, length), record_logits):
            return


def _boundary(model, x, position: int, params: V2Params, stop: int, mask_id: int, trace: Trace, where: tuple,
              record_logits: bool) -> bool:
    """V2.7: the token at ``position`` (a block's first) is the argmax of the output at ``position - 1``, from a
    block-causal forward of the canvas before it (at every temperature); returns whether the row (``where``: its
    index and prompt length) stops there."""
    row, length = where
    logits = model(x[:, :position + 1], block_size=params.block_size).logits[0, position]  # [V]
    trace.counters.add_forward(rows=1, queries=position + 1)
    check_logits(logits[None, None], trace.progress, offset=position)
    x[0, position], record = boundary_token(logits, position, record_logits)
    _record(trace, position // params.block_size - 1, row, record, record_logits)  # the block before it
    return stop_reached(x[0, length:], stop, mask_id)


def _record(trace: Trace, block: int, row: int, record: RowStep, record_logits: bool) -> None:
    """The step of one row, the other rows empty (the reference decodes rows one after the other)."""
    empty = RowStep([], [], [], [], float("inf"), [] if record_logits else None)
    record_rows(trace, block, [record if r == row else empty for r in range(trace.batch_size)], record_logits)
