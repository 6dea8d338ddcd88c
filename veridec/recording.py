"""A recording proxy: wrap any model, run any decoder, and get from the model calls alone the counters and the
commit order a veridec Trace holds (spec/notation.md N8 counters), so that a decoder written elsewhere is measured
on the same scale as ours.

    proxy = RecordingModel(model)
    canvas = their_decoder(proxy, prompt, ...)            # any code that calls model(x), prefill, forward_cached
    proxy.counters()                                      # model calls, full forwards, query positions
    proxy.trace(canvas, prompt_length=prompt.shape[1])    # which masks became which tokens between calls

Each call is logged with what it was fed: a full forward or a prefill (the whole canvas), or a cached forward
(its positions and tokens, and whether it writes the cache). Between two calls that show the canvas, the masks
that became tokens are one step's commits; the final canvas closes the last step. A cached call shows the
canvas only at the positions it is fed, which holds the decoders' windows (the block, or everything from it);
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


class RecordingModel:
    """``model`` with every call logged in ``calls``; any other attribute is the model's."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **options):
        self._log_full(x)
        return self.model(x, attention_mask=attention_mask, **options)

    def prefill(self, x, attention_mask=None, *args, **options):
        self._log_full(x)
        return self.model.prefill(x, attention_mask, *args, **options)

    def forward_cached(self, tokens, positions, cache, **options):
        write = options.get("write", True)
        self.calls.append(Call("cached", positions.detach().cpu().clone(), tokens.detach().cpu().clone(), write))
        return self.model.forward_cached(tokens, positions, cache, **options)

    def _log_full(self, x) -> None:
        positions = torch.arange(x.shape[1], device="cpu").expand(x.shape[0], -1)  # [B, L]
        self.calls.append(Call("full", positions, x.detach().cpu().clone(), True))

    def counters(self) -> Counters:
        """N8 from the log: one model call each; a full forward per full call; B x Q query positions per call."""
        counters = Counters()
        for call in self.calls:
            counters.add_forward(rows=call.tokens.shape[0], queries=call.tokens.shape[1], full=call.kind == "full")
        return counters

    def trace(self, canvas: torch.Tensor, prompt_length: int, mask_id: int | None = None) -> Trace:
        """The commit order the calls show, ending at the decode's final ``canvas`` [B, L]: one step per call
        (the masks that became tokens before the next call that shows them), positions in increasing order
        within a step (the calls do not show the order inside a step). Raises ValueError for a decoder whose
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
        closing = Call("full", torch.arange(length, device="cpu").expand(batch, -1), final, True)  # the end
        for call in self.calls[1:] + [closing]:
            now = seen.clone()
            now.scatter_(1, call.positions, call.tokens)
            trace.steps.append(_commits(seen, now, mask_id))
            seen = now
        return trace


def _commits(before: torch.Tensor, after: torch.Tensor, mask_id: int) -> StepRecord:
    """The masks of ``before`` [B, L] that are tokens in ``after``, as one step (no confidences are observed)."""
    positions, tokens = [], []
    for row in range(before.shape[0]):
        changed = ((before[row] == mask_id) & (after[row] != mask_id)).nonzero().flatten().tolist()
        positions.append(changed)
        tokens.append(after[row, changed].tolist())
    nan = float("nan")
    return StepRecord(0, positions, tokens, [[nan] * len(p) for p in positions], [[nan] * len(p) for p in positions],
                      [nan] * len(positions))
