"""Reward-guided decoding, slow and plain (spec/guidance.md G6-G7b): sequential guided decoding, Best-of-N, and
the parallel rules with cached guidance.

Sequential: one token per step; every step runs a full dLLM forward and a fresh guidance computation (M
reward forward/backward passes), unmasks the masked response position most confident under the guided
distribution, and samples its token from the guided distribution at temperature T with top-p.
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import initial_canvas
from veridec.checks import check_range
from veridec.decoding import check_logits, check_rule
from veridec.guidance.guide import Guide, GuidanceParams, guidance_vector
from veridec.guidance.sampling import sample_token, slot_confidence
from veridec.trace import Decoded, Trace, record_step

from .parallel import decode as parallel_decode


@torch.no_grad()
def generate(model, prompt: torch.Tensor, reward, prompt_texts: list[str], attention_mask: torch.Tensor | None = None,
             *, gen_length: int = 128, guidance: GuidanceParams | None = GuidanceParams(), temperature: float = 0.7,
             top_p: float = 0.95, mask_id: int | None = None, generator: torch.Generator | None = None) -> Decoded:
    """Decode ``prompt`` [B, P] guided by ``reward`` (bound here to ``prompt_texts``); ``guidance=None`` decodes
    unguided with the same sampling. Counters: full forwards, reward forward and backward passes."""
    check_generator(generator)
    check_range("gen_length", gen_length, low=1, integer=True)
    check_range("temperature", temperature, low=0, low_open=True)
    check_range("top_p", top_p, low=0, high=1, low_open=True)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    batch, prompt_len = prompt.shape
    if len(prompt_texts) != batch:
        raise ValueError(f"prompt_texts: {len(prompt_texts)} texts for {batch} prompts")
    bound = None if guidance is None else reward.bind(prompt_texts)
    name = "sequential-unguided" if guidance is None else f"sequential-{guidance.method}"
    trace = Trace(name, {"gen_length": gen_length, "temperature": temperature, "top_p": top_p,
                         "guidance": None if guidance is None else guidance.__dict__}, prompt_len, batch)
    for _ in range(gen_length):
        logits = model(x, attention_mask=attention_mask).logits[:, prompt_len:]  # [B, G, V]
        trace.counters.add_forward(rows=batch, queries=x.shape[1])
        response = x[:, prompt_len:]
        masked = response == mask_id
        check_logits(logits, trace.progress, offset=prompt_len)
        if guidance is not None:
            logits = logits + guidance_vector(bound, logits, response, masked, guidance, generator, trace.counters)
            check_logits(logits, trace.progress, offset=prompt_len, what="the guided logits")
        after, confidence, order = guided_step(logits, response, masked, mask_id, temperature, top_p, generator)
        record_step(trace, 0, response, after, mask_id, confidence, logits, order, offset=prompt_len)
        x = torch.cat([x[:, :prompt_len], after], dim=1)
    return Decoded(x, trace)


def guided_step(logits, response, masked, mask_id, temperature, top_p, generator):
    """Unmask the most confident masked slot per row (``slot_confidence`` of the guided logits, ties to the
    lowest slot) with a token sampled from top-p(softmax(logits / T)) (``sample_token``)."""
    confidence = slot_confidence(logits, masked, mask_id)  # [B, G]
    chosen = torch.sort(confidence, dim=1, descending=True, stable=True).indices[:, 0]  # [B]
    rows = torch.arange(logits.shape[0], device=logits.device)
    tokens, _ = sample_token(logits[rows, chosen], mask_id, temperature, top_p, generator=generator)
    after = response.clone()
    active = masked.any(dim=1)
    after[rows[active], chosen[active]] = tokens[active]
    order = [[int(c)] if a else [] for c, a in zip(chosen, active)]
    return after, confidence, order


@torch.no_grad()
def best_of_n(model, prompt: torch.Tensor, reward, prompt_texts: list[str], attention_mask=None, *, n: int = 4,
              gen_length: int = 128, temperature: float = 0.7, top_p: float = 0.95,
              generator: torch.Generator | None = None) -> tuple[Decoded, torch.Tensor]:
    """N unguided samples per prompt; keep the one the reward scores highest. Returns (best, scores [N, B])."""
    check_generator(generator)
    check_range("n", n, low=1, integer=True)
    bound = reward.bind(prompt_texts)
    samples = [generate(model, prompt, reward, prompt_texts, attention_mask, gen_length=gen_length, guidance=None,
                        temperature=temperature, top_p=top_p, generator=generator) for _ in range(n)]
    scores = torch.stack([bound.score_tokens(s.canvas[:, prompt.shape[1]:]).detach() for s in samples])  # [N, B]
    best = scores.argmax(dim=0)  # [B]
    canvas = torch.stack([samples[int(b)].canvas[i] for i, b in enumerate(best)])
    trace = samples[0].trace
    for s in samples[1:]:
        trace.counters.full_forwards += s.trace.counters.full_forwards
        trace.counters.query_positions += s.trace.counters.query_positions
        trace.counters.model_calls += s.trace.counters.model_calls
    trace.counters.reward_forwards += n
    return Decoded(canvas, trace), scores


def parallel_guided(model, prompt: torch.Tensor, reward, prompt_texts: list[str], rule, attention_mask=None, *,
                    gen_length: int = 128, block_length: int | None = None,
                    guidance: GuidanceParams | None = GuidanceParams(), temperature: float = 0.7,
                    generator: torch.Generator | None = None) -> Decoded:
    """A parallel rule (Conf top-k, Fast-dLLM, KLASS, EB-Sampler, DAPD, ...) with cached guidance: one guidance
    computation per decoding step, shared by every token the step commits (G7b). Tokens are sampled at
    ``temperature`` (the rule's Gumbel-max proposal); one block of ``gen_length`` unless ``block_length``."""
    check_generator(generator)
    check_rule(rule)
    guide = None if guidance is None else Guide(reward.bind(prompt_texts), guidance, prompt.shape[1],
                                                model.special.mask_id, generator)
    return parallel_decode(model, prompt, attention_mask, rule=rule, gen_length=gen_length,
                           block_length=block_length or gen_length, temperature=temperature, generator=generator,
                           guide=guide, name=f"{rule.name}-{'unguided' if guidance is None else guidance.method}")
