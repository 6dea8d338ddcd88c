"""DiffusionGemma's decoder, slow and plain (spec/diffusiongemma.md): one full forward per denoising step (the
encoder over the whole prefix into a fresh cache, in the official loop's chunks: the prompt, then each finished
canvas; then the decoder over the canvas), the rule from veridec.rules.diffusiongemma.

Setting names and defaults are ``DiffusionGemmaForBlockDiffusion.generate``'s (a setting left ``...`` comes from
the checkpoint's generation_config.json, else the official default; ``None`` turns its part off, DG7.1):

    from veridec.reference.diffusiongemma import generate
    canvas, trace = generate(model, input_ids, max_new_tokens=32, max_denoising_steps=8)

``cache_implementation`` ("dynamic" or "static") is the kind of the fresh encoder cache each step writes (DG2.4).
Randomness comes from ``generator`` or, when None, torch's global RNG in the official order and shapes (DG3.3).
"""

from __future__ import annotations

import torch

from veridec.checks import check_choice
from veridec.rules.diffusiongemma import (CACHE_IMPLEMENTATIONS, canvases_for, check_decode_inputs, check_length,
                                          check_step_finite, check_uniform_state, denoising_step, draw_noise,
                                          finalize_canvas, new_stop_state, record_step, settings_for)
from veridec.trace import Decoded, Trace


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, max_new_tokens=...,
             max_denoising_steps=..., entropy_bound=..., t_min=..., t_max=..., stability_threshold=...,
             confidence_threshold=..., eos_token_id=..., pad_token_id=...,
             cache_implementation: str = "dynamic", ties: str = "lowest",
             generator: torch.Generator | None = None) -> Decoded:
    """Decode ``input_ids`` [B, P] (left-padded with ``attention_mask`` [B, P]) -> Decoded(sequences [B, P + c *
    L], trace with accept / renoise events): canvas after canvas of length L until every row has finished."""
    check_uniform_state(model)
    p = settings_for(model, {k: v for k, v in locals().items() if k not in (
        "model", "input_ids", "attention_mask", "generator", "cache_implementation", "ties")})
    check_decode_inputs(model, input_ids, attention_mask, generator)
    check_choice("ties", ties, ("lowest",))  # argmax ties: the lowest id, as torch.argmax (DG3.3)
    check_choice("cache_implementation", cache_implementation, CACHE_IMPLEMENTATIONS)
    check_length(model, input_ids.shape[1], p)
    static = input_ids.shape[1] + p.max_new_tokens if cache_implementation == "static" else None
    batch, prompt_length = input_ids.shape
    length, device = model.canvas_length, input_ids.device
    mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    trace = Trace("diffusiongemma-reference", {**p.__dict__, "canvas_length": length}, prompt_length, batch,
                  events=[])
    sequences, finished = input_ids, torch.zeros(batch, dtype=torch.bool, device=device)
    forwards = [0] * batch
    for canvas_index in range(canvases_for(p, length)):
        argmax = _denoise_canvas(model, sequences, mask, p, trace, forwards, canvas_index, generator, static)
        sequences, finished = finalize_canvas(torch.cat([sequences, argmax], dim=-1), finished, length,
                                              prompt_length + p.max_new_tokens, p)
        if finished.all():
            break
        mask = torch.nn.functional.pad(mask, (0, length), value=True)  # [B, T + L]
    return Decoded(sequences, trace)


def _denoise_canvas(model, sequences, mask, p, trace, forwards, canvas_index, generator, static) -> torch.Tensor:
    """One canvas (DG3, DG4): a random start, then steps with remaining = N .. 1 until every row stops. -> the
    argmax canvas [B, L]."""
    batch, length = sequences.shape[0], model.canvas_length
    prompt_length = sequences.shape[1] - canvas_index * length
    canvas = draw_noise((batch, length), model.vocab_size, generator, sequences.device)  # [B, L]
    argmax, self_conditioning = canvas, None
    finished = torch.zeros(batch, dtype=torch.bool, device=sequences.device)
    stop = new_stop_state(p, batch, length, sequences.device)
    for remaining in range(p.max_denoising_steps, 0, -1):
        chunks = list(range(prompt_length, sequences.shape[1] + 1, length))  # the prompt, then each canvas
        logits = model.full_forward(sequences, mask, canvas, self_conditioning, chunks, static)  # [B, L, V]
        trace.counters.add_forward(rows=batch, queries=sequences.shape[1] + length)
        check_step_finite(logits, len(trace.steps))
        result = denoising_step(logits, canvas, argmax, self_conditioning, finished, stop, remaining, p,
                                model.vocab_size, model.embedding_dtype, generator)
        record_step(trace, canvas, result, ~finished, forwards, sequences.shape[1], canvas_index, p.entropy_bound)
        canvas, argmax, self_conditioning, finished, stop = result[:5]
        if finished.all():
            break
    return argmax
