"""Seed 000 §3.1.1's observations as reusable measurements (spec/guidance.md GO1-GO2).

GO1 (guidance reuse): along a sequential guided trajectory, at every step the current dLLM logits are combined
once with fresh guidance and once with guidance computed ``age`` steps earlier; the total variation between
the two guided distributions at the still-masked slots is binned by the slot's guided confidence when the older
guidance was computed. Guidance randomness is seeded per step, so fresh and cached guidance differ only by the
state they were computed from (seed 000 Appendix B.3).

GO2 (incompatible proposals): along a sequential trajectory, at evenly spaced states, the two most confident
slots a, b and their argmax tokens, with and without guidance; after committing x_a, one more unguided
forward gives PMI = log p(x_b | x_a) - log p(x_b); a pair is incompatible when PMI < -1.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..guidance.guide import GuidanceParams, guidance_vector

BINS = (0.0, 0.5, 0.7, 0.9, 0.99, 1.0001)


def _sequential_states(model, x: torch.Tensor, prompt_len: int, mask_id: int):
    """Greedy sequential unguided trajectory: yields (canvas, response logits) before each commit."""
    while (x[:, prompt_len:] == mask_id).any():
        logits = model(x).logits[:, prompt_len:].double()
        yield x, logits
        masked = x[0, prompt_len:] == mask_id
        probs = F.softmax(logits[0], -1)
        probs[:, mask_id] = 0
        confidence = torch.where(masked, probs.max(-1).values, -torch.inf)
        slot = int(torch.argmax(confidence))
        x = x.clone()
        x[0, prompt_len + slot] = int(probs[slot].argmax())


@torch.no_grad()
def guidance_reuse_tv(model, reward, prompt: torch.Tensor, gen_length: int, ages=(1, 3, 7),
                      params: GuidanceParams = GuidanceParams(), seed: int = 0) -> dict:
    """GO1 on one prompt [1, P] (``reward`` bound to it): {age: {"bins": BINS, "mean_tv": [...], "count": [...]}}."""
    mask_id, prompt_len = model.special.mask_id, prompt.shape[1]
    x = torch.cat([prompt, torch.full((1, gen_length), mask_id, device=prompt.device)], dim=1)
    history = []  # (guidance r [G, V], guided confidence [G]) per step
    sums = {a: np.zeros(len(BINS) - 1) for a in ages}
    counts = {a: np.zeros(len(BINS) - 1, dtype=int) for a in ages}
    for step, (canvas, logits) in enumerate(_sequential_states(model, x, prompt_len, mask_id)):
        response = canvas[:, prompt_len:]
        masked = response == mask_id
        r = guidance_vector(reward, logits, response, masked, params, torch.Generator().manual_seed(seed + step))
        fresh = F.softmax(logits + r, -1)[0]
        history.append((r[0], fresh.max(-1).values))
        for age in ages:
            if step - age < 0:
                continue
            old_r, old_confidence = history[step - age]
            cached = F.softmax(logits[0] + old_r, -1)
            tv = (fresh - cached).abs().sum(-1) / 2  # [G]
            bins = np.digitize(old_confidence[masked[0]].numpy(), BINS) - 1
            np.add.at(sums[age], bins, tv[masked[0]].numpy())
            np.add.at(counts[age], bins, 1)
    return {age: {"bins": list(BINS), "mean_tv": (sums[age] / np.maximum(counts[age], 1)).round(6).tolist(),
                  "count": counts[age].tolist()} for age in ages}


@torch.no_grad()
def incompatible_pairs(model, reward, prompt: torch.Tensor, gen_length: int, states: int = 64,
                       params: GuidanceParams = GuidanceParams(), seed: int = 0, threshold: float = -1.0) -> dict:
    """GO2 on one prompt [1, P]: PMI of the top-2 co-proposed tokens without and with guidance at up to
    ``states`` evenly spaced states of the sequential trajectory."""
    mask_id, prompt_len = model.special.mask_id, prompt.shape[1]
    x = torch.cat([prompt, torch.full((1, gen_length), mask_id, device=prompt.device)], dim=1)
    trajectory = list(_sequential_states(model, x, prompt_len, mask_id))[:-1]  # the last state has one mask
    picks = np.unique(np.linspace(0, len(trajectory) - 1, min(states, len(trajectory))).round().astype(int))
    pmis = {"unguided": [], "guided": []}
    for i in picks:
        canvas, logits = trajectory[i]
        response = canvas[:, prompt_len:]
        masked = response == mask_id
        r = guidance_vector(reward, logits, response, masked, params, torch.Generator().manual_seed(seed + int(i)))
        for kind, scores in (("unguided", logits), ("guided", logits + r)):
            pmis[kind].append(pair_pmi(model, canvas, logits[0], scores[0], masked[0], prompt_len, mask_id))
    return {kind: {"pmi": values, "incompatible": int(sum(v < threshold for v in values)),
                   "mean_pmi": float(np.mean(values)) if values else None} for kind, values in pmis.items()}


def pair_pmi(model, canvas, logits, scores, masked, prompt_len: int, mask_id: int) -> float:
    """The two most confident slots under ``scores`` [G, V] and their argmax tokens; PMI under the dLLM."""
    scores = scores.clone()
    scores[:, mask_id] = -torch.inf
    confidence = torch.where(masked, F.softmax(scores, -1).max(-1).values, -torch.inf)
    a, b = torch.sort(confidence, descending=True, stable=True).indices[:2].tolist()
    token_a, token_b = int(scores[a].argmax()), int(scores[b].argmax())
    before = F.log_softmax(logits[b], -1)[token_b]
    after_canvas = canvas.clone()
    after_canvas[0, prompt_len + a] = token_a
    after = F.log_softmax(model(after_canvas).logits[0, prompt_len + b].double(), -1)[token_b]
    return float(after - before)
