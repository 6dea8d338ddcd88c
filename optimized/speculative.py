"""Speculative decoding that reproduces a base decoder R exactly (spec/speculative.md SP1-SP4).

R is a deterministic parallel rule (temperature 0) under a cache policy: "none" (a full forward per step:
``veridec.reference.parallel.decode``) or "dual" (``veridec.optimized.parallel.decode(cache="dual")``). From a
state with R's logits, R's own next state S' is known; a draft tree (``DraftTree``) proposes states after S';
one packed forward gives logits for S' and every draft; an edge parent -> child is accepted iff R's step on
the parent's logits yields exactly the child; the deepest accepted state and its logits carry on. Every
recorded step is R's step on R's logits, so the commit order is R's, grouped into fewer forwards.

    from veridec.optimized.speculative import decode
    canvas, trace = decode(model, prompt, rule=TopK(1), cache="dual", width=1, depth=6, gen_length=64,
                           block_length=32)           # the lossless chain for sequential greedy decoding
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from veridec.canvas import initial_canvas
from veridec.checks import check_choice, check_range
from veridec.decoding import (check_decode_args, check_progress, check_rule, check_step_logits, decode_params,
                              step_budget)
from veridec.rules.drafts import DraftTree
from veridec.rules.parallel import DAPD, KLASS, Threshold
from veridec.rules.step import parallel_step, step_view
from veridec.trace import Decoded, Trace, record_step

from .packed import packed_window_logits, stacked_canvas_logits, window_from_raw

POLICIES = ("none", "dual")


@torch.no_grad()
def decode(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, *, rule, cache: str = "dual",
           width: int = 1, depth: int = 4, alternatives: str = "position", gen_length: int = 128,
           block_length: int = 32, mask_id: int | None = None, record_logits: bool = False,
           lookahead: int = 0, lookahead_threshold: float = 0.9, stats: dict | None = None) -> Decoded:
    """Decode one prompt [1, P] with R = (``rule`` at temperature 0, ``cache``), verifying a WxD draft tree per
    forward. Returns R's canvas and a trace of R's steps; counters count the packed forwards. ``stats``, when
    given, receives the wall seconds spent building drafts ("draft_seconds") and in total ("total_seconds"),
    and the tokens inter-block speculation committed ("lookahead_tokens").

    ``lookahead`` = n > 0 (dual only) is inter-block speculation, Tier A (SP4): verification windows extend n
    blocks past the current one (their queries see the branch's fresh keys; the block's own queries still see
    exactly what R's dual step sees), and when a verified state completes a block, the next blocks' masks whose
    confidence there is >= ``lookahead_threshold`` are committed before R's refresh of the next block."""
    started = time.perf_counter()
    tree = DraftTree(width, depth, alternatives)
    check_arguments(rule, cache, tree, gen_length, block_length, lookahead, lookahead_threshold)
    mask_id = model.special.mask_id if mask_id is None else mask_id
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, mask_id)
    if prompt.shape[0] != 1:
        raise ValueError(f"prompt: speculative decoding takes one prompt at a time (batch size 1), "
                         f"got {prompt.shape[0]}")
    trace = Trace(f"speculative-{rule.name}-{cache}-W{width}D{depth}" + (f"-inter{lookahead}" if lookahead else ""),
                  {**decode_params(rule, gen_length, block_length, 0.0, "low_confidence", mask_id),
                   "cache": cache, "width": width, "depth": depth, "alternatives": alternatives,
                   "lookahead": lookahead, "lookahead_threshold": lookahead_threshold}, prompt.shape[1], 1)
    run = Run(model, rule, cache, tree, x, attention_mask, mask_id, trace, record_logits,
               lookahead * block_length, lookahead_threshold)
    for block in range(gen_length // block_length):
        run.block(block, prompt.shape[1] + block * block_length, prompt.shape[1] + (block + 1) * block_length)
    if stats is not None:
        stats.update(draft_seconds=run.draft_seconds, total_seconds=time.perf_counter() - started,
                     lookahead_tokens=run.lookahead_tokens)
    return Decoded(run.x, trace)


def check_arguments(rule, cache: str, tree: DraftTree, gen_length: int, block_length: int, lookahead: int,
                    lookahead_threshold: float) -> None:
    """Clear errors for what speculation cannot serve (SP5)."""
    check_rule(rule)
    check_decode_args(gen_length, block_length, 0.0, "low_confidence", "lowest")
    check_choice("cache", cache, POLICIES)
    tree.check_block(block_length)
    check_range("lookahead", lookahead, low=0, integer=True)
    check_range("lookahead_threshold", lookahead_threshold, low=0, high=1, low_open=True)
    if lookahead and cache != "dual":
        raise ValueError(f"lookahead needs cache='dual' (it extends the dual cache's verification window), "
                         f"got cache={cache!r}")
    if isinstance(rule, (KLASS, DAPD)):
        raise ValueError(f"rule {rule.name!r} is not supported: speculation needs a stateless rule whose step "
                         "depends on the logits alone (KLASS keeps history, DAPD needs attention weights)")


@dataclass
class Run:
    """One decode's state; ``block`` runs R's loop for one block with speculation."""

    model: object
    rule: object
    cache: str
    tree: DraftTree
    x: torch.Tensor  # [1, L] the current state
    attention_mask: torch.Tensor | None
    mask_id: int
    trace: Trace
    record_logits: bool
    lookahead: int = 0  # positions past the block the verification window covers (inter-block speculation)
    lookahead_threshold: float = 1.0
    kv: object = field(default=None, init=False)  # the dual cache, filled by each block's refresh
    draft_seconds: float = field(default=0.0, init=False)
    lookahead_tokens: int = field(default=0, init=False)

    @property
    def shift(self) -> int:
        return self.model.logit_shift

    def block(self, block: int, start: int, end: int) -> None:
        positions = torch.arange(self.x.shape[1], device=self.x.device)  # [L]
        budget = step_budget((self.x == self.mask_id) & (positions < end)[None], self.rule)
        if self.cache == "dual":  # R's refresh: a full forward that fills the cache; its step uses all masks < end
            out, self.kv = self.model.prefill(self.x, self.attention_mask)
        else:
            out = self.model(self.x, attention_mask=self.attention_mask)
        self.trace.counters.add_forward(rows=1, queries=self.x.shape[1])
        offset, logits, steps, pending = 0, out.logits, 0, None
        while (self.x[:, start:end] == self.mask_id).any():
            check_progress(steps, block, budget, self.trace)
            after, record, view = pending or self.step(logits, offset, end)  # R's step: S -> S'
            record(block)
            steps += 1
            self.x = after
            if not (self.x[:, start:end] == self.mask_id).any():
                break
            clock = time.perf_counter()
            states = self.drafts(view, offset, start, end)  # [K, 1, L]: S' and the tree's states
            self.draft_seconds += time.perf_counter() - clock
            offset = start if self.cache == "dual" else 0
            verified = self.verify(states, start, end)  # [K, 1, W, V] logits over the window at ``offset``
            chosen, accepted, pending = self.walk(states, verified, offset, block, start, end)
            steps += accepted
            self.x, logits = states[chosen], verified[chosen]
            if self.lookahead and not (self.x[:, start:end] == self.mask_id).any():
                self.commit_ahead(logits, offset, block, end)

    def step(self, logits, offset: int, end: int):
        """R's step on the current state's logits (window at ``offset``) -> (the next canvas, ``record(block)``
        which appends that step to the trace, the StepView R's rule saw)."""
        window = self.x[:, offset:offset + logits.shape[1]]
        positions = torch.arange(offset, offset + window.shape[1], device=window.device)
        candidates = (window == self.mask_id) & (positions < end)[None]
        result = parallel_step(self.rule, logits, window, candidates)
        check_step_logits(logits, result.view.token_probs, candidates, self.trace.progress, offset=offset)
        after = self.x.clone()
        after[:, offset:offset + window.shape[1]] = result.x

        def record(block: int) -> None:
            record_step(self.trace, block, window, result.x, self.mask_id, result.confidence, result.choice_logits,
                        result.order, self.record_logits, offset=offset)

        return after, record, result.view

    def drafts(self, view, offset: int, start: int, end: int) -> torch.Tensor:
        """S' (= self.x) and the draft states after it [K, 1, L], from what R's step just saw (``view`` of the
        window at ``offset``): S''s masked block positions by that step's confidence ranking, their top tokens."""
        ranked = [offset + i for i in view.ranking[0].tolist()
                  if start <= offset + i < end and self.x[0, offset + i] == self.mask_id]
        block_probs = view.probs[0, start - offset:end - offset]  # [W, V]
        by_probability = torch.sort(block_probs, dim=-1, descending=True, stable=True).indices  # ties: lowest id
        top = by_probability[:, :self.tree.width]  # [W, width]
        nodes = self.tree.nodes(ranked, [top[p - start].tolist() for p in ranked])
        states = [self.x]
        for added in nodes:
            state = self.x.clone()
            for position, token in added:
                state[0, position] = token
            states.append(state)
        return torch.stack(states)
    def verify(self, states: torch.Tensor, start: int, end: int) -> torch.Tensor:
        """Logits R's forward would give for each state: one packed call."""
        if self.cache == "none":
            logits = stacked_canvas_logits(self.model, states, self.attention_mask)  # [K, 1, L, V]
            self.trace.counters.add_forward(rows=states.shape[0], queries=states.shape[2])
            return logits
        stop = min(end + self.lookahead, states.shape[2])  # inter-block speculation widens the window
        fed = torch.arange(start - self.shift, stop, device=states.device)[None]  # [1, Q]
        split = end if stop > end else None  # the block's queries see what R's dual step sees
        raw = packed_window_logits(self.model, states[:, :, start - self.shift:stop], fed, self.kv, split)
        self.trace.counters.add_forward(rows=1, queries=states.shape[0] * fed.shape[1], full=False)
        return window_from_raw(raw, self.shift, stop - start)

    def commit_ahead(self, logits, offset: int, block: int, end: int) -> None:
        """Inter-block speculation (Tier A): commit the next block's masks whose confidence in these logits
        (the completed state's, over the widened window) reaches the threshold; recorded as a step."""
        stop = min(end + self.lookahead, offset + logits.shape[1])
        window = self.x[:, offset:offset + logits.shape[1]]
        positions = torch.arange(offset, offset + window.shape[1], device=window.device)
        candidates = (window == self.mask_id) & (positions >= end)[None] & (positions < stop)[None]
        confidence = step_view(logits, logits.argmax(-1), candidates).confidence  # [B, W], -inf off the candidates
        confident = candidates & (confidence >= self.lookahead_threshold)
        if not confident.any():
            return
        result = parallel_step(Threshold(self.lookahead_threshold), logits, window, confident)
        record_step(self.trace, block + 1, window, result.x, self.mask_id, result.confidence, result.choice_logits,
                    result.order, self.record_logits, offset=offset)
        self.lookahead_tokens += int((result.x != window).sum())
        self.x = self.x.clone()
        self.x[:, offset:offset + window.shape[1]] = result.x

    def walk(self, states, verified, offset: int, block: int, start: int, end: int):
        """Follow accepted edges from S' (index 0): R's step on a node's logits must give exactly another
        node. Records each accepted step; returns (final node, accepted steps, R's step from the final node as
        ``step`` returns it, or None when that node completed the block)."""
        current, accepted = 0, 0
        while True:
            self.x = states[current]
            if not (states[current][:, start:end] == self.mask_id).any():
                return current, accepted, None
            nxt, record, view = self.step(verified[current], offset, end)
            match = [k for k in range(1, len(states)) if torch.equal(states[k], nxt)]
            if not match or torch.equal(nxt, states[current]):  # no commit: R's own loop checks the stall
                return current, accepted, (nxt, record, view)
            record(block)
            current, accepted = match[0], accepted + 1
