"""Every parallel rule over the model's K/V cache API (spec/parallel.md P11, spec/fastdllm.md FD5-FD7).

Per block [s, e): one full forward refreshes the cache and decodes the block's first step; then, until the
block has no mask:
- cache="none": a full forward per step (Tier E against the reference, batched, no cache);
- cache="prefix": feed x[s - shift:], recomputing their K/V against the cached prefix;
- cache="dual": feed x[s - shift:e], recomputing the block's K/V against the cached prefix and (stale) suffix.
shift is the model's logit shift (Dream 1: the query scoring token s sits at s - 1). The rule is the
reference's (``parallel_step``); counters have the reference's meaning. The loop is a chain of small
functions (gpt-fast style): ``decode`` -> ``decode_block`` -> ``refresh`` / ``cached_forward`` -> ``take_step``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from veridec.checks import check_generator
from veridec.canvas import initial_canvas
from veridec.checks import check_choice, check_flag
from veridec.decoding import (NonFiniteLogits, check_decode_args, check_logits, check_model_supports, check_progress,
                              check_step_logits, decode_params, step_budget)
from veridec.models.interface import scoring_queries, takes_narrow_logits
from veridec.rules.parallel import new_state, symmetrized_dependency
from veridec.rules.step import parallel_step
from veridec.models.transformer import KVCache
from veridec.trace import Decoded, PendingStep, Progress, Trace, append_pending, pending_step, record_step

from .compiled import compiled

CACHES = ("none", "prefix", "dual")


class LoopHook:
    """Where a block's loop may deviate from the plain one to reproduce an upstream loop (it never changes
    the rule): the default deviates nowhere. ``veridec.optimized.fastdllm`` has the official ones."""

    def forward_after_completion(self, step: int) -> bool:
        """Whether step ``step`` of a block (>= 1) still runs a forward although the block has no mask left."""
        return False

    def after_cached_forward(self, logits: torch.Tensor, temperature: float, generator) -> None:
        """Called with each cached forward's window logits [B, W, V] before the step uses them."""


class Block(NamedTuple):
    index: int
    start: int  # first canvas position of the block
    end: int  # one past its last
    first: int = 0  # no candidate lies left of it: the leftmost mask before ``end`` as the block starts


class Window(NamedTuple):
    """Where a forward's logits sit: token ``start + j`` is scored by logits[:, j], computed by query
    ``rows[j]`` of the forward, which is key ``cols[j]`` of the attention (DAPD reads attention there)."""

    start: int
    rows: torch.Tensor | None  # [W] or [B, W] (None where no rule reads attention)
    cols: torch.Tensor | None  # [W] or [B, W]


@dataclass
class Run:
    """What every step of one decode shares."""

    model: object
    rule: object
    cache: str
    attention_mask: torch.Tensor | None
    mask_id: int
    block_length: int
    trace: Trace
    state: dict  # the rule's per-decode memory (KLASS)
    sampling: dict  # temperature, remasking, ties, generator
    record_logits: bool
    hook: LoopHook
    narrow_logits: bool = False  # forwards return only the step's columns (``can_narrow_logits``)
    pending: list = field(default_factory=list)  # the block's step records, on the device (``flush_block``)
    last_step: tuple | None = None  # (non-finite flag [], logits, candidates, offset) of the step just taken

    @property
    def needs_attention(self) -> bool:
        return getattr(self.rule, "needs_attention", False)

    @property
    def sampled(self) -> bool:
        return self.sampling["temperature"] > 0 or self.sampling["remasking"] == "random"

    @property
    def reads_whole_window(self) -> bool:
        """Whether a step needs every window column, not only those up to the block's end (``take_step``)."""
        return self.sampled or getattr(self.rule, "remembers_window", False)


@torch.no_grad()
def decode(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, rule, cache: str = "dual",
           gen_length: int = 128, block_length: int = 32, temperature: float = 0.0,
           remasking: str = "low_confidence", mask_id: int | None = None, ties: str = "lowest",
           generator: torch.Generator | None = None, record_logits: bool = False, name: str | None = None,
           hook: LoopHook | None = None, compile: bool | dict = False, narrow_logits: bool = True) -> Decoded:
    """As ``veridec.reference.parallel.decode`` with a cache policy. ``hook`` reproduces an upstream loop's
    extra forwards or random draws (``veridec.optimized.fastdllm.OfficialLoop``). ``compile``: True (or
    torch.compile options) runs the model's forwards compiled, one graph per shape (``veridec.optimized.compiled``);
    the loop and the rule are the same. ``narrow_logits``: the forwards return only the step's columns, their last
    layer running those queries alone (``can_narrow_logits``); False: the whole window's, as the reference and the
    official code compute them (the same numbers where the kernels are row-wise; ``veridec check`` targets)."""
    check_generator(generator)
    check_flag("narrow_logits", narrow_logits)
    check_decode_args(gen_length, block_length, temperature, remasking, ties)
    check_choice("cache", cache, CACHES)
    check_model_supports(model, rule, cache)
    model = compiled(model, compile)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    batch, prompt_len = prompt.shape
    trace = Trace(name or f"{rule.name}-{cache}-cache",
                  decode_params(rule, gen_length, block_length, temperature, remasking, mask_id), prompt_len, batch)
    run = Run(model, rule, cache, attention_mask, mask_id, block_length, trace,
                   new_state(rule, batch, x.shape[1], x.device),
                   dict(temperature=temperature, remasking=remasking, ties=ties, generator=generator), record_logits,
                   hook or LoopHook())
    run.narrow_logits = narrow_logits and can_narrow_logits(run)
    for index in range(gen_length // block_length):
        start = prompt_len + index * block_length
        x = decode_block(run, x, Block(index, start, start + block_length))
    return Decoded(x, trace)


def decode_block(run: Run, x: torch.Tensor, block: Block) -> torch.Tensor:
    """A refresh (full forward, filling the cache) and its step, then cached steps until no mask is left.

    Host reads: a few as the block starts (its first candidate, its step budget), then one per step: whether the
    block still has a mask and whether the step met a non-finite logit (``continues``); the steps keep their
    decisions and records on the device, read back once as the block ends (``flush_block``)."""
    at_start = masks_in(x, block, run.mask_id).sum(dim=1)  # [B]
    before_end = torch.arange(x.shape[1], device=x.device) < block.end  # [L]
    left = (x[:, :block.start] == run.mask_id).any(dim=0).nonzero()  # prompt masks compete too (SQ1.3)
    block = block._replace(first=int(left[0]) if len(left) else block.start)  # commits only move it right
    budget = step_budget((x == run.mask_id) & before_end[None], run.rule, run.sampled)
    try:
        logits, attentions, window, kv = refresh(run, x, block)
        x = take_step(run, x, block, 0, at_start, logits, attentions, window)
        step = 1
        while continues(run, x, block, step):
            check_progress(step, block.index, budget, run.trace)
            if run.cache == "none":
                logits, attentions, window, _ = refresh(run, x, block)
            elif captures_whole_step(run):
                x = graph_step(run, x, block, step, at_start, kv)
                step += 1
                continue
            else:
                logits, attentions, window = cached_forward(run, x, block, kv)
            x = take_step(run, x, block, step, at_start, logits, attentions, window)
            step += 1
    finally:
        flush_block(run)
    return x


def continues(run: Run, x: torch.Tensor, block: Block, step: int) -> bool:
    """The loop's one host read per step: whether the block still has a mask, and whether the step just taken met
    a NaN probability at a candidate (then refused: ``check_logits`` names the step, row, position, token)."""
    left = masks_in(x, block, run.mask_id).any()
    flags = left[None] if run.last_step is None else torch.stack([left, run.last_step[0]])  # [1] or [2]
    live, *bad = flags.tolist()
    if bad and bad[0]:
        _, logits, candidates, offset = run.last_step
        run.pending.pop()  # the refused step is not recorded
        progress = Progress(len(run.trace.steps) + len(run.pending), run.trace.counters.model_calls)
        check_logits(logits, progress, offset, where=candidates)
        raise NonFiniteLogits(f"the model's logits at step {progress.steps} give a NaN probability at a candidate")
    run.last_step = None
    return live or run.hook.forward_after_completion(step)


def flush_block(run: Run) -> None:
    """The block's step records, read from the device in one host read and appended to the trace."""
    append_pending(run.trace, run.pending, run.mask_id)
    run.pending.clear()
    run.last_step = None


def can_narrow_logits(run: Run) -> bool:
    """Whether the forwards can return the logits of the step's columns only (``block.first`` to the block's end),
    their last layer running those queries alone: the model declares that its forwards take ``logit_rows``
    (``takes_narrow_logits``: veridec's transformer, the compiled wrapper) and the step reads no more (no whole
    window, no attention)."""
    return takes_narrow_logits(run.model) and not (run.reads_whole_window or run.needs_attention)


def refresh(run: Run, x: torch.Tensor, block: Block):
    """A full forward of the canvas as it is now (prefill: also the K/V cache) -> (logits [B, W, V] of the
    window's tokens: the whole canvas, or with ``run.narrow_logits`` ``block.first`` to the block's end; attentions,
    the window, cache or None)."""
    window = slice(block.first, block.end) if run.narrow_logits else slice(0, x.shape[1])
    options = {"logit_rows": window} if run.narrow_logits else {}
    if run.needs_attention:
        options["output_attentions"] = True
    if run.cache == "none":
        out, kv = run.model(x, attention_mask=run.attention_mask, **options), None
    else:
        out, kv = run.model.prefill(x, run.attention_mask, **options)
    run.trace.counters.add_forward(rows=x.shape[0], queries=x.shape[1])
    query = scoring_queries(x.shape[1], run.model.logit_shift, run.attention_mask, x.device)[:, window]  # [B, W]
    return out.logits, out.attentions, Window(window.start, query, query), kv


def cached_forward(run: Run, x: torch.Tensor, block: Block, kv):
    """Queries over the block (dual) or everything from it (prefix) against the cache, their K/V rewritten
    -> (logits [B, W, V] of tokens block.start.., attentions, their window)."""
    shift = run.model.logit_shift
    end = block.end if run.cache == "dual" else x.shape[1]
    fed = torch.arange(block.start - shift, end, device=x.device).expand(x.shape[0], -1)  # [B, W + shift]
    width = block.end - block.start  # the block's queries: the only rows a narrowed step reads
    narrow = run.narrow_logits and fed.shape[1] > width  # (a LLaDA dual step feeds the block alone: nothing to cut)
    options = {"logit_rows": torch.arange(width, device=x.device)} if narrow else {}
    out = run.model.forward_cached(x[:, block.start - shift:end], fed, kv, output_attentions=run.needs_attention,
                                   check=False, **options)  # fed is the block geometry: no host read
    run.trace.counters.add_forward(rows=x.shape[0], queries=fed.shape[1], full=False)
    logits = out.logits[:, :end - block.start]  # [B, W, V]: query j scores token j + shift
    run.hook.after_cached_forward(logits, run.sampling["temperature"], run.sampling["generator"])
    if not run.needs_attention:  # only DAPD reads where the window's queries and keys sit
        return logits, out.attentions, Window(block.start, None, None)
    rows = torch.arange(logits.shape[1], device=x.device)
    return logits, out.attentions, Window(block.start, rows, rows + block.start - shift)


def take_step(run: Run, x: torch.Tensor, block: Block, step: int, at_start: torch.Tensor, logits: torch.Tensor,
              attentions, window: Window) -> torch.Tensor:
    """The rule's step on the window's logits; records it and returns the new canvas [B, L].

    The step reads only the window's columns from ``block.first`` to the block's end, where every candidate
    lies (a no-cache window is the whole canvas, a prefix window runs to its end: up to 10x more columns):
    proposals, float64 softmax, the finiteness check (fused into that softmax: ``check_step_logits``) and the
    trace's margins cover the candidates' columns only. The whole window is read when the rule remembers it
    (KLASS) or the step draws random numbers over its shape (temperature > 0, random remasking: the draws keep
    the reference's shapes). No host read: the record and the finiteness flag stay on the device
    (``continues``, ``flush_block``), unless the trace keeps logits (``record_logits``: read step by step)."""
    cut, stop = step_columns(run, block, window.start, logits.shape[1])
    offset = window.start + cut.start  # canvas position of the step's first column
    span = slice(offset, window.start + cut.stop)
    dependency = symmetrized_dependency(attentions, run.rule, window.rows[..., cut], window.cols[..., cut]) \
        if run.needs_attention else None
    on_device = not run.record_logits
    result, candidates = rule_step(StepConstants.of(run, cut, stop, offset), x[:, span],
                                   x[:, block.start:block.end], logits[:, cut], step, at_start, dependency,
                                   run.sampling["generator"], run.state, on_device)
    if on_device:  # the finiteness check and the record stay on the device: ``continues`` and ``flush_block``
        run.last_step = ((result.view.token_probs.isnan() & candidates).any(), logits[:, cut], candidates, offset)
        run.pending.append(pending_step(block.index, x[:, span], result.x, run.mask_id, result.confidence,
                                        result.choice_logits, *result.order, offset=offset))
    else:
        check_step_logits(logits[:, cut], result.view.token_probs, candidates, run.trace.progress, offset=offset)
        record_step(run.trace, block.index, x[:, span], result.x, run.mask_id, result.confidence,
                    result.choice_logits, result.order, run.record_logits, offset=offset)
    return torch.cat([x[:, :span.start], result.x, x[:, span.stop:]], dim=1)


def step_columns(run: Run, block: Block, window_start: int, width: int) -> tuple[slice, int]:
    """The window columns a step reads (``cut``) and the first column past the block's end (``stop``)."""
    stop = block.end - window_start  # window columns before the block's end: every candidate lies there
    cut = slice(0, width) if run.reads_whole_window else slice(max(0, block.first - window_start), min(stop, width))
    return cut, stop


@dataclass(frozen=True)
class StepConstants:
    """What a step takes from its decode and its block's geometry, hashable: a compiled step's key."""

    rule: object
    mask_id: int
    block_length: int
    temperature: float
    remasking: str
    ties: str
    cut: tuple[int, int]  # the window columns the step reads
    stop: int  # the first window column past the block's end
    offset: int  # canvas position of the first column read

    @classmethod
    def of(cls, run: Run, cut: slice, stop: int, offset: int) -> "StepConstants":
        return cls(run.rule, run.mask_id, run.block_length, run.sampling["temperature"], run.sampling["remasking"],
                   run.sampling["ties"], (cut.start, cut.stop), stop, offset)


def rule_step(constants: StepConstants, tokens: torch.Tensor, block_tokens: torch.Tensor, logits: torch.Tensor,
              step: int, at_start: torch.Tensor, dependency, generator, state: dict, on_device: bool = True):
    """The rule's step on the columns read: tokens [B, W] and logits [B, W, V] there, the block's tokens [B, b]
    -> (the ``StepResult``, candidates [B, W]). Device work only when ``on_device`` (the order a
    ``RankedSelection``)."""
    start, end = constants.cut
    masked = block_tokens == constants.mask_id  # [B, b]
    candidates = (tokens == constants.mask_id) & masked.any(dim=1, keepdim=True)  # [B, W] in rows still decoding
    if end > constants.stop:  # a window past the block's end (a whole-window step): its columns there are no candidates
        candidates = candidates & (torch.arange(start, end, device=tokens.device) < constants.stop)[None]
    result = parallel_step(constants.rule, logits, tokens, candidates, temperature=constants.temperature,
                           remasking=constants.remasking, ties=constants.ties, generator=generator,
                           offset=constants.offset, block_step=step, block_masks_at_start=at_start,
                           block_masks=masked.sum(dim=1),
                           block_length=constants.block_length, dependency=dependency, state=state,
                           on_device=on_device)
    return result, candidates


def captures_whole_step(run: Run) -> bool:
    """Whether a compiled decode captures the whole cached step, model and rule, as one graph (``graph_step``):
    a compiled model, a deterministic step (no random draws), a rule that needs neither attention, nor the whole
    window, nor the step's index (``Quota``), ties to the lowest position, no recorded logits."""
    return (hasattr(run.model, "step_graph") and not (run.sampled or run.reads_whole_window or run.needs_attention
                                                      or run.record_logits)
            and run.sampling["ties"] == "lowest" and not hasattr(run.rule, "steps_per_block"))


def graph_step(run: Run, x: torch.Tensor, block: Block, step: int, at_start: torch.Tensor, kv) -> torch.Tensor:
    """One cached step, model and rule, as one compiled graph (``whole_step``; on a GPU with ``reduce-overhead``
    one CUDA graph replayed per step); the same canvas, record and counters as ``cached_forward`` then
    ``take_step``. Host work around it: the geometry, the counters, the record's place in the block's list."""
    shift = run.model.logit_shift
    end = block.end if run.cache == "dual" else x.shape[1]
    cut, stop = step_columns(run, block, block.start, end - block.start)
    offset = block.start + cut.start  # canvas position of the first column read
    constants = StepConstants.of(run, cut, stop, 0)  # the graph's key: offset 0 (read only by KLASS, never captured)
    fed = x[:, block.start - shift:end]  # [B, W + shift]
    positions = torch.arange(block.start - shift, end, device=x.device).expand(x.shape[0], -1)  # [B, W + shift]
    narrow = run.narrow_logits and fed.shape[1] > block.end - block.start  # as ``cached_forward``
    rows = block.end - block.start if narrow else end - block.start  # the queries whose logits the step gets
    view = KVCache(kv.keys, kv.values, kv.key_mask, kv.rope_offset, writes=0, padded=kv.padded)
    graph = run.model.step_graph(whole_step)
    new, values, bad, logits, candidates = graph(run.model.model, constants, (shift, rows, narrow), fed, positions,
                                                 view, at_start)
    kv.writes += fed.numel()
    run.trace.counters.add_forward(rows=x.shape[0], queries=fed.shape[1], full=False)
    run.last_step = (bad, logits, candidates, offset)
    run.pending.append(PendingStep(block.index, offset, values.clone()))  # the next replay overwrites its outputs
    span = slice(offset, block.start + cut.stop)
    return torch.cat([x[:, :span.start], new, x[:, span.stop:]], dim=1)


def whole_step(model, constants: StepConstants, geometry: tuple[int, int, bool], fed: torch.Tensor,
               positions: torch.Tensor, cache, at_start: torch.Tensor):
    """The cached step a graph captures: the model's cached forward over ``fed`` [B, W + shift] at ``positions``,
    then the rule on the columns read -> (their new tokens, the step's record, the non-finite flag, the columns'
    logits, the candidates). No host read."""
    shift, width, narrow = geometry  # width: the queries whose logits the step gets (narrowed: the block's)
    rows = torch.arange(width, device=fed.device) if narrow else None
    logits = model.forward_cached(fed, positions, cache, check=False, logit_rows=rows).logits[:, :width]  # [B, W, V]
    start, end = constants.cut
    tokens = fed[:, shift + start:shift + end]  # [B, W']
    block_tokens = fed[:, shift:shift + constants.stop]  # [B, b]
    result, candidates = rule_step(constants, tokens, block_tokens, logits[:, start:end], 1, at_start, None, None, {})
    record = pending_step(0, tokens, result.x, constants.mask_id, result.confidence, result.choice_logits,
                          *result.order, offset=constants.offset)
    bad = (result.view.token_probs.isnan() & candidates).any()
    return result.x, record.values, bad, logits[:, start:end], candidates


def masks_in(x: torch.Tensor, block: Block, mask_id: int) -> torch.Tensor:
    """[B, W] True where the block is still masked."""
    return x[:, block.start:block.end] == mask_id
