"""Block diffusion, SDAR / TraDo's ``block_diffusion_generate``, slow and plain (spec/block_diffusion.md): one row,
the canvas rounded up to whole blocks, each block denoised by full block-causal forwards of the canvas up to
its end, no cache. Parameter names and defaults are the official ones:

    from veridec.reference.block_diffusion import block_diffusion_generate
    decoded = block_diffusion_generate(model, prompt, gen_length=16, block_length=4, denoising_steps=4)
    decoded.canvas, decoded.trace

``parallel_generate`` runs veridec's parallel rules (spec/parallel.md) inside the same blocks (BD11).
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import whole_blocks
from veridec.checks import check_integer
from veridec.decoding import (check_block_rule, check_logits, check_progress, check_sampling, decode_params,
                              step_budget)
from veridec.rules.parallel import new_state
from veridec.rules.sdar import SDARParams, row_record, sample_block, select
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_rows, record_step


@torch.no_grad()
def block_diffusion_generate(model, prompt: torch.Tensor, mask_id: int | None = None, gen_length: int = 128,
                             block_length: int = 8, denoising_steps: int = 8, temperature: float = 1.0,
                             top_k: int = 0, top_p: float = 1.0,
                             remasking_strategy: str = "low_confidence_dynamic", confidence_threshold: float = 0.85,
                             eb_threshold: float | None = None, stopping_criteria_idx=None, *, ties: str = "lowest",
                             generator: torch.Generator | None = None, record_logits: bool = False,
                             after_schedule: str = "commit") -> Decoded:
    """Decode one row ``prompt`` [1, P] (BD1-BD6); returns the whole canvas [1, T], T = P + gen_length rounded up
    to whole blocks (blocks after a stop token stay masked), and its trace (one step per denoising forward;
    ``record_logits``: with the logits at each committed position). ``after_schedule="leave"``: a block whose
    schedule is spent keeps its masks (LLaDA2.0's loop, BD12) instead of BD6.2's extra step."""
    check_generator(generator)
    params = SDARParams(gen_length, block_length, denoising_steps, temperature, top_k, top_p, remasking_strategy,
                        confidence_threshold, eb_threshold, stopping_criteria_idx, ties, after_schedule)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x = one_row_canvas(model, prompt, gen_length, block_length, mask_id)  # [1, T]
    length = x.shape[1]
    trace = Trace("block-diffusion-reference", {**params.__dict__, "mask_id": mask_id}, prompt.shape[1], 1)
    for block in range(prompt.shape[1] // block_length, length // block_length):
        _decode_block(model, x, block, params, mask_id, trace, generator, record_logits)
        if _stopped(x[0, prompt.shape[1]:], params.stopping_criteria_idx):
            break
    return Decoded(x, trace)


def one_row_canvas(model, prompt: torch.Tensor, gen_length: int, block_length: int, mask_id: int) -> torch.Tensor:
    """BD2: one row ``prompt`` [1, P], then masks up to whole blocks -> the canvas [1, T]."""
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be one row [1, P] with P >= 1 (the optimized decoder takes batches), got "
                         f"{tuple(prompt.shape)}")
    length = whole_blocks(prompt.shape[1] + gen_length, block_length)
    if length > model.max_length:
        raise ValueError(f"prompt {prompt.shape[1]} + gen_length {gen_length}, rounded up to whole blocks of "
                         f"{block_length}, exceeds the model's max_length {model.max_length}")
    x = torch.full((1, length), mask_id, dtype=torch.long, device=prompt.device)  # [1, T]
    x[:, :prompt.shape[1]] = prompt
    return x


def _decode_block(model, x, block: int, params: SDARParams, mask_id: int, trace: Trace, generator,
                  record_logits: bool = False) -> None:
    """BD5: the schedule's steps while the block has masks; then, if a sampled mask token left some, one more
    step that commits every mask left, the mask token banned (BD6.2), or none (``after_schedule="leave"``)."""
    b = params.block_length
    start, end = block * b, (block + 1) * b
    step = 0
    while (masked := x[0, start:end] == mask_id).any():
        check_progress(step, block, params.denoising_steps, trace)  # BD6.2 bans the mask: S + 1 steps at most
        past = step >= params.denoising_steps
        if past and params.after_schedule == "leave":
            break
        logits = model(x[:, :end], block_size=b).logits[:, start:]  # [1, b, V]
        trace.counters.add_forward(rows=1, queries=end)
        check_logits(logits, trace.progress, offset=start)
        x0, x0_p, probs = sample_block(logits[0], params.temperature, params.top_k, params.top_p, generator,
                                       banned=mask_id if past else None)
        transfer = masked if past else select(params, masked, x0_p, probs, params.schedule[step])
        row = row_record(masked, transfer, x0, x0_p, logits[0], start, mask_id, record_logits)
        record_rows(trace, block, [row], record_logits)
        x[0, start:end] = torch.where(transfer & masked, x0, x[0, start:end])
        step += 1


def _stopped(generated: torch.Tensor, stops) -> bool:
    """BD5.6: a stop id anywhere in the generated region (checked after each block)."""
    return stops is not None and any(bool((generated == stop).any()) for stop in stops)


@torch.no_grad()
def parallel_generate(model, prompt: torch.Tensor, *, rule, gen_length: int = 128, block_length: int = 8,
                      temperature: float = 0.0, remasking: str = "low_confidence", ties: str = "lowest",
                      stopping_criteria_idx=None, mask_id: int | None = None, generator: torch.Generator | None = None,
                      record_logits: bool = False) -> Decoded:
    """BD11: one row ``prompt`` [1, P] on BD2's canvas, each block decoded by ``rule``'s steps (``parallel_step``)
    on full block-causal forwards of the canvas up to the block's end; returns the canvas [1, T] and its trace."""
    check_generator(generator)
    check_sampling(temperature, remasking, ties)
    check_block_rule(rule)
    params = SDARParams(gen_length, block_length, stopping_criteria_idx=stopping_criteria_idx, ties=ties)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x = one_row_canvas(model, prompt, gen_length, block_length, mask_id)  # [1, T]
    length = x.shape[1]
    trace = Trace(f"{rule.name}-blocks-reference",
                  decode_params(rule, gen_length, block_length, temperature, remasking, mask_id), prompt.shape[1], 1)
    state = new_state(rule, 1, length, x.device)
    sampling = dict(temperature=temperature, remasking=remasking, ties=ties, generator=generator)
    for block in range(prompt.shape[1] // block_length, length // block_length):
        start, end = block * block_length, (block + 1) * block_length
        at_start = (x[:, start:end] == mask_id).sum(dim=1)  # [1]
        budget = step_budget(x[:, start:end] == mask_id, rule, temperature > 0 or remasking == "random")
        step = 0
        while (candidates := x[:, start:end] == mask_id).any():  # [1, b]
            check_progress(step, block, budget, trace)
            logits = model(x[:, :end], block_size=block_length).logits[:, start:]  # [1, b, V]
            trace.counters.add_forward(rows=1, queries=end)
            check_logits(logits, trace.progress, where=candidates, offset=start)
            result = parallel_step(rule, logits, x[:, start:end], candidates, **sampling, offset=start,
                                   block_step=step, block_masks_at_start=at_start, block_masks=candidates.sum(dim=1),
                                   block_length=block_length, state=state)
            record_step(trace, block, x[:, start:end], result.x, mask_id, result.confidence, result.choice_logits,
                        result.order, record_logits, offset=start)
            x[:, start:end], step = result.x, step + 1
        if _stopped(x[0, prompt.shape[1]:], params.stopping_criteria_idx):
            break
    return Decoded(x, trace)


def llada2_generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                    gen_length: int = 2048, block_length: int = 32, steps: int = 32, temperature: float = 0.0,
                    top_k: int | None = None, top_p: float | None = None, threshold: float = 0.95,
                    minimal_topk: int = 1, eos_id: int | None = None, mask_id: int | None = None,
                    ties: str = "lowest", generator: torch.Generator | None = None) -> Decoded:
    """LLaDA2.0's loop (BD12, BD12.1) with its names and defaults: ``block_diffusion_generate`` with the dynamic
    strategy, ``min(steps, gen_length // minimal_topk)`` steps per block, a block whose steps run out keeping its
    masks (``after_schedule="leave"``), and a stop after the block holding ``eos_id`` when one is given. One row
    ``prompt`` [1, P] without padding; returns the whole canvas [1, T] and its trace (one step per model call)."""
    check_generator(generator)
    if attention_mask is not None and not bool(attention_mask.bool().all()):
        raise ValueError("attention_mask: LLaDA2.0's loops take no padding (one row of real tokens, BD12.1)")
    for name, value in (("steps", steps), ("minimal_topk", minimal_topk), ("gen_length", gen_length)):
        check_integer(name, value, 1)
    if gen_length // minimal_topk < 1:
        raise ValueError(f"minimal_topk {minimal_topk} > gen_length {gen_length}: min(steps, gen_length // "
                         "minimal_topk) = 0 steps per block (the official loops return the masks undecoded)")
    return block_diffusion_generate(model, prompt, mask_id, gen_length, block_length,
                                    min(steps, gen_length // minimal_topk), temperature,
                                    0 if top_k is None else top_k, 1.0 if top_p is None else top_p,
                                    "low_confidence_dynamic", threshold, None,
                                    None if eos_id is None else [eos_id], ties=ties, generator=generator,
                                    after_schedule="leave")
