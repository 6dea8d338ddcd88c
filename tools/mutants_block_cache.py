"""A mutation catalogue for the editing sampler's optimized decoder and its exactness rows: the block cache and the
batched block loop of ``veridec.optimized.editing`` (spec/editing.md ED1, ED4, ED5, ED6, ED8) and the rows of the
decoders with revocable commits in the exactness table (spec/exactness.md E2: ``harness/event_rows.py``, with
the ``ROUNDED`` tolerance of its ``events_compared``).

It covers the block cache's stale detection (``_first_stale``: the first stale block, rounded down to its start,
over the blocks before the current one; ``held`` kept up to date), the cached forward (its RoPE positions, the
block logits' offset ``start - first``, the row of the cache a stepping row reads), the counters (query positions,
the full flag), the early stop that drops a row from the batch and compacts the cache (``drop_ended``), the
per-row block loop (post steps before the forward limit, the rows that step), the events (the row's own step
index, a revocation's kind) and, for the rows, the variant -> cache mapping, the editing keyword arguments, the
logit error's window (calls up to the first divergent step) and the measured tolerance of the ``ROUNDED``
variants. Each mutant is a one- or two-line mistake placed where a wrong line changes a decode, a counter or a
row silently, not by crashing; each description says on which inputs it shows.

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``) was read.

    python -m tools.mutation --catalogue tools/mutants_block_cache.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

_EDITING = "optimized/editing.py"
_ROWS = "harness/event_rows.py"
_EDITING_TESTS = ("tests/test_editing.py",)
_ROW_TESTS = ("tests/test_event_rows.py", "tests/test_cli.py")

MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------ block cache: stale detection
    Mutant(
        "blockcache-first-stale-last-block", _EDITING,
        "        return int(stale.nonzero()[0, 0]) // self.params.block_size * self.params.block_size\n",
        "        return int(stale.nonzero()[-1, 0]) // self.params.block_size * self.params.block_size\n",
        "the forward restarts at the LAST stale block, not the first: with a prompt of two or more blocks the "
        "earlier prompt blocks are never computed (zero K/V read from the cache), so logits and events change",
        "spec/editing.md ED8", _EDITING_TESTS),
    Mutant(
        "blockcache-stale-not-rounded-to-block", _EDITING,
        "        return int(stale.nonzero()[0, 0]) // self.params.block_size * self.params.block_size\n",
        "        return int(stale.nonzero()[0, 0])\n",
        "the window starts at the first changed position, not its block's start: when a previous block ends by "
        "running out of post steps with a change past its first position, the block's earlier positions keep "
        "K/V computed under its old tokens (stale from layer 1 on), so the next block's logits differ",
        "spec/editing.md ED8", _EDITING_TESTS),
    Mutant(
        "blockcache-stale-skips-previous-block", _EDITING,
        "        stale = (self.held[self.alive, :start] != self.canvas[self.alive, :start]).any(dim=0)  # [start]\n",
        "        before = start - self.params.block_size  # the blocks before the previous one\n"
        "        stale = (self.held[self.alive, :before] != self.canvas[self.alive, :before]).any(dim=0)\n",
        "staleness is checked only before the previous block: a block that ended when max_post_steps ran out (or "
        "with max_post_steps=0) is read from the cache with its last step's tokens missing, and a one-block "
        "prompt is never computed when the first decoded block is block 1",
        "spec/editing.md ED8", _EDITING_TESTS),
    Mutant(
        "blockcache-held-only-current-block", _EDITING,
        "        self.held[self.alive, first:end] = window\n",
        "        self.held[self.alive, start:end] = window[:, start - first:]\n",
        "held is updated for the current block only: recomputed earlier blocks (the prompt, a block that ran out "
        "of post steps) stay stale forever, so every later forward recomputes from there; tokens agree but the "
        "full-forward and query-position counters lose the cache's saving",
        "spec/editing.md ED8", _EDITING_TESTS),
    # ------------------------------------------------------------------ block cache: the cached forward
    Mutant(
        "blockcache-rope-window-relative", _EDITING,
        "        out = self.model.raw_forward(window, slots, attn_bias=self.bias[None, None, first:end], "
        "cache=self.kv,\n",
        "        out = self.model.raw_forward(window, slots - first, attn_bias=self.bias[None, None, first:end],\n"
        "                                     cache=self.kv,\n",
        "the recomputed window gets RoPE positions counted from the window's start instead of canvas positions: "
        "whenever the forward starts past position 0 its queries and new keys are rotated against cached keys at "
        "the wrong relative offsets, so the logits (and events) differ from the reference",
        "spec/editing.md ED2", _EDITING_TESTS),
    Mutant(
        "blockcache-logits-row-by-step-index", _EDITING,
        "        return {row: out[self.alive.index(row), start - first:] for row in steps}\n",
        "        return {row: out[steps.index(row), start - first:] for row in steps}\n",
        "a stepping row reads the logits at its index among the stepping rows, not among the forward's (alive) "
        "rows: in a batch where an earlier row's block loop has already ended, a later row steps on another "
        "row's logits",
        "spec/editing.md ED8", _EDITING_TESTS),
    # ------------------------------------------------------------------ counters
    Mutant(
        "blockcache-queries-count-current-block", _EDITING,
        "        self.counters.add_forward(rows=len(self.alive), queries=end - first, full=first == 0)\n",
        "        self.counters.add_forward(rows=len(self.alive), queries=end - start, full=first == 0)\n",
        "a cached forward counts only the current block's queries: the recomputed earlier blocks (the prompt when "
        "it spans a block, a block that ran out of post steps) are missing from query_positions, overstating "
        "the cache's saving",
        "spec/editing.md ED8", _EDITING_TESTS),
    Mutant(
        "blockcache-full-flag-omitted", _EDITING,
        "        self.counters.add_forward(rows=len(self.alive), queries=end - first, full=first == 0)\n",
        "        self.counters.add_forward(rows=len(self.alive), queries=end - first)\n",
        "the full flag is left at its default: every cached forward, even one over the current block alone, "
        "counts as a full forward, so full_forwards equals the number of forwards",
        "spec/editing.md ED8", _EDITING_TESTS),
    # ------------------------------------------------------------------ early stop and the cache's rows
    Mutant(
        "blockcache-drop-keeps-ended-rows", _EDITING,
        "        keep = (~ended).nonzero()[:, 0]  # indices into self.alive\n",
        "        keep = ended.nonzero()[:, 0]  # indices into self.alive\n",
        "with eos_early_stop the rows that reached an EOS are kept and the others dropped: a row alone without "
        "an EOS stops after its first block, a row with one decodes on past it",
        "spec/editing.md ED5", _EDITING_TESTS),
    Mutant(
        "blockcache-drop-compacts-leading-rows", _EDITING,
        "                self.kv.keys[layer], self.kv.values[layer] = "
        "self.kv.keys[layer][keep], self.kv.values[layer][keep]\n",
        "                self.kv.keys[layer], self.kv.values[layer] = (self.kv.keys[layer][:len(keep)],\n"
        "                                                              self.kv.values[layer][:len(keep)])\n",
        "when a row leaves at an EOS the cache keeps its first rows instead of the surviving ones: if an earlier "
        "row ends and a later one goes on, the later row reads the ended row's K/V for every cached block",
        "spec/editing.md ED8", _EDITING_TESTS),
    Mutant(
        "blockcache-eos-all-instead-of-any", _EDITING,
        "        ended = ~(generated == self.mask_id).any(dim=1) & (generated == eos_id).any(dim=1) "
        "if eos_id is not None \\\n",
        "        ended = ~(generated == self.mask_id).any(dim=1) & (generated == eos_id).all(dim=1) "
        "if eos_id is not None \\\n",
        "with eos_early_stop a row stops only when every generated token is an EOS, not when one is: a row that "
        "emits an EOS among other tokens decodes its later blocks instead of stopping",
        "spec/editing.md ED5", _EDITING_TESTS),
    # ------------------------------------------------------------------ the per-row block loop
    Mutant(
        "blockcache-post-limit-after-forward-limit", _EDITING,
        "                elif taken[row] == self.limit:\n",
        "                if taken[row] == self.limit:\n",
        "the forward limit is checked even for a row whose post steps just ran out: a block that ends exactly at "
        "max_forwards forwards (e.g. max_forwards=1 with max_post_steps=0) raises DecodeStalled where the "
        "reference stops the block",
        "spec/editing.md ED6", _EDITING_TESTS),
    Mutant(
        "blockcache-steps-include-finished-rows", _EDITING,
        "            steps = sorted(running)\n",
        "            steps = list(self.alive)\n",
        "rows whose block loop has ended keep stepping while other rows finish the block: in a batch they get "
        "extra steps (extra forwards and margins, edits or post-step changes) the reference never runs",
        "spec/editing.md ED8", _EDITING_TESTS),
    # ------------------------------------------------------------------ events
    Mutant(
        "blockcache-revoke-kind-by-old", "veridec/events.py",
        '            + [Event("revoke" if new == mask_id else "edit", step, row, offset + p, old, new, q)\n',
        '            + [Event("revoke" if old == mask_id else "edit", step, row, offset + p, old, new, q)\n',
        "a revocation (an edit writing the mask token) is recorded as an edit: whenever the model edits a placed "
        "token back to the mask, the event's kind differs from the reference's",
        "spec/editing.md ED4", _EDITING_TESTS),
    Mutant(
        "blockcache-event-step-batch-index", _EDITING,
        "step_events(len(self.margins[row]), row,",
        "step_events(max(map(len, self.margins)), row,",
        "an event's step is the batch's step count rather than the row's own forward index: alone a row is "
        "unchanged, but in a batch every row after the first in a step (and any row behind the others) "
        "records its events one or more steps late",
        "spec/editing.md ED8", _EDITING_TESTS),
    # ------------------------------------------------------------------ the exactness rows (E2)
    Mutant(
        "editrows-rounded-empty", _ROWS,
        'ROUNDED = {("editing", "block")}  # exact variants whose forwards have other shapes: equal up to rounding\n',
        "ROUNDED = set()  # exact variants whose forwards have other shapes: equal up to rounding\n",
        "the editing block row is no longer measured against the forward's rounding: its logit_tolerance is None "
        "and it is held to bit-equal logits, so rounding of the cached shapes marks a correct cache not exact",
        "spec/exactness.md E2", _ROW_TESTS),
    Mutant(
        "editrows-logit-error-all-calls", _ROWS,
        "        divergent = math.inf if comparison.first_divergence is None else comparison.first_divergence.step\n",
        "        divergent = math.inf\n",
        "the logit error runs over every call, past the first divergent step where the two sides were fed "
        "different canvases: a diverging row (WINO prefix, tier A) reports a huge max_logit_error",
        "spec/exactness.md E2", _ROW_TESTS),
    Mutant(
        "editrows-kwargs-default-block-size", _ROWS,
        "        kw, modules = dict(max_new_tokens=gen_length, block_size=block_length), "
        "(reference_editing, optimized_editing)\n",
        "        kw, modules = dict(max_new_tokens=gen_length), (reference_editing, optimized_editing)\n",
        "the editing rows ignore the table's block length and decode in the sampler's default blocks of 32: "
        "with any other block length the rows' positions, forwards and tokens per step describe another decode",
        "spec/exactness.md E2", _ROW_TESTS),
    Mutant(
        "editrows-block-variant-uncached", _ROWS,
        '        out = modules[1].generate(logged, prompt, cache="none" if variant == "optimized" else variant, '
        '**kw)\n',
        '        out = modules[1].generate(logged, prompt, cache=variant if variant == "prefix" else "none", **kw)\n',
        "only WINO's prefix variant is given its cache: the editing block row runs cache='none', so it reports "
        "the uncached decoder's exactness, full forwards and positions under the block cache's name",
        "spec/exactness.md E2", _ROW_TESTS),
    Mutant(
        "editrows-tolerance-for-unrounded", _ROWS,
        "        if (decoder, kind.label) in ROUNDED else None\n",
        "        if (decoder, kind.label) not in ROUNDED else None\n",
        "the measured tolerance goes to the rows that must be bit-exact (reference, optimized) and not to the "
        "ROUNDED block row: those rows are excused rounding errors, the block row is held to bit equality",
        "spec/exactness.md E2", _ROW_TESTS),
]
