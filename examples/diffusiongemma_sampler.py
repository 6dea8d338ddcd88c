"""A DiffusionGemma sampler written from scratch against transformers' ``DiffusionGemmaForBlockDiffusion`` (the
official calling convention of ``veridec check --against diffusiongemma``): the encoder fills a cache with the
prompt and then each finished canvas; each step runs the decoder on the canvas, draws, accepts under the entropy
bound, renoises the rest, and stops a row once its argmax canvas has repeated k times (k + 1 identical) while
confident. Each decision is one method, so ``diffusiongemma_sampler_broken.py`` can override one.

    veridec check examples/diffusiongemma_sampler.py:generate --against diffusiongemma
"""

import torch
from transformers import DynamicCache, StaticCache


class Sampler:
    def __init__(self, model, max_denoising_steps, entropy_bound, t_min, t_max, stability_threshold,
                 confidence_threshold):
        self.model, self.steps, self.bound = model, max_denoising_steps, entropy_bound
        self.t_min, self.t_max, self.k, self.c = t_min, t_max, stability_threshold, confidence_threshold

    def temperature(self, remaining):  # remaining = steps left, N .. 1
        return self.t_min + (self.t_max - self.t_min) * (torch.tensor(remaining, dtype=torch.int32) / self.steps)

    def entropy(self, logits):
        return torch.distributions.Categorical(logits=logits).entropy()

    def accept(self, entropy):
        ranked, order = torch.sort(entropy, dim=-1)
        keep = torch.cumsum(ranked, dim=-1) - ranked <= self.bound
        return torch.zeros_like(keep).scatter(-1, order, keep)

    def renoise(self, sampled, accepted, noise):
        return torch.where(accepted, sampled, noise)

    def stable(self, history, argmax):
        if self.k == 0:
            return torch.ones(argmax.shape[0], dtype=torch.bool)
        return (history[-self.k:] == argmax[None]).all(dim=-1).all(dim=0)

    def stops(self, history, argmax, logits):
        return self.stable(history, argmax) & (self.entropy(logits).mean(dim=-1) < self.c)

    def conditioning(self, logits, previous):
        return logits

    def canvas(self, cache, mask, start, batch):
        length, vocab = self.model.config.canvas_length, self.model.config.text_config.vocab_size
        x = torch.randint(0, vocab, (batch, length))
        positions = torch.arange(start, start + length, dtype=torch.int32)[None]
        masks = self.model.model.decoder.create_diffusion_decoder_attention_mask(
            config=self.model.config, inputs_embeds=x[..., None], cache=cache, decoder_attention_mask=mask)
        argmax, sc = x, None
        done = torch.zeros(batch, dtype=torch.bool)
        history = torch.full((max(self.k, 1), batch, length), -1)
        for remaining in range(self.steps, 0, -1):
            raw = self.model(decoder_input_ids=x, self_conditioning_logits=sc, decoder_attention_mask=masks,
                             cache=cache, decoder_position_ids=positions).logits
            logits = raw / self.temperature(remaining) if None not in (self.t_min, self.t_max) else raw
            sampled = torch.multinomial(torch.softmax(logits, -1, dtype=torch.float32).view(-1, vocab), 1)
            sampled, new_argmax = sampled.view(batch, length), logits.argmax(-1)
            accepted = self.accept(self.entropy(logits))
            new_x = self.renoise(torch.where(accepted, sampled, x), accepted, torch.randint(0, vocab, (batch, length)))
            if self.k is not None and self.c is not None:
                new_argmax = torch.where(done[:, None], argmax, new_argmax)
                new_x = torch.where(done[:, None], x, new_x)
                logits = torch.where(done[:, None, None], sc, logits) if done.any() else logits
                stop = self.stops(history, new_argmax, logits)
                history = torch.cat([history[1:], new_argmax[None]])
                done = done | stop
            x, argmax, sc = new_x, new_argmax, self.conditioning(logits, sc)
            if done.all():
                break
        return argmax


def generate(model, input_ids, attention_mask=None, max_new_tokens=256, max_denoising_steps=48, entropy_bound=0.1,
             t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005, eos_token_id=None,
             pad_token_id=None, cache_implementation="dynamic", sampler=Sampler):
    """DiffusionGemma's decode, canvas after canvas: ``input_ids`` [B, P] (left-padded) -> sequences [B, P + c L]."""
    batch, prompt_length = input_ids.shape
    length = model.config.canvas_length
    text = model.config.get_text_config(decoder=True)
    cache = StaticCache(config=text, max_cache_len=prompt_length + max_new_tokens) \
        if cache_implementation == "static" else DynamicCache(config=text)
    run = sampler(model, max_denoising_steps, entropy_bound, t_min, t_max, stability_threshold, confidence_threshold)
    mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    eos = torch.tensor([] if eos_token_id is None else eos_token_id, dtype=torch.long).flatten()
    sequences, finished, new = input_ids, torch.zeros(batch, dtype=torch.bool), input_ids
    with torch.no_grad():
        for _ in range(-(-max_new_tokens // length)):
            start = sequences.shape[1]
            positions = torch.arange(start - new.shape[1], start, dtype=torch.int32)[None]
            masks = model.model.encoder.create_masks_for_generate(
                config=model.config, inputs_embeds=torch.empty(batch, new.shape[1], 0), attention_mask=mask,
                cache=cache, position_ids=positions)
            cache = model.model.encoder(input_ids=new, attention_mask=masks, cache=cache,
                                        position_ids=positions).cache
            mask = torch.cat([mask, torch.ones(batch, length, dtype=torch.bool)], dim=1)
            new = run.canvas(cache, mask, start, batch)
            has_eos = torch.isin(new, eos)
            if pad_token_id is not None:
                after = (has_eos.cumsum(-1) > 0) & ~(has_eos & (has_eos.cumsum(-1) == 1))
                new = torch.where(finished[:, None] | after, pad_token_id, new)
            finished = finished | has_eos.any(-1)
            sequences = torch.cat([sequences, new], dim=1)
            if finished.all():
                break
    return sequences
