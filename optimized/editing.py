"""LLaDA2.1's editing sampler batched over rows, with or without a block cache (spec/editing.md ED8). The rule is
the reference's (``edit_step``, row by row); one forward per step serves every row still decoding:

- cache="none": each forward computes the window up to the block's end (the reference's forward, batched);
- cache="block": a K/V cache of the whole canvas. Attention is block-causal, so the keys and values of a
  position depend only on the tokens of its own and earlier blocks: a forward recomputes from the first block
  whose tokens changed since the cache last saw them (usually the current block alone) and reads every earlier
  block from the cache. Exact: the same attention, up to rounding (tier E).

Rows decode the same blocks in step; a row whose block is done waits (cache="none": it is left out of the
forward; cache="block": it is recomputed with its tokens unchanged, so its cache stays fresh). A row that stops
at an EOS (``eos_early_stop``) leaves the batch.
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.checks import check_choice
from veridec.canvas import whole_blocks
from veridec.decoding import DecodeStalled, check_llada_layout, check_logits
from veridec.events import EventDecoded, step_events
from veridec.models.transformer import block_causal_bias
from veridec.rules.editing import EditParams, edit_step
from veridec.rules.wino import check_prompt
from veridec.trace import Counters, Progress

CACHES = ("none", "block")


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int = 128, block_size: int = 32, temperature: float = 0.0,
             top_p: float | None = None, top_k: int | None = None, threshold: float = 0.95,
             editing_threshold: float = 0.9, max_post_steps: int = 16, num_to_transfer: int = 1,
             eos_early_stop: bool = False, *, mask_id: int | None = None, ties: str = "lowest",
             generator: torch.Generator | None = None, max_forwards: int | None = None,
             cache: str = "block") -> EventDecoded:
    """Decode every row of ``prompt`` [R, P] as the reference decodes it alone; ``max_forwards`` per block."""
    check_generator(generator)
    params = EditParams(max_new_tokens, block_size, temperature, top_p, top_k, threshold, editing_threshold,
                        max_post_steps, num_to_transfer, eos_early_stop, ties)
    check_choice("cache", cache, CACHES)
    check_llada_layout(model, "the editing sampler")
    check_prompt(prompt)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    rows, prompt_len = prompt.shape
    length = whole_blocks(prompt_len + max_new_tokens, block_size)
    canvas = torch.full((rows, length), mask_id, dtype=torch.long, device=prompt.device)  # [R, L]
    canvas[:, :prompt_len] = prompt
    run = Run(model, canvas, params, mask_id, generator, 4 * block_size + max_post_steps
               if max_forwards is None else max_forwards, cache)
    for block in range(prompt_len // block_size, length // block_size):
        run.decode_block(block, prompt_len)
        if eos_early_stop:
            run.drop_ended(prompt_len, (block + 1) * block_size, model.special.eos_id)
        if not run.alive:
            break
    return run.partial()


class Run:
    def __init__(self, model, canvas, params, mask_id, generator, limit, cache):
        rows, length = canvas.shape
        self.model, self.canvas, self.params, self.mask_id = model, canvas, params, mask_id
        self.generator, self.limit = generator, limit
        self.bias = block_causal_bias(length, params.block_size, device=canvas.device)  # [L, L]
        self.positions = torch.arange(length, device=canvas.device)  # [L]
        self.alive = list(range(rows))  # rows still decoding, in the cache's row order
        self.kv = model.new_cache(rows, length) if cache == "block" else None
        self.held = torch.full_like(canvas, -1)  # [R, L] the token whose K/V the cache holds (-1: none)
        self.events, self.margins = [], [[] for _ in range(rows)]
        self.counters = Counters()

    @property
    def progress(self) -> Progress:
        """The batch's steps (its longest row's) and model calls, as check_logits names them."""
        return Progress(max(map(len, self.margins)), self.counters.model_calls)

    def partial(self) -> EventDecoded:
        """The decode so far (all of it once every block has run)."""
        return EventDecoded(self.canvas, self.events, [len(m) for m in self.margins], self.margins, self.counters)

    def drop_ended(self, prompt_len: int, end: int, eos_id: int | None) -> None:
        """ED5's early stop, row by row: a row with no mask in x[P, end) and an EOS there leaves the batch."""
        generated = self.canvas[self.alive, prompt_len:end]  # [A, end - P]
        ended = ~(generated == self.mask_id).any(dim=1) & (generated == eos_id).any(dim=1) if eos_id is not None \
            else torch.zeros(len(self.alive), dtype=torch.bool, device=generated.device)
        keep = (~ended).nonzero()[:, 0]  # indices into self.alive
        if len(keep) < len(self.alive) and self.kv is not None:
            for layer in range(len(self.kv.keys)):
                self.kv.keys[layer], self.kv.values[layer] = self.kv.keys[layer][keep], self.kv.values[layer][keep]
            self.kv.key_mask, self.kv.rope_offset = self.kv.key_mask[keep], self.kv.rope_offset[keep]
        self.alive = [self.alive[i] for i in keep.tolist()]

    def decode_block(self, block: int, prompt_len: int) -> None:
        """ED5 for every live row: each runs its own loop; the block ends when every row's loop has."""
        width = self.params.block_size
        start, end = block * width, (block + 1) * width
        is_prompt = torch.arange(start, end, device=self.canvas.device) < prompt_len  # [b]
        post, taken, running = [0] * len(self.canvas), [0] * len(self.canvas), set(self.alive)
        while True:
            for row in sorted(running):
                post[row] += not bool((self.canvas[row, start:end] == self.mask_id).any())
                if post[row] > self.params.max_post_steps:
                    running.discard(row)
                elif taken[row] == self.limit:
                    raise DecodeStalled(f"row {row}, block {block}: {taken[row]} forwards and still masked or "
                                        "editing (max_forwards; the official loop has no bound, spec ED6)",
                                        self.partial())
            if not running:
                return
            steps = sorted(running)
            logits = self._forward(steps, start, end)  # {row: [b, V]}
            for row in steps:
                taken[row] += 1
                step = edit_step(logits[row], self.canvas[row, start:end], is_prompt, params=self.params,
                                 mask_id=self.mask_id, generator=self.generator)
                self._record(row, step, start)
                self.canvas[row, start:end] = step.tokens
                if not step.had_masks and not step.edits:
                    running.discard(row)

    def _forward(self, steps: list[int], start: int, end: int) -> dict:
        """One forward for the rows stepping now -> their block logits {row: [b, V]}."""
        if self.kv is None:
            out = self.model.raw_forward(self.canvas[steps, :end], self.positions[:end].expand(len(steps), -1),
                                         attn_bias=self.bias[None, None, :end, :end]).logits  # [S, end, V]
            self.counters.add_forward(rows=len(steps), queries=end)
            check_logits(out, self.progress)
            return {row: out[i, start:] for i, row in enumerate(steps)}
        first = self._first_stale(start)
        window = self.canvas[self.alive, first:end]  # [A, W]
        slots = self.positions[first:end].expand(len(self.alive), -1)  # [A, W]
        out = self.model.raw_forward(window, slots, attn_bias=self.bias[None, None, first:end], cache=self.kv,
                                     slots=slots).logits  # [A, W, V]
        self.held[self.alive, first:end] = window
        self.counters.add_forward(rows=len(self.alive), queries=end - first, full=first == 0)
        check_logits(out, self.progress)
        return {row: out[self.alive.index(row), start - first:] for row in steps}

    def _first_stale(self, start: int) -> int:
        """The start of the first block before ``start`` whose tokens differ from the cache's, else ``start``."""
        stale = (self.held[self.alive, :start] != self.canvas[self.alive, :start]).any(dim=0)  # [start]
        if not stale.any():
            return start
        return int(stale.nonzero()[0, 0]) // self.params.block_size * self.params.block_size

    def _record(self, row: int, step, start: int) -> None:
        self.events += step_events(len(self.margins[row]), row, self.mask_id, step.commits, edits=step.edits,
                                   offset=start)
        self.margins[row].append(step.margin)
