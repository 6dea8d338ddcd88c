"""Gradient-based reward guidance (spec/guidance.md G4-G5): EntRGi, Expectation and APS.

For the masked response positions with dLLM logits phi_0 [B, G, V]: M steps of Adam (a fresh optimizer per
call) on phi to raise the reward of the soft response
    e_hat = e_tilde + sg(w (e_bar - e_tilde)),  e_tilde = softmax(phi / T) @ E,  e_bar = E[x ~ top-p(softmax(phi / T))]
with w = H(softmax(phi / T)) / log |V| (EntRGi), w = 0 (Expectation: the expected embedding) or w = 1 (APS: the
sampled token's embedding, straight-through). Unmasked positions enter with their token's embedding. The
guidance vector is r = phi_M - phi_0 (zero at unmasked positions); guided logits are phi_0 + r.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checks import check_choice, check_range
from ..rules.common import entropy
from ..rules.dream import top_p_logits

METHODS = ("entrgi", "expectation", "aps")


@dataclass(frozen=True)
class GuidanceParams:
    method: str = "entrgi"
    steps: int = 3  # M: reward backward passes per guidance computation (seed 000 B.2)
    lr: float = 0.5
    temperature: float = 0.7
    top_p: float = 0.95

    def __post_init__(self):
        check_choice("method", self.method, METHODS)
        check_range("steps", self.steps, low=1, integer=True)
        check_range("lr", self.lr, low=0, low_open=True)
        check_range("temperature", self.temperature, low=0, low_open=True)
        check_range("top_p", self.top_p, low=0, high=1, low_open=True)


def mixing_weight(probs: torch.Tensor, method: str) -> torch.Tensor:
    """w [B, G, 1]: normalized entropy H(q) / log |V| (EntRGi), 0 (Expectation) or 1 (APS)."""
    if method == "expectation":
        return probs.new_zeros(*probs.shape[:-1], 1)
    if method == "aps":
        return probs.new_ones(*probs.shape[:-1], 1)
    nats = entropy(probs, floor=1e-30)[..., None]  # [B, G, 1]
    return nats / math.log(probs.shape[-1])


def soft_embeddings(phi: torch.Tensor, table: torch.Tensor, params: GuidanceParams,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """phi [B, G, V] -> e_hat [B, G, D] (differentiable in phi through e_tilde only)."""
    probs = F.softmax(phi / params.temperature, dim=-1)  # [B, G, V]
    expected = probs @ table  # [B, G, D]
    with torch.no_grad():
        filtered = F.softmax(top_p_logits(phi.detach() / params.temperature, params.top_p), dim=-1)
        sampled = torch.multinomial(filtered.reshape(-1, filtered.shape[-1]), 1, generator=generator)
        sampled_embedding = table[sampled.reshape(filtered.shape[:-1])]  # [B, G, D]
        weight = mixing_weight(probs.detach(), params.method)
    return expected + (weight * (sampled_embedding - expected)).detach()


def guidance_vector(reward, logits: torch.Tensor, tokens: torch.Tensor, masked: torch.Tensor,
                    params: GuidanceParams, generator: torch.Generator | None = None, counters=None) -> torch.Tensor:
    """r [B, G, V] for a response of G slots: ``logits`` phi_0 [B, G, V] (dLLM logits of those slots), ``tokens``
    [B, G] (current tokens; used where not ``masked`` [B, G]); ``reward`` is bound to the batch's prompts."""
    table = reward.embedding.to(logits.dtype)
    if table.shape[0] < logits.shape[-1]:  # a model vocabulary padded past the tokenizer: zero embeddings
        table = torch.cat([table, table.new_zeros(logits.shape[-1] - table.shape[0], table.shape[1])])
    table = table[:logits.shape[-1]]
    phi0 = logits.detach()
    phi = phi0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([phi], lr=params.lr)
    hard = table[tokens.clamp(max=table.shape[0] - 1)]  # [B, G, D]
    with torch.enable_grad():
        for step in range(params.steps):
            optimizer.zero_grad()
            soft = soft_embeddings(phi, table, params, generator)
            response = torch.where(masked[..., None], soft, hard)
            loss = -reward.score(response).sum()
            if not torch.isfinite(loss):
                raise ValueError(f"guidance step {step + 1} of {params.steps}: the reward's score is {-loss.item()}, "
                                 "not a finite number")
            loss.backward()
            if torch.isnan(phi.grad).any():
                raise ValueError(f"guidance step {step + 1} of {params.steps}: the reward's gradient holds NaN")
            optimizer.step()
            if counters is not None:
                counters.reward_forwards += 1
                counters.reward_backwards += 1
    moved = torch.where(torch.isfinite(phi0), phi.detach() - phi0, 0.0)  # -inf logits stay -inf (no nan)
    return torch.where(masked[..., None], moved, 0.0)


class Guide:
    """Cached guidance as a logits hook for the parallel decoders (spec/guidance.md G7b): once per decoding
    step, the guidance vector of the response slots [prompt_length, L) is computed and added to the logits."""

    def __init__(self, reward, params: GuidanceParams, prompt_length: int, mask_id: int,
                 generator: torch.Generator | None = None):
        self.reward, self.params, self.prompt_length, self.mask_id = reward, params, prompt_length, mask_id
        self.generator = generator

    def __call__(self, x: torch.Tensor, logits: torch.Tensor, counters=None) -> torch.Tensor:
        """x [B, L], logits [B, L, V] token-aligned -> guided logits (unchanged outside the response)."""
        response = x[:, self.prompt_length:]
        phi0 = logits[:, self.prompt_length:]
        r = guidance_vector(self.reward, phi0, response, response == self.mask_id, self.params, self.generator,
                            counters)
        return torch.cat([logits[:, :self.prompt_length], phi0 + r.to(phi0.dtype)], dim=1)
