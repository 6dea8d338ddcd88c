"""LLaDA2.1's block sampler with token edits, slow and plain (spec/editing.md): block-causal attention over the
canvas up to the current block, one forward per step, no cache.

Parameter names and defaults are the official ``LLaDA21Sampler``'s:

    from veridec.reference.editing import generate
    result = generate(model, prompt, max_new_tokens=128, block_size=32, threshold=0.95, editing_threshold=0.9)
    result.canvas, result.events
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import whole_blocks
from veridec.decoding import DecodeStalled, check_llada_layout, check_logits
from veridec.events import EventDecoded, step_events
from veridec.models.transformer import block_causal_bias
from veridec.rules.editing import EditParams, edit_step
from veridec.rules.wino import check_prompt
from veridec.trace import Counters, Progress


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int = 128, block_size: int = 32, temperature: float = 0.0,
             top_p: float | None = None, top_k: int | None = None, threshold: float = 0.95,
             editing_threshold: float = 0.9, max_post_steps: int = 16, num_to_transfer: int = 1,
             eos_early_stop: bool = False, *, mask_id: int | None = None, ties: str = "lowest",
             generator: torch.Generator | None = None, max_forwards: int | None = None) -> EventDecoded:
    """Decode one row ``prompt`` [1, P] (ED1); ``max_forwards`` per block (ED6, default 4 b + max_post_steps)."""
    check_generator(generator)
    params = EditParams(max_new_tokens, block_size, temperature, top_p, top_k, threshold, editing_threshold,
                        max_post_steps, num_to_transfer, eos_early_stop, ties)
    check_llada_layout(model, "the editing sampler")
    check_prompt(prompt)
    if prompt.shape[0] != 1:
        raise ValueError(f"prompt must be one row (the official sampler decodes rows apart), got {prompt.shape[0]}")
    mask_id = model.special.mask_id if mask_id is None else mask_id
    limit = 4 * block_size + max_post_steps if max_forwards is None else max_forwards
    prompt_len = prompt.shape[1]
    length = whole_blocks(prompt_len + max_new_tokens, block_size)
    canvas = torch.full((length,), mask_id, dtype=torch.long, device=prompt.device)  # [L]
    canvas[:prompt_len] = prompt[0]
    bias = block_causal_bias(length, block_size, device=prompt.device)  # [L, L]
    positions = torch.arange(length, device=prompt.device)  # [L]
    run = Run(model, canvas, bias, positions, params, mask_id, generator, limit)
    for block in range(prompt_len // block_size, length // block_size):
        run.decode_block(block, prompt_len)
        if eos_early_stop and _ended(run.canvas[prompt_len: (block + 1) * block_size], mask_id, model.special.eos_id):
            break
    return run.partial()


def _ended(generated: torch.Tensor, mask_id: int, eos_id: int | None) -> bool:
    """ED5's early stop: no mask left so far and an EOS among the generated tokens."""
    return eos_id is not None and not bool((generated == mask_id).any()) and bool((generated == eos_id).any())


class Run:
    def __init__(self, model, canvas, bias, positions, params, mask_id, generator, limit):
        self.model, self.canvas, self.bias, self.positions = model, canvas, bias, positions
        self.params, self.mask_id, self.generator, self.limit = params, mask_id, generator, limit
        self.events, self.margins, self.counters = [], [], Counters()

    def partial(self) -> EventDecoded:
        """The decode so far (all of it once every block has run)."""
        return EventDecoded(self.canvas[None], self.events, [len(self.margins)], [self.margins], self.counters)

    def decode_block(self, block: int, prompt_len: int) -> None:
        """ED5: steps until the block has no mask and a step edits nothing, or post steps run out."""
        width = self.params.block_size
        start, end = block * width, (block + 1) * width
        is_prompt = torch.arange(start, end, device=self.canvas.device) < prompt_len  # [b]
        post, taken = 0, 0
        while True:
            masked = bool((self.canvas[start:end] == self.mask_id).any())
            post += not masked
            if post > self.params.max_post_steps:
                return
            if taken == self.limit:
                raise DecodeStalled(f"block {block}: {taken} forwards and still masked or editing (max_forwards; "
                                    "the official loop has no bound, spec ED6)", self.partial())
            taken += 1
            logits = self._forward(end)[start:]  # [b, V]
            step = edit_step(logits, self.canvas[start:end], is_prompt, params=self.params, mask_id=self.mask_id,
                             generator=self.generator)
            self._record(step, start)
            self.canvas[start:end] = step.tokens
            if not step.had_masks and not step.edits:
                return

    def _forward(self, end: int) -> torch.Tensor:
        window = self.canvas[:end][None]  # [1, w]
        logits = self.model.raw_forward(window, self.positions[:end][None],
                                        attn_bias=self.bias[:end, :end][None, None]).logits[0]  # [w, V]
        self.counters.add_forward(rows=1, queries=end)
        check_logits(logits[None], Progress(len(self.margins), self.counters.model_calls))
        return logits

    def _record(self, step, start: int) -> None:
        self.events += step_events(len(self.margins), 0, self.mask_id, step.commits, edits=step.edits, offset=start)
        self.margins.append(step.margin)
