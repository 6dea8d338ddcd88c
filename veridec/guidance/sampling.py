"""The guided token choice shared by sequential guided decoding and FastGuide (spec/guidance.md G6, GF1): which
masked slot is most confident under the guided logits, and which token it takes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..rules.dream import top_p_logits


def without_mask(logits: torch.Tensor, mask_id: int) -> torch.Tensor:
    """A float64 copy of ``logits`` [..., V] in which the mask token can never be chosen."""
    logits = logits.double().clone()
    logits[..., mask_id] = -torch.inf
    return logits


def slot_confidence(guided: torch.Tensor, masked: torch.Tensor, mask_id: int) -> torch.Tensor:
    """max softmax(guided) per masked slot [B, G] (the mask token excluded), -inf at unmasked slots."""
    return torch.where(masked, F.softmax(without_mask(guided, mask_id), dim=-1).max(-1).values, -torch.inf)


def sample_token(phi: torch.Tensor, mask_id: int, temperature: float, top_p: float, greedy: bool = False,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """phi [B, V] guided logits of one slot per row -> (token [B], confidence max softmax(phi) [B]): a draw from
    top-p(softmax(phi / T)), or the argmax when ``greedy``; the mask token never."""
    phi = without_mask(phi, mask_id)
    confidence = F.softmax(phi, dim=-1).max(-1).values
    if greedy:
        return phi.argmax(-1), confidence
    probs = F.softmax(top_p_logits(phi / temperature, top_p), dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0], confidence
