"""A recording proxy: wrap any model, run any decoder, and get from the model calls alone the counters and the
commit order a veridec Trace holds (spec/notation.md N8 counters), so that a decoder written elsewhere is measured
on the same scale as ours.

    proxy = RecordingModel(model)
    canvas = their_decoder(proxy, prompt, ...)            # any code that calls model(x), prefill, forward_cached
    proxy.counters()                                      # model calls, full forwards, query positions
    proxy.trace(canvas, prompt_length=prompt.shape[1])    # which masks became which tokens between calls

Each call is logged with what it was fed: a full forward or a prefill (the whole canvas), a cached forward
(its positions and tokens, and whether it writes the cache), or a block-diffusion call (its positions and tokens:
the canvas there, stored or not). A commit belongs to the step of the last call that
showed its position still masked; the final canvas closes the last step. A cached call shows the canvas only
at the positions it is fed, which holds the decoders' windows (the block, or everything from it);
read-only calls (``write=False``) and full calls over another batch show hypothetical states (packed or stacked
drafts), so a decoder that makes them is measured by its counters only.

``proxy.events(canvas)`` gives a decoder whose calls are all full forwards of a canvas prefix (WINO, the
editing sampler; spec/wino.md WN5) as events:
commits, revocations (back to the mask) and edits (a token replaced), each at the step of the call it followed.

``RecordingModel(model, keep_logits=True)`` keeps each cached call's logits, and ``logit_errors(canvas, ...)``
holds them against full forwards (not counted) of the canvas the decoder held at that call: the final canvas
with the commits of that call and later masked again (the trace's placement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .canvas import extended_mask, whole_blocks
from .events import Event
from .trace import Counters, StepRecord, Trace


@dataclass
class Call:
    kind: str  # "full" (model(x) or prefill: the whole canvas), "cached" (forward_cached) or "block" (forward_dynamic)
    positions: torch.Tensor  # [B, Q] canvas positions fed (host copy)
    tokens: torch.Tensor  # [B, Q] tokens fed there (host copy)
    shows_canvas: bool  # False for read-only cached calls (drafts), whose tokens are hypothetical
    logits: torch.Tensor | None = None  # [B, Q, V] a cached call's output (host copy), with keep_logits


class CallLimitExceeded(RuntimeError):
    """A decoder made more model calls than ``RecordingModel(limit=...)`` allows (it would not stop)."""


class RecordingModel:
    """``model`` with every call logged in ``calls``; any other attribute is the model's. ``limit``: the most
    calls allowed; the next raises ``CallLimitExceeded`` (a decoder that loops forever stops there).
    ``keep_logits``: keep each cached call's logits for ``logit_errors`` (memory: calls x B x Q x V)."""

    def __init__(self, model, limit: int | None = None, keep_logits: bool = False):
        self.model, self.calls, self.limit, self.keep_logits = model, [], limit, keep_logits

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
        return self._log_positioned("cached", tokens, positions, options.get("write", True),
                                    lambda: self.model.forward_cached(tokens, positions, cache, **options))

    def forward_dynamic(self, tokens, positions, cache, **options):
        """Block diffusion's call (veridec.adapters' hf-block): a cached call that shows the canvas at its
        positions, stored or not."""
        return self._log_positioned("block", tokens, positions, True,
                                    lambda: self.model.forward_dynamic(tokens, positions, cache, **options))

    def _log_positioned(self, kind: str, tokens, positions, write: bool, forward):
        """Record a call that shows ``tokens`` at ``positions`` [B, Q], run it (``forward()``), keep its logits
        with ``keep_logits``."""
        self._count()
        self.calls.append(Call(kind, positions.detach().cpu().clone(), tokens.detach().cpu().clone(), write))
        output = forward()
        if self.keep_logits:
            self.calls[-1].logits = output.logits.detach().cpu()
        return output

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
        """The commit order the calls show, ending at the decode's final ``canvas`` [B, L] (its first L positions,
        when the calls are wider): one step per call,
        holding the masks that call's logits decided: a commit is placed at the last call that showed its
        position still masked (a cached call shows only the positions it is fed, so a commit outside the window,
        such as a prompt mask decided by a block's full refresh, is placed at that refresh, not at the next call
        that happens to show it). Positions are in increasing order within a step (the calls do not show the
        order inside a step). A position a call shows for the first time (block diffusion's calls show the canvas
        block by block) shows its state then, not a commit. The counters count the revocations (a shown token back
        to the mask) and edits (a
        shown token replaced) the calls show; when every call is a full forward (of a canvas prefix),
        ``events`` holds them all (``events()``), else None. Positions no call shows count as masked. Raises
        ValueError for a decoder whose calls show hypothetical states (another batch size, read-only drafts)."""
        mask_id = self.model.special.mask_id if mask_id is None else mask_id
        final = canvas.detach().cpu()
        batch, length = final.shape
        if not self.calls or self.calls[0].kind not in ("full", "block"):
            raise ValueError("the decoder's first call must be a full forward, a prefill or a block call (it shows "
                             "the canvas)")
        if any(not c.shows_canvas or c.tokens.shape[0] != batch for c in self.calls):
            raise ValueError("this decoder's calls show drafts or stacked states, not its canvas: use counters()")
        trace = Trace("recorded", {"mask_id": mask_id}, prompt_length, batch)
        trace.counters = self.counters()
        width = max(length, *(int(c.positions.max()) + 1 for c in self.calls if c.positions.numel()))
        seen = _shown(self.calls[0].tokens, width, mask_id)  # [B, W] the canvas as the calls show it
        shown = torch.zeros(batch, width, dtype=torch.bool, device="cpu")  # [B, W] shown by some call so far
        shown[:, :self.calls[0].tokens.shape[1]] = True
        last_masked = torch.zeros(batch, width, dtype=torch.long, device="cpu")  # [B, W] last call showing it masked
        step_of = torch.full((batch, width), -1, dtype=torch.long, device="cpu")  # [B, W] a commit's step
        token_of = seen.clone()  # [B, W] the token a commit first showed (a later overwrite is no commit)
        closing = Call("full", torch.arange(length, device="cpu").expand(batch, -1), final, True)  # the end
        for index, call in enumerate(self.calls[1:] + [closing], start=1):
            now = seen.clone()
            now.scatter_(1, call.positions, call.tokens)
            if call is not closing:  # a position shown for the first time shows its initial state, no event
                fresh = torch.zeros_like(shown).scatter_(1, call.positions, True) & ~shown
                seen, token_of = torch.where(fresh, now, seen), torch.where(fresh, now, token_of)
                shown |= fresh
            held = (seen != mask_id) & (now != seen)  # [B, L] a shown token revoked or replaced
            trace.counters.revocations += int((held & (now == mask_id)).sum())
            trace.counters.edits += int((held & (now != mask_id)).sum())
            committed = (seen == mask_id) & (now != mask_id)  # [B, L] commits this call shows
            step_of[committed] = last_masked[committed]
            token_of[committed] = now[committed]
            shown_masked = torch.zeros_like(now, dtype=torch.bool).scatter_(1, call.positions, call.tokens == mask_id)
            last_masked[shown_masked] = index
            seen = now
        trace.steps = [_commits(step_of == step, token_of) for step in range(len(self.calls))]
        trace.events = self.events(final, mask_id) if self._full_calls_of_one_batch(batch) else None
        return trace

    def _full_calls_of_one_batch(self, batch: int) -> bool:
        """Whether ``events`` can place every change the calls show: each call shows a whole canvas prefix."""
        return all(c.kind == "full" and c.tokens.shape[0] == batch for c in self.calls)

    def events(self, canvas: torch.Tensor, mask_id: int | None = None) -> list[Event]:
        """Every commit, revocation and edit the calls show (spec/wino.md WN5), for a decoder whose every call is a
        full forward of a canvas prefix (WINO's canvas and verification block; the editing sampler's window up to
        its block): event step k is a change between the canvas call k saw and the one call k + 1 sees (the final
        ``canvas`` [B, L] after the last call), on the later state's positions, a position the earlier state did
        not show counting as the mask. A position that goes back to the mask is a revocation, one whose token is
        replaced an edit; confidences are not observed (NaN). Raises ValueError for cached calls or calls over
        another batch (their diffs would not place an event at its step)."""
        mask_id = self.model.special.mask_id if mask_id is None else mask_id
        final = canvas.detach().cpu()
        if not self.calls:
            raise ValueError("the decoder made no model call: no events to reconstruct")
        if not self._full_calls_of_one_batch(final.shape[0]):
            raise ValueError(f"events need full forwards over the batch of the final canvas ({final.shape[0]} "
                             "rows): this decoder's calls are cached or stacked")
        states = [call.tokens for call in self.calls] + [final]
        found = []
        for step, (before, after) in enumerate(zip(states, states[1:])):
            before = _shown(before, after.shape[1], mask_id)  # [B, W'] on the later state's positions
            for row, position in (before != after).nonzero().tolist():
                old, new = int(before[row, position]), int(after[row, position])
                kind = "commit" if old == mask_id else "revoke" if new == mask_id else "edit"
                found.append(Event(kind, step, row, position, old, new, float("nan")))
        return found

    @torch.no_grad()
    def logit_errors(self, canvas: torch.Tensor, prompt_length: int, attention_mask: torch.Tensor | None = None,
                     mask_id: int | None = None) -> list[float]:
        """Each kept cached call's largest absolute logit difference (float64, finite entries) from a full forward
        of the canvas the decoder held then (``trace``'s placement: the final ``canvas`` [B, L] with that call's
        commits and later masked again), under the prompt's ``attention_mask`` [B, P] extended with ones."""
        mask_id = self.model.special.mask_id if mask_id is None else mask_id
        steps = self.trace(canvas, prompt_length, mask_id).steps
        held = canvas.detach().cpu().clone()  # [B, L] re-masked backwards, call by call
        device = self.model.device
        keys = extended_mask(attention_mask, held.shape[1] - prompt_length, device)  # [B, L] or None
        errors = []
        for index in range(len(self.calls) - 1, -1, -1):
            for row, positions in enumerate(steps[index].positions):
                held[row, positions] = mask_id
            call = self.calls[index]
            if call.logits is None:
                continue
            full = self.model(held.to(device), attention_mask=keys).logits.cpu()  # [B, L, V]
            want = full.gather(1, call.positions[..., None].expand(-1, -1, full.shape[-1])).double()  # [B, Q, V]
            got = call.logits.double()
            errors.append(finite_difference(want, got))
        return errors[::-1]


    @torch.no_grad()
    def block_logit_errors(self, canvas: torch.Tensor, block_size: int,
                           attention_mask: torch.Tensor | None) -> list[float]:
        """Each kept block call's largest absolute logit difference (float64, finite entries) from a block-causal
        forward (spec/block_diffusion.md BD1, blocks of ``block_size``) of the canvas it showed: the final
        ``canvas`` [B, L] with the call's tokens at its positions, up to the end of its last block (a finished
        block never changes again, so the final canvas holds what came before); for a model with logit shift 1
        (Fast-dLLM v2) the query at j is held against the token-aligned logits at j + 1. Rows with left padding
        (``attention_mask`` [B, P] with zeros) are left out: their canvas layout is the decoder's own."""
        final = canvas.detach().cpu()
        rows = [r for r in range(final.shape[0]) if attention_mask is None or bool(attention_mask[r].all())]
        shift = getattr(self.model, "logit_shift", 0)  # a call's query j scores token j + shift (Fast-dLLM v2: 1)
        errors = []
        for call in self.calls:
            if call.kind != "block" or call.logits is None or not rows:
                continue
            end = whole_blocks(int(call.positions[rows].max()) + 1, block_size) + shift
            shown = torch.full((final.shape[0], max(end, final.shape[1])), self.model.special.mask_id,
                               dtype=final.dtype, device="cpu")  # [B, W]
            shown[:, :final.shape[1]] = final
            shown.scatter_(1, call.positions, call.tokens)
            truth = self.model(shown[rows, :end].to(self.model.device), block_size=block_size).logits.cpu()  # [R, E, V]
            scored = call.positions[rows, :, None] + shift  # [R, Q, 1] the tokens the queries score
            want = truth.gather(1, scored.expand(-1, -1, truth.shape[-1])).double()  # [R, Q, V]
            got = call.logits[rows].double()
            errors.append(finite_difference(want, got))
        return errors


class ModuleRecording(RecordingModel):
    """The calls a decoder makes to a model object of its own (any ``torch.nn.Module``: the user's modelling,
    patched or hooked), logged by a forward pre-hook at the module's top-level forward, so that the decoder
    runs on the module itself and the hooks it installs on the module's parts keep working. Hand the decoder
    ``module``, not this object; use it as a context manager (the hook is removed on exit).

    A call's canvas is ``input_ids`` (the first positional argument or the keyword). A call with the keyword
    ``past_key_values`` is a cached call whose positions the module does not show: it counts, but the trace is
    then counters only. A call without a canvas (``inputs_embeds``) is refused by name. ``keep_logits``: keep
    each call's returned logits (``.logits``, the first item or the tensor) for ``drift``."""

    def __init__(self, module, limit: int | None = None, keep_logits: bool = False):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"candidate_model must be a torch.nn.Module (its forward is what gets recorded), got "
                            f"{type(module).__name__}")
        super().__init__(module, limit, keep_logits)
        self._hooks = []

    def __enter__(self) -> "ModuleRecording":
        self._hooks = [self.model.register_forward_pre_hook(self._log, with_kwargs=True)]
        if self.keep_logits:
            self._hooks.append(self.model.register_forward_hook(self._keep, with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for hook in self._hooks:
            hook.remove()

    def _keep(self, module, args, kwargs, output) -> None:
        logits = getattr(output, "logits", output[0] if isinstance(output, (tuple, list)) else output)
        if isinstance(logits, torch.Tensor):
            self.calls[-1].logits = logits.detach().cpu()

    @torch.no_grad()
    def drift(self, reference) -> list[float]:
        """Per full call that kept its logits, the largest |difference| (float64, finite entries; inf where one
        side alone is finite) between them and ``reference(x).logits`` on the canvas the call was fed: what a
        feature cache inside the model changed (``reference``: the model without it, e.g. veridec's behind the
        same convention)."""
        found = []
        for call in self.calls:
            if call.kind != "full" or call.logits is None:
                continue
            want = reference(call.tokens.to(reference.device)).logits.detach().cpu().double()  # [B, L, V]
            got = call.logits.double()
            if want.shape != got.shape or not torch.equal(torch.isfinite(want), torch.isfinite(got)):
                found.append(math.inf)
                continue
            finite = torch.isfinite(want)
            found.append((want[finite] - got[finite]).abs().max().item() if finite.any() else 0.0)
        return found

    def _log(self, module, args, kwargs) -> None:
        x = args[0] if args else kwargs.get("input_ids")
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError("the candidate called its model without a canvas [B, L] (input_ids); a call by "
                             "inputs_embeds cannot be recorded")
        if kwargs.get("past_key_values") is None:
            self._log_full(x)
            return
        self._count()
        where = torch.arange(x.shape[1], device="cpu").expand(x.shape[0], -1)  # [B, Q] unknown: not a canvas
        self.calls.append(Call("cached", where, x.detach().cpu().clone(), False))


def finite_difference(want: torch.Tensor, got: torch.Tensor) -> float:
    """The largest |want - got| over the entries finite on both sides (0.0 when there is none)."""
    finite = torch.isfinite(want) & torch.isfinite(got)
    return (want - got)[finite].abs().max().item() if finite.any() else 0.0


def _shown(tokens: torch.Tensor, width: int, mask_id: int) -> torch.Tensor:
    """A call's tokens [B, W] on ``width`` positions: cut, or extended with the mask token (not shown: masked)."""
    if tokens.shape[1] >= width:
        return tokens[:, :width]
    pad = torch.full((tokens.shape[0], width - tokens.shape[1]), mask_id, dtype=tokens.dtype, device="cpu")
    return torch.cat([tokens, pad], dim=1)


def _commits(chosen: torch.Tensor, tokens_of: torch.Tensor) -> StepRecord:
    """The positions ``chosen`` [B, L] with the tokens they were committed as, as one step (no confidences are
    observed)."""
    positions = [row.nonzero().flatten().tolist() for row in chosen]
    tokens = [tokens_of[row, where].tolist() for row, where in enumerate(positions)]
    nan = float("nan")
    return StepRecord(0, positions, tokens, [[nan] * len(p) for p in positions], [[nan] * len(p) for p in positions],
                      [nan] * len(positions))
