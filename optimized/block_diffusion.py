"""Block diffusion with an exact cache of finished blocks, batched (spec/block_diffusion.md BD8).

Under block-causal attention a finished block's keys and values never change, so each block is computed once
more after its last step and written into the cache (the published code's ``store_kv`` call); the block's
denoising forwards attend to the cache and recompute only the block. One row makes the published code's calls:
a prefill of the prompt's whole blocks, then per block its denoising forwards and one store. Rows of a batch
are laid out in whole blocks: row i's canvas is shifted right by whole blocks so that every row's first
decoded block (the one holding the end of its prompt) sits at the same canvas block; the blocks before a row's
canvas are padding that its tokens never see. Each row decodes as it would alone (BD8.2); with a generator per
row (``generator=[g0, g1, ...]``) its draws are its own too.

    from veridec.optimized.block_diffusion import block_diffusion_generate
    decoded = block_diffusion_generate(model, prompt, gen_length=16, block_length=4, attention_mask=attention_mask)

The loop's official details sit in a hook (``BlockLoop``, named by ``loop=``): ``"intended"`` (the default) is
veridec's decode where the published code fails or overwrites (BD6); ``"official"`` (``OfficialBlockLoop``) is the
published code's behaviour, defects included (BD10).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from veridec.canvas import whole_blocks
from veridec.decoding import check_logits, check_progress
from veridec.checks import check_choice
from veridec.rules.sdar import SDARParams, official_select, row_record, sample_block, select
from veridec.trace import IDLE_ROW, Decoded, RowStep, Trace, record_rows

from .compiled import compiled


@dataclass
class Layout:
    """Where each row's own canvas sits in the batch canvas: row i's position p is canvas position p + shift[i]."""

    prompts: list[torch.Tensor]  # each row's real prompt [P_i]
    shift: list[int]  # whole blocks of padding before each row, in positions
    ends: list[int]  # one past each row's last canvas position (its own canvas rounded up to whole blocks)
    first_block: int  # the canvas block every row decodes first
    length: int  # the batch canvas T


class BlockLoop:
    """Where the block loop may deviate from veridec's (BD5, BD6) to reproduce an official loop; this default
    deviates nowhere: past its schedule a block takes one more step that commits every mask left, the mask token
    banned (BD6.2), unless ``after_schedule="leave"`` (BD12); a step commits at most the masks left and writes
    only them."""

    def check(self, prompt: torch.Tensor, temperature, remasking_strategy) -> None:
        """Refusals before the settings are checked and the first forward is run (none)."""

    def keeps_masks(self, step: int, params: SDARParams) -> bool:
        """Whether a block ends at ``step`` with its masks left: past its schedule under after_schedule="leave"."""
        return params.after_schedule == "leave" and step >= params.denoising_steps

    def banned(self, step: int, params: SDARParams, mask_id: int) -> int | None:
        """The token a draw may not give: the mask token past the schedule (BD6.2)."""
        return mask_id if step >= params.denoising_steps else None

    def select(self, params: SDARParams, masked: torch.Tensor, x0_p: torch.Tensor, probs: torch.Tensor,
               step: int) -> torch.Tensor:
        """The positions [b] (bool) that commit at ``step``: BD5's selection, every mask past the schedule."""
        if step >= params.denoising_steps:
            return masked
        return select(params, masked, x0_p, probs, params.schedule[step])

    def written(self, transfer: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """The positions [b] whose draws are written: the selected masks."""
        return transfer & masked


class OfficialBlockLoop(BlockLoop):
    """The published loop, defects included (BD10): its refusals before the first forward (BD7.1, BD7.2, BD7.5),
    its selection (``official_select``: the quota uncapped, an IndexError past the schedule), the draws written
    over unmasked positions too, no mask token banned; ``after_schedule`` has no effect."""

    def check(self, prompt: torch.Tensor, temperature, remasking_strategy) -> None:
        if prompt.shape[0] != 1:
            raise RuntimeError("the published canvas has one row (BD7.5)")
        if temperature == 0:
            raise RuntimeError("probability tensor contains either inf, nan or element < 0 (temperature 0, BD7.1)")
        if remasking_strategy == "entropy_bounded":
            raise RuntimeError("the published entropy_bounded selection is never assigned (BD7.2)")

    def keeps_masks(self, step: int, params: SDARParams) -> bool:
        return False

    def banned(self, step: int, params: SDARParams, mask_id: int) -> int | None:
        return None

    def select(self, params, masked, x0_p, probs, step) -> torch.Tensor:
        return official_select(params, masked, x0_p, step)

    def written(self, transfer: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        return transfer


LOOPS = {"intended": BlockLoop(), "official": OfficialBlockLoop()}


def block_loop(loop) -> BlockLoop:
    """``loop`` as a hook: a name of ``LOOPS``, or a ``BlockLoop`` as given."""
    if isinstance(loop, BlockLoop):
        return loop
    check_choice("loop", loop, LOOPS)
    return LOOPS[loop]


@torch.no_grad()
def block_diffusion_generate(model, prompt: torch.Tensor, mask_id: int | None = None, gen_length: int = 128,
                             block_length: int = 8, denoising_steps: int = 8, temperature: float = 1.0,
                             top_k: int = 0, top_p: float = 1.0,
                             remasking_strategy: str = "low_confidence_dynamic", confidence_threshold: float = 0.85,
                             eb_threshold: float | None = None, stopping_criteria_idx=None, *,
                             attention_mask: torch.Tensor | None = None, ties: str = "lowest",
                             generator=None, loop: str | BlockLoop = "intended", record_logits: bool = False,
                             after_schedule: str = "commit", compile: bool | dict = False) -> Decoded:
    """Decode ``prompt`` [B, P] (left padding where ``attention_mask`` [B, P] is 0) as the reference decodes each
    row. Returns [B, W]: each row's own canvas (prompt, then its generation up to whole blocks) after its left
    padding as given, then ``mask_id`` up to the widest row; the trace's positions are in that layout.
    ``loop``: a name of ``LOOPS`` (``"official"`` is the published code's behaviour, defects included, BD10: one
    row, overwrites, its exceptions), or a ``BlockLoop`` (another reading of the loop, e.g. a checker's).
    ``record_logits``: the trace keeps the logits at each committed position. ``after_schedule="leave"``: a block
    whose schedule is spent keeps its masks (LLaDA2.0's loop, BD12). ``compile``: True (or torch.compile options)
    runs the block calls compiled, one graph per shape (``veridec.optimized.compiled``); the loop is the same."""
    hook = block_loop(loop)
    hook.check(prompt, temperature, remasking_strategy)
    params = SDARParams(gen_length, block_length, denoising_steps, temperature, top_k, top_p, remasking_strategy,
                        confidence_threshold, eb_threshold, stopping_criteria_idx, ties, after_schedule)
    model = compiled(model, compile)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    generators = row_generators(generator, prompt.shape[0])
    layout = row_layout(prompt, attention_mask, params, model.max_length)
    x = layout_canvas(layout, mask_id, prompt.device)  # [B, T]
    trace = Trace("block-diffusion-cached", {**params.__dict__, "mask_id": mask_id}, prompt.shape[1], x.shape[0])
    run = Run(model, params, layout, x, mask_id, trace, generators, hook, record_logits)
    return run.decode(prompt)


def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, ties: str = "lowest",
             generator=None, loop: str = "intended", record_logits: bool = False, **settings) -> Decoded:
    """``block_diffusion_generate`` in veridec's calling order (model, prompt, attention_mask, settings by name),
    as the other decoders: what ``veridec check --against sdar`` and its reproducers run."""
    return block_diffusion_generate(model, prompt, attention_mask=attention_mask, ties=ties, generator=generator,
                                    loop=loop, record_logits=record_logits, **settings)


def row_generators(generator, batch: int) -> list:
    if isinstance(generator, (list, tuple)):
        if len(generator) != batch or not all(isinstance(g, torch.Generator) for g in generator):
            raise ValueError(f"generator: a list must hold one torch.Generator per row ({batch}), got {generator!r}")
        return list(generator)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be None, a torch.Generator or one per row, got {type(generator).__name__}")
    return [generator] * batch


def row_layout(prompt: torch.Tensor, attention_mask, params: SDARParams, max_length: int) -> Layout:
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be [B, P] with P >= 1, got {tuple(prompt.shape)}")
    if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
        raise ValueError(f"attention_mask must be None or a tensor [B, P], got {type(attention_mask).__name__}")
    keep = torch.ones_like(prompt, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    if keep.shape != prompt.shape or (keep.long().diff(dim=1) < 0).any() or not keep[:, -1].all():
        raise ValueError("attention_mask must be [B, P] with left padding only (zeros, then ones to the end)")
    prompts = [row[mask] for row, mask in zip(prompt, keep)]
    b = params.block_length
    full = [len(p) // b for p in prompts]  # whole prompt blocks per row
    first = max(full)
    shift = [(first - f) * b for f in full]
    ends = [s + whole_blocks(len(p) + params.gen_length, b) for s, p in zip(shift, prompts)]
    if max(e - s for e, s in zip(ends, shift)) > max_length:
        raise ValueError(f"prompt + gen_length {params.gen_length}, rounded up to whole blocks of {b}, exceeds the "
                         f"model's max_length {max_length}")
    return Layout(prompts, shift, ends, first, max(ends))


def layout_canvas(layout: Layout, mask_id: int, device) -> torch.Tensor:
    x = torch.full((len(layout.prompts), layout.length), mask_id, dtype=torch.long, device=device)
    for row, (tokens, shift) in enumerate(zip(layout.prompts, layout.shift)):
        x[row, shift:shift + len(tokens)] = tokens
    return x


def layout_output(x: torch.Tensor, layout: Layout, prompt: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Each row's own canvas after the caller's left padding (``prompt``'s pad tokens kept), masks after."""
    pads = [prompt.shape[1] - len(p) for p in layout.prompts]
    width = max(pad + end - shift for pad, end, shift in zip(pads, layout.ends, layout.shift))
    out = torch.full((x.shape[0], width), mask_id, dtype=x.dtype, device=x.device)
    for row, (pad, end, shift) in enumerate(zip(pads, layout.ends, layout.shift)):
        out[row, :pad] = prompt[row, :pad]
        out[row, pad:pad + end - shift] = x[row, shift:end]
    return out


class Run:
    """One batched decode: the canvas, the block cache, and per row whether it has stopped."""

    def __init__(self, model, params, layout, x, mask_id, trace, generators, loop: BlockLoop = LOOPS["intended"],
                 record_logits=False):
        self.model, self.params, self.layout, self.x, self.mask_id = model, params, layout, x, mask_id
        self.trace, self.generators, self.loop = trace, generators, loop
        self.record_logits = record_logits
        batch = x.shape[0]
        self.offset = [prompt_pad - shift for prompt_pad, shift in zip(
            [trace.prompt_length - len(p) for p in layout.prompts], layout.shift)]  # canvas -> output position
        self.first_real = torch.tensor(layout.shift, device=x.device)  # [B] each row's canvas starts there
        self.cache = model.block_cache(*x.shape, first_real=self.first_real)
        self.stopped = [False] * batch

    def forward(self, start: int, width: int, store: bool) -> torch.Tensor:
        """Blocks [start, start + width) of every row against the cache (one model call) -> logits [B, W, V]."""
        out = self.model.forward_blocks(self.x[:, start:start + width], start, self.cache, self.params.block_length,
                                        store=store, first_real=self.first_real)
        self.trace.counters.add_forward(rows=self.x.shape[0], queries=width, full=False)
        return out.logits

    def decode(self, prompt: torch.Tensor) -> Decoded:
        """BD8: the prefill, then the blocks in order until no row goes on; each row's canvas after ``prompt``'s
        padding as given."""
        self.prefill()
        for block in range(self.layout.first_block, self.layout.length // self.params.block_length):
            if not self.decode_block(block):
                break
        return Decoded(layout_output(self.x, self.layout, prompt, self.mask_id), self.trace)

    def prefill(self) -> None:
        """BD2: the prompts' whole blocks in one call, written into the cache."""
        width = self.layout.first_block * self.params.block_length
        if width:
            self.forward(0, width, store=True)

    def decode_block(self, block: int) -> bool:
        """BD5 and BD6.2 for every live row (at most denoising_steps + 1 steps), then the store call; False when no
        row goes on after it."""
        b = self.params.block_length
        start, end = block * b, (block + 1) * b
        live = self.live_rows(end)  # [B]
        if not live.any():
            return False
        step = 0
        while (masked := (self.x[:, start:end] == self.mask_id) & live[:, None]).any():
            check_progress(step, block, self.params.denoising_steps, self.trace)  # S + 1 steps at most (BD6.2)
            if self.loop.keeps_masks(step, self.params):  # BD12
                break
            logits = self.forward(start, b, store=False)  # [B, b, V]
            check_logits(logits, self.trace.progress, offset=start)
            self._step(block, step, masked, logits)
            step += 1
        self.forward(start, b, store=True)
        self.update_stops(live, end)
        return True

    def live_rows(self, end: int) -> torch.Tensor:
        """[B] rows that decode the block ending at ``end``: not stopped, their canvas reaches it."""
        return torch.tensor([not stop and end <= last for stop, last in zip(self.stopped, self.layout.ends)],
                            device=self.x.device)

    def update_stops(self, live: torch.Tensor, end: int) -> None:
        """BD5.5 after a block's store: a live row stops once a stop id is in its generation."""
        stops = self.params.stopping_criteria_idx
        for row in range(self.x.shape[0]):
            generated = self.x[row, self.layout.shift[row] + len(self.layout.prompts[row]):end]
            self.stopped[row] |= bool(live[row]) and stops is not None and any(
                bool((generated == stop).any()) for stop in stops)

    def _step(self, block: int, step: int, masked: torch.Tensor, logits: torch.Tensor) -> None:
        """One denoising step of the rows with masks left in the block (each draws from its own generator)."""
        start = block * self.params.block_length
        rows = [self._row_step(row, step, start, masked[row], logits[row]) if masked[row].any() else IDLE_ROW
                for row in range(self.x.shape[0])]
        record_rows(self.trace, block, rows, self.record_logits)

    def _row_step(self, row: int, step: int, start: int, masked: torch.Tensor, logits: torch.Tensor) -> RowStep:
        """Row ``row``'s draw, selection and writes in the block at ``start`` (masked [b], logits [b, V])."""
        x0, x0_p, probs = sample_block(logits, self.params.temperature, self.params.top_k, self.params.top_p,
                                       self.generators[row], self.loop.banned(step, self.params, self.mask_id))
        transfer = self.loop.select(self.params, masked, x0_p, probs, step)
        record = row_record(masked, transfer, x0, x0_p, logits, start + self.offset[row], self.mask_id,
                            self.record_logits)
        span = slice(start, start + len(x0))
        self.x[row, span] = torch.where(self.loop.written(transfer, masked), x0, self.x[row, span])
        return record
