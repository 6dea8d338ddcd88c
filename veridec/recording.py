"""A recording proxy: wrap any model, run any decoder, and get from the model calls alone the counters and the
commit order a veridec Trace holds (spec/notation.md N8 counters), so that a decoder written elsewhere is measured
on the same scale as ours.

    proxy = RecordingModel(model)
    canvas = their_decoder(proxy, prompt, ...)            # any code that calls model(x), prefill, forward_cached
    proxy.counters()                                      # model calls, full forwards, query positions
    proxy.trace(canvas, prompt_length=prompt.shape[1])    # which masks became which tokens between calls

Each call is logged with what it was fed: a full forward or a prefill (the whole canvas), or a cached forward
(its positions and tokens, and whether it writes the cache). A commit belongs to the step of the last call that
showed its position still masked; the final canvas closes the last step. A cached call shows the canvas only
at the positions it is fed, which holds the decoders' windows (the block, or everything from it);
read-only calls (``write=False``) and full calls over another batch show hypothetical states (packed or stacked
drafts), so a decoder that makes them is measured by its counters only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .trace import Counters, StepRecord, Trace


@dataclass
class Call:
    kind: str  # "full" (model(x) or prefill: the whole canvas) or "cached" (forward_cached)
    positions: torch.Tensor  # [B, Q] canvas positions fed (host copy)
    tokens: torch.Tensor  # [B, Q] tokens fed there (host copy)
    shows_canvas: bool  # False for read-only cached calls (drafts), whose tokens are hypothetical


class CallLimitExceeded(RuntimeError):
    """A decoder made more model calls than ``RecordingModel(limit=...)`` allows (it would not stop)."""


class RecordingModel:
    """``model`` with every call logged in ``calls``; any other attribute is the model's. ``limit``: the most
    calls allowed; the next raises ``CallLimitExceeded`` (a decoder that loops forever stops there)."""

    def __init__(self, model, limit: int | None = None):
        self.model, self.calls, self.limit = model, [], limit

    def __getattr__(self, name):
        if name == "model":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **options):
        self._log_full(x)
        return self.model(x, attention_mask=attention_mask, **options)

    def prefill(self, x, attention_mask=None, *args, **options):
        self._log_full(x)
        return self.model.prefill(x, attention_mask, *args, **options)

    def forward_cached(self, tokens, positions, cache, **options):
        write = options.get("write", True)
        self._count()
        self.calls.append(Call("cached", positions.detach().cpu().clone(), tokens.detach().cpu().clone(), write))
        return self.model.forward_cached(tokens, positions, cache, **options)

    def raw_forward(self, tokens, rope_pos, **options):
        """The Dream convention's call (veridec.adapters): a full forward unless it reads a cache."""
        if options.get("cache") is None:
            self._log_full(tokens)
        else:
            self._count()
            slots = options.get("slots")
            where = rope_pos if slots is None else slots
            self.calls.append(Call("cached", where.detach().cpu().clone(), tokens.detach().cpu().clone(),
                                   slots is not None))
        return self.model.raw_forward(tokens, rope_pos, **options)

    def _count(self) -> None:
        if self.limit is not None and len(self.calls) >= self.limit:
            raise CallLimitExceeded(f"the decoder made more than {self.limit} model calls")

    def _log_full(self, x) -> None:
        self._count()
        positions = torch.arange(x.shape[1], device="cpu").expand(x.shape[0], -1)  # [B, L]
        self.calls.append(Call("full", positions, x.detach().cpu().clone(), True))

    def counters(self) -> Counters:
        """N8 from the log: one model call each; a full forward per full call; B x Q query positions per call."""
        counters = Counters()
        for call in self.calls:
            counters.add_forward(rows=call.tokens.shape[0], queries=call.tokens.shape[1], full=call.kind == "full")
        return counters

    def trace(self, canvas: torch.Tensor, prompt_length: int, mask_id: int | None = None) -> Trace:
        """The commit order the calls show, ending at the decode's final ``canvas`` [B, L]: one step per call,
        holding the masks that call's logits decided: a commit is placed at the last call that showed its
        position still masked (a cached call shows only the positions it is fed, so a commit outside the window,
        such as a prompt mask decided by a block's full refresh, is placed at that refresh, not at the next call
        that happens to show it). Positions are in increasing order within a step (the calls do not show the
        order inside a step). Raises ValueError for a decoder whose
        calls show hypothetical states (another batch size, read-only drafts)."""
        mask_id = self.model.special.mask_id if mask_id is None else mask_id
        final = canvas.detach().cpu()
        batch, length = final.shape
        if not self.calls or self.calls[0].kind != "full":
            raise ValueError("the decoder's first call must be a full forward or a prefill (it shows the canvas)")
        if any(not c.shows_canvas or c.tokens.shape[0] != batch for c in self.calls):
            raise ValueError("this decoder's calls show drafts or stacked states, not its canvas: use counters()")
        trace = Trace("recorded", {}, prompt_length, batch)
        trace.counters = self.counters()
        seen = self.calls[0].tokens.clone()  # [B, L] the canvas as the calls show it
        last_masked = torch.zeros(batch, length, dtype=torch.long, device="cpu")  # [B, L] last call showing it masked
        step_of = torch.full((batch, length), -1, dtype=torch.long, device="cpu")  # [B, L] a commit's step
        closing = Call("full", torch.arange(length, device="cpu").expand(batch, -1), final, True)  # the end
        for index, call in enumerate(self.calls[1:] + [closing], start=1):
            now = seen.clone()
            now.scatter_(1, call.positions, call.tokens)
            committed = (seen == mask_id) & (now != mask_id)  # [B, L] commits this call shows
            step_of[committed] = last_masked[committed]
            shown_masked = torch.zeros_like(now, dtype=torch.bool).scatter_(1, call.positions, call.tokens == mask_id)
            last_masked[shown_masked] = index
            seen = now
        trace.steps = [_commits(step_of == step, final) for step in range(len(self.calls))]
        return trace


def _commits(chosen: torch.Tensor, final: torch.Tensor) -> StepRecord:
    """The positions ``chosen`` [B, L] with their final tokens, as one step (no confidences are observed)."""
    positions = [row.nonzero().flatten().tolist() for row in chosen]
    tokens = [final[row, where].tolist() for row, where in enumerate(positions)]
    nan = float("nan")
    return StepRecord(0, positions, tokens, [[nan] * len(p) for p in positions], [[nan] * len(p) for p in positions],
                      [nan] * len(positions))
