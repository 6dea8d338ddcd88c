"""Approximate token agreement, vLLM's rule (``check_logprobs_close`` in vLLM's model tests) for masked diffusion
(spec/exactness.md EC10): at the first position whose final tokens differ, ordered by the target's commit step,
each side's token must be among the top ``top_k`` tokens of the other side's distribution there, and neither
side may prefer its own token by more than ``max_gap`` nats. A side's distribution at a position is veridec's
model's full forward (float64 softmax) of the canvas that side held just before it committed the position
(its trace's step); later positions are not compared (they condition on different canvases)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from veridec.canvas import initial_canvas


@dataclass(frozen=True)
class Agreement:
    """vLLM's rule with its two parameters, validated on construction."""

    top_k: int = 5
    max_gap: float = math.inf  # nats: a side's log-probability of its own token minus the other's token's

    def __post_init__(self):
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"agreement top_k must be an integer >= 1, got {self.top_k!r}")
        if isinstance(self.max_gap, bool) or not isinstance(self.max_gap, (int, float)) or not self.max_gap > 0:
            raise ValueError(f"agreement max_gap must be a number of nats > 0 (inf: no bound), got {self.max_gap!r}")

    def describe(self) -> str:
        gap = "no log-probability bound" if math.isinf(self.max_gap) else f"log-probability gap <= {self.max_gap:g}"
        return f"vLLM's rule at the first divergent position: each token in the other side's top-{self.top_k}, {gap}"


def agreement_at_divergence(rule: Agreement, model, prompt, mask, ours, theirs) -> dict:
    """The rule on one case (``ours``, ``theirs``: the sides, with canvases [B, L] and traces): ``{"agrees":
    True}`` when every token is equal, ``{"agrees": None, "why": ...}`` when a side has no commit order to place
    the position, else the position, both tokens, each token's rank and log-probability under each side's
    distribution, the larger gap and the verdict."""
    if ours.canvas is None or theirs.canvas is None or ours.canvas.shape != theirs.canvas.shape:
        return {"agrees": None, "why": "a side returned no canvas of the target's shape"}
    if torch.equal(ours.canvas.cpu(), theirs.canvas.cpu()):
        return {"agrees": True}
    if ours.trace is None or theirs.trace is None or ours.trace.events is not None:
        return {"agrees": None, "why": "a side without a commit order (cached calls, drafts or revocable events)"}
    row, position = _first_divergence(ours.canvas.cpu(), theirs.canvas.cpu(), ours.trace, prompt.shape[1])
    target_token, candidate_token = int(ours.canvas[row, position]), int(theirs.canvas[row, position])
    sides = {}
    for name, side in (("target", ours), ("candidate", theirs)):
        step = _step_of(side.trace, row, position)
        if step is None:
            return {"agrees": None, "why": f"the {name}'s trace does not place position {position} of row {row}"}
        sides[name] = _log_probabilities(model, prompt, mask, side, step, row, position)  # [V]
    return _judge(rule, row, position, target_token, candidate_token, sides)


def _judge(rule: Agreement, row, position, target_token, candidate_token, sides) -> dict:
    rank = lambda logp, token: int((logp > logp[token]).sum())  # 0: the most probable (ties share the rank)
    at_target, at_candidate = sides["target"], sides["candidate"]
    gap = max((at_target[target_token] - at_target[candidate_token]).item(),
              (at_candidate[candidate_token] - at_candidate[target_token]).item())
    found = {"row": row, "position": position, "target_token": target_token, "candidate_token": candidate_token,
             "candidate_token_rank_in_target": rank(at_target, candidate_token),
             "target_token_rank_in_candidate": rank(at_candidate, target_token), "gap": gap}
    found["agrees"] = (found["candidate_token_rank_in_target"] < rule.top_k
                       and found["target_token_rank_in_candidate"] < rule.top_k and gap <= rule.max_gap)
    return found


def _first_divergence(a: torch.Tensor, b: torch.Tensor, trace, prompt_length: int) -> tuple[int, int]:
    """The (row, position) of the first differing token in the target's commit order (then row, then position);
    positions the target never committed (the prompt) come last, in reading order."""
    differ = (a != b).nonzero().tolist()
    never = len(trace.steps)
    order = lambda rp: (_step_of(trace, *rp) if _step_of(trace, *rp) is not None else never, rp[0], rp[1])
    return tuple(min(differ, key=order))


def _step_of(trace, row: int, position: int) -> int | None:
    for index, record in enumerate(trace.steps):
        if position in record.positions[row]:
            return index
    return None


def _log_probabilities(model, prompt, mask, side, step: int, row: int, position: int) -> torch.Tensor:
    """log softmax (float64) of veridec's full forward at ``position`` of ``row`` on the canvas ``side`` held
    before ``step``: its final canvas with the commits of that step and later masked again."""
    mask_id = model.special.mask_id
    canvas = side.canvas.detach().cpu().clone()  # [B, L]
    for record in side.trace.steps[step:]:
        for r, positions in enumerate(record.positions):
            canvas[r, positions] = mask_id
    _, full_mask = initial_canvas(model, prompt, mask, canvas.shape[1] - prompt.shape[1], mask_id)
    with torch.no_grad():
        logits = model(canvas.to(model.device), attention_mask=full_mask).logits[row, position]  # [V]
    return torch.log_softmax(logits.double().cpu(), dim=-1)
