"""DiffusionGemma's decoder with the encoder prefix cached (spec/diffusiongemma.md DG2): the prompt is encoded once,
each finished canvas is appended to the encoder's K/V cache once, and every denoising step runs the decoder alone
over the canvas, reading that cache. The output sequences live in one preallocated [B, P + c * L] buffer; rows
are left-padded with ``attention_mask``. The rule is veridec.rules.diffusiongemma's, as in the reference.

    from veridec.optimized.diffusiongemma import generate
    canvas, trace = generate(model, input_ids, attention_mask, max_new_tokens=32, cache_implementation="static")

``cache_implementation``: "dynamic" (transformers' DynamicCache, the official default) or "static" (a StaticCache
of P + max_new_tokens positions, as the official ``cache_implementation="static"`` sizes it: DG2.4).
``compile=True`` compiles the decoder forward with torch.compile (mode "reduce-overhead" on CUDA, the default mode
elsewhere), applied from outside the rule.
"""

from __future__ import annotations

import torch

from veridec.checks import check_choice, check_flag
from veridec.rules.diffusiongemma import (CACHE_IMPLEMENTATIONS, canvases_for, check_decode_inputs, check_length,
                                          check_step_finite, check_uniform_state, denoising_step, draw_noise,
                                          finalize_canvas, new_stop_state, record_step, settings_for)
from veridec.trace import Decoded, Trace



@torch.no_grad()
def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, max_new_tokens=...,
             max_denoising_steps=..., entropy_bound=..., t_min=..., t_max=..., stability_threshold=...,
             confidence_threshold=..., eos_token_id=..., pad_token_id=..., cache_implementation: str = "dynamic",
             compile: bool = False, ties: str = "lowest", generator: torch.Generator | None = None) -> Decoded:
    """Decode ``input_ids`` [B, P] (left-padded with ``attention_mask`` [B, P]) -> Decoded(sequences [B, P + c *
    L], trace), as veridec.reference.diffusiongemma.generate does, with one encoder call per canvas."""
    check_uniform_state(model)
    p = settings_for(model, {k: v for k, v in locals().items() if k not in (
        "model", "input_ids", "attention_mask", "generator", "cache_implementation", "compile", "ties")})
    check_decode_inputs(model, input_ids, attention_mask, generator)
    check_choice("ties", ties, ("lowest",))  # argmax ties: the lowest id, as torch.argmax (DG3.3)
    check_choice("cache_implementation", cache_implementation, CACHE_IMPLEMENTATIONS)
    check_flag("compile", compile)
    batch, prompt_length = input_ids.shape
    length, canvases = model.canvas_length, canvases_for(p, model.canvas_length)
    total = prompt_length + canvases * length
    check_length(model, prompt_length, p)
    state = _State(model, input_ids, attention_mask, total,
                   prompt_length + p.max_new_tokens if cache_implementation == "static" else None)
    trace = Trace("diffusiongemma-cached", {**p.__dict__, "canvas_length": length,
                                              "cache_implementation": cache_implementation},
                  prompt_length, batch, events=[])
    decoder = torch.compile(model.denoise, mode="reduce-overhead" if input_ids.is_cuda else None) if compile \
        else model.denoise
    forwards = [0] * batch
    for canvas_index in range(canvases):
        state.encode_new(model, trace)
        argmax = _denoise_canvas(model, decoder, state, p, trace, forwards, canvas_index, generator)
        end = state.end + length
        state.sequences[:, state.end:end] = argmax
        done, state.finished = finalize_canvas(state.sequences[:, :end], state.finished, length,
                                               prompt_length + p.max_new_tokens, p)
        state.sequences[:, :end] = done
        state.end = end
        if state.finished.all():
            break
    return Decoded(state.sequences[:, :state.end].clone(), trace)


class _State:
    """The decode's preallocated state: sequences [B, T_max], the attention mask [B, T_max] (bool), the encoder
    cache and how far it has encoded (``encoded``) and written (``end``)."""

    def __init__(self, model, input_ids: torch.Tensor, attention_mask, total: int, static_length: int | None):
        batch, prompt_length = input_ids.shape
        self.sequences = torch.empty((batch, total), dtype=torch.long, device=input_ids.device)  # [B, T_max]
        self.sequences[:, :prompt_length] = input_ids
        self.mask = torch.ones((batch, total), dtype=torch.bool, device=input_ids.device)  # [B, T_max]
        if attention_mask is not None:
            self.mask[:, :prompt_length] = attention_mask.bool()
        self.cache = model.new_cache(static_length)
        self.finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
        self.encoded, self.end = 0, prompt_length

    def encode_new(self, model, trace: Trace) -> None:
        """The encoder over the tokens written since the last call (the prompt, then each finished canvas: DG2.1)."""
        positions = torch.arange(self.encoded, self.end, dtype=torch.int32, device=self.sequences.device)[None]
        self.cache = model.encode(self.sequences[:, self.encoded:self.end], self.mask[:, :self.end], positions,
                                  self.cache)
        trace.counters.add_forward(rows=self.sequences.shape[0], queries=self.end - self.encoded, full=False)
        self.encoded = self.end


def _denoise_canvas(model, decoder, state: _State, p, trace, forwards, canvas_index, generator) -> torch.Tensor:
    """One canvas's steps (DG3, DG4), the decoder alone reading the cached prefix. -> the argmax canvas [B, L]."""
    batch, length, device = state.sequences.shape[0], model.canvas_length, state.sequences.device
    canvas = draw_noise((batch, length), model.vocab_size, generator, device)  # [B, L]
    masks = model.decoder_masks(canvas, state.cache, state.mask[:, :state.end + length])
    positions = torch.arange(state.end, state.end + length, dtype=torch.int32, device=device)[None]  # [1, L]
    argmax, self_conditioning = canvas, None
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    stop = new_stop_state(p, batch, length, device)
    for remaining in range(p.max_denoising_steps, 0, -1):
        logits = decoder(canvas, state.cache, self_conditioning, masks, positions)  # [B, L, V]
        trace.counters.add_forward(rows=batch, queries=length, full=False)
        check_step_finite(logits, len(trace.steps))
        result = denoising_step(logits, canvas, argmax, self_conditioning, finished, stop, remaining, p,
                                model.vocab_size, model.embedding_dtype, generator)
        record_step(trace, canvas, result, ~finished, forwards, state.end, canvas_index, p.entropy_bound)
        canvas, argmax, self_conditioning, finished, stop = result[:5]
        if finished.all():
            break
    return argmax
