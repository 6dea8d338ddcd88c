"""WINO's step (spec/wino.md WN2-WN5): draft the block's masks above ``threshold``, revoke earlier drafts whose
verified confidence falls below ``threshold_back``. Row-level and pure: the decoders own the loop."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..checks import check_choice, check_range
from .common import TIES, check_blocks, propose, token_probability, top_k_indices

FIRST_LAST = 30  # WN3: the revocation cap's "accepted last step" at a block's start
ACCEPT_SHARE, ACCEPT_MIN, ACCEPT_MAX = (7, 10), 5, 20  # WN4.1: max_accept = clamp(floor(0.7 n), 5, 20)


@dataclass(frozen=True)
class WinoParams:
    gen_length: int = 128
    block_length: int = 128
    temperature: float = 0.0
    threshold: float = 0.6
    threshold_back: float = 0.9
    ties: str = "lowest"

    def __post_init__(self):
        check_blocks(self.gen_length, self.block_length, 1, steps_split=False)
        check_range("temperature", self.temperature, low=0)
        check_range("threshold", self.threshold, low=0, high=1)
        check_range("threshold_back", self.threshold_back, low=0, high=1)
        check_choice("ties", self.ties, TIES)

    @property
    def num_blocks(self) -> int:
        return self.gen_length // self.block_length


def check_block_bound(taken: int, bound: int, row: int, block: int) -> None:
    """WN6: a block that starts with ``bound`` candidates ends within ``bound`` forwards."""
    if taken >= bound:
        raise RuntimeError(f"row {row}, block {block}: still masked after {bound} forwards, one per candidate "
                           "the block started with (spec WN6 proves this cannot happen)")


def check_prompt(prompt: torch.Tensor) -> None:
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be [rows, length >= 1], got {tuple(prompt.shape)}")


def max_accept(candidates: int) -> int:
    """WN4.1, in exact integers (the official float32 product agrees for every n, tests/test_wino.py)."""
    share, whole = ACCEPT_SHARE
    return min(max(share * candidates // whole, ACCEPT_MIN), ACCEPT_MAX)


def forward_layout(prompt_len: int, params: WinoParams, block: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """WN2 -> RoPE positions [N] and an additive attention bias [N, N] (0 = sees, -inf = not), N = P + G + B."""
    main, width = prompt_len + params.gen_length, params.block_length
    start = prompt_len + block * width
    positions = torch.cat([torch.arange(main, device=device), torch.arange(start, start + width, device=device)])
    sees = torch.ones(main + width, main + width, dtype=torch.bool, device=device)  # [query, key]
    sees[:main, main:] = False  # prompt and generation never see the verification block
    slots = torch.arange(width, device=device)
    sees[main + slots, start + slots] = False  # slot j does not see the token it verifies
    bias = torch.zeros(sees.shape, dtype=torch.float64, device=device).masked_fill(~sees, -math.inf)
    return positions, bias


class WinoStep(NamedTuple):
    canvas: torch.Tensor  # [N] after the step
    candidates: torch.Tensor  # [N] bool, M after the step
    verified: torch.Tensor  # [B] bool, U after the step
    last: int  # drafts accepted this step
    commits: list[tuple[int, int, float]]  # (position, token, confidence), by decreasing confidence
    revokes: list[tuple[int, int, float]]  # (position, old token, verified confidence), by increasing one
    max_accept: int
    margin: float  # WN5: the step's smallest decision margin


def wino_step(logits: torch.Tensor, canvas: torch.Tensor, candidates: torch.Tensor, verified: torch.Tensor,
              last: int, *, start: int, params: WinoParams, mask_id: int,
              generator: torch.Generator | None = None) -> WinoStep:
    """One WN4 step of one row: logits [N, V], canvas [N], candidates [N] bool, verified [B] bool; block
    positions start at ``start``, verification slots at N - B."""
    width = params.block_length
    slots = canvas.shape[0] - width
    proposal = propose(logits[None], params.temperature, generator)  # noise over [1, N, V] (SQ1.4)
    tokens = proposal.tokens[0].clone()  # [N]
    block_tokens = canvas[start: start + width]  # [B]
    tokens[slots:] = torch.where(verified, block_tokens, tokens[slots:])  # slots score the committed tokens
    scores = token_probability(torch.softmax(logits.to(torch.float64), dim=-1)[None], tokens[None])[0]  # [N]
    confidence = scores.masked_fill(~candidates, -math.inf)  # [N]
    back = scores[slots:].masked_fill(~verified, math.inf)  # [B]
    cap = max_accept(int(candidates.sum()))
    commit = _drafts(confidence, cap, params)
    revoke = _revocations(back, last, params) if commit.numel() > 1 else commit[:0]
    canvas = canvas.clone()
    canvas[commit] = tokens[commit]
    old = canvas[start + revoke]
    canvas[start + revoke] = mask_id
    candidates, verified = candidates.clone(), verified.clone()
    candidates[commit] = False
    candidates[start + revoke] = True
    in_block = commit[(commit >= start) & (commit < start + width)]
    verified[in_block - start] = True
    verified[revoke] = False
    margin = _margin(confidence, back, commit, revoke, cap, last, proposal.choice_logits[0], params)
    return WinoStep(canvas, candidates, verified, int(commit.numel()),
                    [(int(i), int(tokens[i]), float(confidence[i])) for i in commit],
                    [(start + int(j), int(t), float(back[j])) for j, t in zip(revoke, old)], cap, margin)


def _drafts(confidence: torch.Tensor, cap: int, params: WinoParams) -> torch.Tensor:
    """WN4.4: every candidate strictly above the threshold, at most ``cap`` of them, at least the best one."""
    passing = int((confidence > params.threshold).sum())
    return top_k_indices(confidence, min(max(passing, 1), cap), params.ties)


def _revocations(back: torch.Tensor, last: int, params: WinoParams) -> torch.Tensor:
    """WN4.5: verified slots strictly below threshold_back; the last - 1 weakest when at least ``last`` fail."""
    failing = int((back < params.threshold_back).sum())
    count = failing if failing < last else max(last - 1, 0)
    return top_k_indices(back, count, params.ties, largest=False)


def _margin(confidence, back, commit, revoke, cap, last, choice_logits, params) -> float:
    """WN5: how far the step's closest decision is from flipping (inf when nothing could flip)."""
    gaps = [(confidence[torch.isfinite(confidence)] - params.threshold).abs(),
            (back[torch.isfinite(back)] - params.threshold_back).abs()]
    passing, finite = int((confidence > params.threshold).sum()), int(torch.isfinite(confidence).sum())
    if passing > cap:
        gaps.append(_boundary(confidence, cap, largest=True))
    elif passing == 0 and finite > 1:  # which candidate is the best one
        gaps.append(_boundary(confidence, 1, largest=True))
    if (back < params.threshold_back).sum() >= last > 1:
        gaps.append(_boundary(back, last - 1, largest=False))
    if commit.numel():
        top2 = choice_logits[commit].topk(2, dim=-1).values  # [a, 2]
        gaps.append(top2[:, 0] - top2[:, 1])
    every = torch.cat([g.reshape(-1).double() for g in gaps])
    return float(every.min()) if every.numel() else math.inf


def _boundary(scores: torch.Tensor, count: int, largest: bool) -> torch.Tensor:
    """The gap between the ``count``-th and the next entry of ``scores`` in rank order."""
    ordered = torch.sort(scores, descending=largest).values
    return (ordered[count - 1] - ordered[count]).abs().reshape(1)
