# ruff: noqa: E501  (a mutant's original and mutated texts are verbatim source lines)
"""A mutation catalogue for veridec's parallel rules inside blocks and the block rows built on them
(spec/block_diffusion.md BD1, BD8, BD9, BD11; spec/exactness.md E2, E5; spec/parallel.md P1, P11).

It covers the cached, batched decoder ``optimized/block_parallel.py`` (``Run.decode_block``'s live
candidates, block bookkeeping, rule memory, recorded logits, store and stops; ``_to_output_positions``) and the
helpers it reuses from ``optimized/block_diffusion.py`` (``Run.live_rows``, ``layout_output``, ``_step``'s
``record_logits``), the plain decoder ``reference/block_diffusion.py`` (``parallel_generate``'s block-causal
forward and first block; ``_decode_block``'s recorded logits), the rule's ``check_stops`` and ``row_record``'s
kept logits, the argument checks ``check_block_rule`` and ``check_sampling``, the exactness table's block rows
(``harness/block_rows.py``: the (reference, cached) pair, the tolerance, the row's tier, the expected batch laid
out as the cached decoder's output) and the table's record-or-compute plumbing (``harness/exactness.py``:
``recorded``, ``unit_rows``, the records key of every row; the kinds' labels and tolerances in the row modules), the
recording's block-call logit errors and ``forward_dynamic``'s kept logits with the ``hf-block`` branch of
``testing.running.run_candidate``, ``veridec generate --sampler sdar`` (``cut``, ``check_sampler_fits``), the
command line's SDAR steps bound and exactness decoders (``harness/cli.py``), and the counter baseline's block
cases (``tools/baseline.py``: ``run_block_cases``, ``_summed``). Each mutant is a one- or two-line mistake placed
where it would most likely let a wrong decode, a wrong table row or a wrong verdict pass silently (a first block
skipped, trace positions shifted the wrong way, candidates not restricted to live rows, the block's bookkeeping
or the rule's memory passed wrong, a tolerance measured at the wrong block size or attention, an expected batch
with tokens at the wrong row or unshifted, a logit error that drops the call's own tokens or attends
bidirectionally, stops checked a block late, a refusal that no longer names the setting, a progress total off,
a record-or-compute helper that recomputes or never records, records keys that collide).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_block_diffusion.py beyond its format) was read.

    python -m tools.mutation --catalogue tools/mutants_block_parallel.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

BP = "tests/test_block_parallel.py"
ROWS = "tests/test_block_rows.py"
BD = "tests/test_block_diffusion.py"
CHECK = "tests/test_block_diffusion_check.py"
GOLDEN = "tests/test_block_diffusion_golden.py"
GENERATE = "tests/test_generate_blocks.py"
BASELINE = "tests/test_baseline.py"
CLI = "tests/test_cli.py"
RECORDING = "tests/test_recording.py"
RECORDS = "tests/test_records.py"
HOSTILE = "tests/test_hostile_inputs.py"
PARALLEL = (BP, ROWS)  # the block-parallel decoders and the table rows built on them
SDAR = (BD, GOLDEN, ROWS)  # SDAR's own decoders and the table's sdar-* rows

MUTANTS: list[Mutant] = [
    # --- optimized/block_parallel.py: the cached, batched parallel decoder ----------------------------------
    Mutant(
        "bp-candidates-not-live",
        "optimized/block_parallel.py",
        "        while (candidates := (self.x[:, start:end] == self.mask_id) & live[:, None]).any():  # [B, b]\n",
        "        while (candidates := self.x[:, start:end] == self.mask_id).any():  # [B, b]\n",
        "candidates are every mask of the block, not only the live rows': a stopped row, or one past its canvas, "
        "keeps decoding its padding blocks and commits there (and the batch takes extra forwards)",
        "spec/block_diffusion.md BD11", PARALLEL,
    ),
    Mutant(
        "bp-block-step-global",
        "optimized/block_parallel.py",
        "                                   offset=start, block_step=step, block_masks_at_start=at_start,\n",
        "                                   offset=start, block_step=len(self.trace.steps),\n"
        "                                   block_masks_at_start=at_start,\n",
        "block_step counts the decode's steps instead of the block's: a schedule rule (Quota) starts every block "
        "after the first one past its schedule",
        "spec/block_diffusion.md BD11", PARALLEL,
    ),
    Mutant(
        "bp-step-offset-zero",
        "optimized/block_parallel.py",
        "            result = parallel_step(self.rule, logits, self.x[:, start:end], candidates, **self.sampling,\n"
        "                                   offset=start, block_step=step, block_masks_at_start=at_start,\n",
        "            result = parallel_step(self.rule, logits, self.x[:, start:end], candidates, **self.sampling,\n"
        "                                   offset=0, block_step=step, block_masks_at_start=at_start,\n",
        "the step's window offset is 0 instead of the block's start: the rule's memory over the canvas (KLASS) "
        "reads and writes block 0's positions for every block, so a later block sees stale history",
        "spec/parallel.md P7", PARALLEL,
    ),
    Mutant(
        "bp-logits-never-recorded",
        "optimized/block_parallel.py",
        "                        result.choice_logits, result.order, self.record_logits,\n",
        "                        result.choice_logits, result.order, False,\n",
        "record_logits is dropped on the cached side: the trace holds no logits, so the table's max_logit_error "
        "has nothing to compare and reads 0",
        "spec/exactness.md E2", PARALLEL,
    ),
    Mutant(
        "bp-output-positions-minus-shift",
        "optimized/block_parallel.py",
        "                        offset=[start + shift for shift in self.offset])  # in the output's layout\n",
        "                        offset=[start - shift for shift in self.offset])  # in the output's layout\n",
        "trace positions move from the batch canvas to the output layout by the offset subtracted instead of "
        "added: correct only for rows with no padding and no shift",
        "spec/block_diffusion.md BD8.2", PARALLEL,
    ),
    Mutant(
        "bp-block-never-stored",
        "optimized/block_parallel.py",
        "        self.forward(start, b, store=True)\n"
        "        self.update_stops(live, end)\n"
        "        return True\n",
        "        self.forward(start, b, store=False)\n"
        "        self.update_stops(live, end)\n"
        "        return True\n",
        "the finished block is never written into the cache: later blocks attend to an empty slot instead of "
        "the block's keys and values",
        "spec/block_diffusion.md BD8.1", PARALLEL,
    ),
    Mutant(
        "bp-stops-one-block-late",
        "optimized/block_parallel.py",
        "        self.forward(start, b, store=True)\n"
        "        self.update_stops(live, end)\n"
        "        return True\n",
        "        self.forward(start, b, store=True)\n"
        "        self.update_stops(live, start)\n"
        "        return True\n",
        "the stop ids are looked for up to the block's start, not its end: a row that writes a stop token "
        "decodes one more block before it stops",
        "spec/block_diffusion.md BD11", PARALLEL,
    ),
    # --- optimized/block_diffusion.py: helpers both cached decoders share -------------------------------------
    Mutant(
        "bd-output-from-canvas-start",
        "optimized/block_diffusion.py",
        "        out[row, pad:pad + end - shift] = x[row, shift:end]\n",
        "        out[row, pad:pad + end - shift] = x[row, :end - shift]\n",
        "the output copies each row from the batch canvas's start, not from its shift: a shifted row returns "
        "padding blocks and loses its last blocks",
        "spec/block_diffusion.md BD8.2", (BP, BD, ROWS),
    ),
    Mutant(
        "bd-step-logits-never-kept",
        "optimized/block_diffusion.py",
        "start + self.offset[row], self.mask_id,\n                            self.record_logits)\n",
        "start + self.offset[row], self.mask_id)\n",
        "the cached SDAR step no longer asks row_record for the logits: with record_logits the trace holds None "
        "per row, so the table's sdar rows have no logits to compare",
        "spec/exactness.md E2", SDAR,
    ),
    # --- reference/block_diffusion.py ----------------------------------------------------------------------
    Mutant(
        "ref-bp-forward-not-block-causal",
        "reference/block_diffusion.py",
        "            logits = model(x[:, :end], block_size=block_length).logits[:, start:]  # [1, b, V]\n",
        "            logits = model(x[:, :end]).logits[:, start:]  # [1, b, V]\n",
        "the reference's forward drops block_size, so it is not block-causal: earlier blocks see the current "
        "block's masks, and the reference no longer equals the cached decoder",
        "spec/block_diffusion.md BD1", PARALLEL,
    ),
    Mutant(
        "ref-bp-partial-first-block-skipped",
        "reference/block_diffusion.py",
        "    for block in range(prompt.shape[1] // block_length, length // block_length):\n"
        "        start, end = block * block_length, (block + 1) * block_length\n",
        "    for block in range(-(-prompt.shape[1] // block_length), length // block_length):\n"
        "        start, end = block * block_length, (block + 1) * block_length\n",
        "the reference starts at the first block after the prompt (P rounded up), skipping the block that holds "
        "the prompt's last P mod b tokens: its masks are never decoded",
        "spec/block_diffusion.md BD11", PARALLEL,
    ),
    Mutant(
        "ref-sdar-logits-never-recorded",
        "reference/block_diffusion.py",
        "        record_rows(trace, block, [row], record_logits)\n",
        "        record_rows(trace, block, [row], False)\n",
        "the SDAR reference never records logits: the table's sdar rows compare the cached logits with nothing "
        "and report a max_logit_error of 0",
        "spec/exactness.md E2", SDAR,
    ),
    # --- veridec/rules/sdar.py ------------------------------------------------------------------------------
    Mutant(
        "sdar-stop-ids-refusal-unnamed",
        "veridec/rules/sdar.py",
        "        raise ValueError(f\"stopping_criteria_idx must be None or a list of token ids, got {stops!r}\")\n",
        "        raise ValueError(f\"must be None or a list of token ids, got {stops!r}\")\n",
        "a stop id that is not a list (a bare int, a string) is refused without naming stopping_criteria_idx",
        "spec/block_diffusion.md BD2", (BD, BP, HOSTILE),
    ),
    Mutant(
        "sdar-kept-logits-position-order",
        "veridec/rules/sdar.py",
        "            logits[chosen].float().tolist() if keep_logits else None)\n",
        "            logits[committed].float().tolist() if keep_logits else None)\n",
        "the kept logits are in position order while the positions are in confidence order: a step that "
        "commits several positions pairs each position with another's logits",
        "spec/block_diffusion.md BD9", SDAR,
    ),
    # --- veridec/decoding.py --------------------------------------------------------------------------------
    Mutant(
        "dec-block-rule-name-accepted",
        "veridec/decoding.py",
        "    \"\"\"BD11: a parallel rule that needs no attention weights (block forwards return none).\"\"\"\n"
        "    check_rule(rule)\n",
        "    \"\"\"BD11: a parallel rule that needs no attention weights (block forwards return none).\"\"\"\n",
        "check_block_rule no longer checks that rule is a rule object: a preset's name or None fails later with "
        "an AttributeError instead of a ValueError naming rule",
        "spec/block_diffusion.md BD11", (BP, HOSTILE),
    ),
    Mutant(
        "dec-ties-unchecked",
        "veridec/decoding.py",
        "    check_choice(\"remasking\", remasking, REMASKING)\n"
        "    check_choice(\"ties\", ties, TIES)\n",
        "    check_choice(\"remasking\", remasking, REMASKING)\n",
        "check_sampling no longer checks ties: a misspelt ties value is not refused up front by a ValueError "
        "naming ties",
        "spec/block_diffusion.md BD11", (BP, HOSTILE),
    ),
    # --- harness/block_rows.py ------------------------------------------------------------------------------
    Mutant(
        "rows-sdar-cached-logits-unrecorded",
        "harness/block_rows.py",
        "                partial(sdar_cached, record_logits=True, **settings))\n",
        "                partial(sdar_cached, **settings))\n",
        "the sdar-* rows' cached decoder records no logits: max_logit_error has nothing to compare and reads 0, "
        "whatever the cache computed",
        "spec/exactness.md E2", (ROWS,),
    ),
    Mutant(
        "rows-tolerance-higher-bidirectional",
        "harness/block_rows.py",
        "    tol = tolerance(model(x, block_size=block_length).logits, higher(x, block_size=block_length).logits)\n",
        "    tol = tolerance(model(x, block_size=block_length).logits, higher(x).logits)\n",
        "the tolerance's higher-precision side attends bidirectionally: the measured 'rounding' is the gap "
        "between two attentions, so any logit error of a cached row passes",
        "spec/exactness.md E2", (ROWS,),
    ),
    Mutant(
        "rows-tier-a",
        "harness/block_rows.py",
        "RowKind(f\"{VARIANT} b{b}\", \"E\",",
        "RowKind(f\"{VARIANT} b{b}\", \"A\",",
        "block rows are tier A: a cached row that differs from its reference is measured, never gated, so the "
        "table passes",
        "spec/exactness.md E2", (ROWS,),
    ),
    Mutant(
        "rows-steps-all-row-0",
        "harness/block_rows.py",
        "            trace.steps.append(_row_step(step, row, rows, pad))\n",
        "            trace.steps.append(_row_step(step, 0, rows, pad))\n",
        "every single decode's steps are placed at row 0 of the expected batch: the commits of rows 1.. are "
        "compared with row 0's",
        "spec/exactness.md E2", (ROWS, BASELINE),
    ),
    Mutant(
        "rows-positions-not-shifted",
        "harness/block_rows.py",
        '    return StepRecord(step.block, place([p + pad for p in step.positions[0]], []), '
        'place(step.tokens[0], []),\n',
        "    return StepRecord(step.block, place(list(step.positions[0]), []), place(step.tokens[0], []),\n",
        "a single decode's positions are not shifted by its row's padding: the expected commit order is in the "
        "unpadded layout while the cached trace is in the output's",
        "spec/exactness.md E2", (ROWS, BASELINE),
    ),
    # --- harness/exactness.py: block rows and record-or-compute ---------------------------------------------
    Mutant(
        "table-block-tolerance-at-table-b",
        "harness/block_rows.py",
        "                      lambda: block_tolerance(model, inputs.singles()[0], inputs.gen_length, b))\n",
        "                      lambda: block_tolerance(model, inputs.singles()[0], inputs.gen_length, inputs.block_length))\n",
        "every block row's tolerance is measured at the table's block length, not the row's own b",
        "spec/exactness.md E2", (ROWS,),
    ),
    Mutant(
        "table-block-unit-key-table-b",
        "harness/block_rows.py",
        "RowKind(f\"{VARIANT} b{b}\", \"E\",",
        "RowKind(f\"{VARIANT} b{block_length}\", \"E\",",
        "both block kinds of a decoder take the table's block length as their label, so both rows share one records "
        "key: the second is taken from the first's record, and the table repeats one row and never computes the other",
        "spec/exactness.md E2", (ROWS, RECORDS),
    ),
    Mutant(
        "table-recorded-never-adds",
        "harness/exactness.py",
        "        if records:\n"
        "            records.add(key, done)\n",
        "        pass\n",
        "recorded() computes a missing row but never records it: a killed table starts over every row",
        "spec/exactness.md E2", (RECORDS, ROWS),
    ),
    Mutant(
        "table-recorded-always-recomputes",
        "harness/exactness.py",
        "    done = records.get(key) if records else None\n",
        "    done = None\n",
        "recorded() ignores the records and recomputes every row (adding it again): a resumed table redoes "
        "its work",
        "spec/exactness.md E2", (RECORDS, ROWS),
    ),
    Mutant(
        "table-unit-rows-two",
        "harness/block_rows.py",
        "    return sorted({BLOCK_ROWS_SMALL, block_length})\n",
        "    return [BLOCK_ROWS_SMALL, block_length]\n",
        "a block-diffusion model gets two rows per decoder even when the table's block length is BLOCK_ROWS_SMALL: "
        "the same row twice, and the progress total off",
        "spec/exactness.md E2", (ROWS, RECORDS),
    ),
    Mutant(
        "table-variant-unit-key",
        "harness/exactness.py",
        "decoder=planned.decoder, variant=planned.kind.label)\n",
        "decoder=planned.decoder, variant=planned.unit)\n",
        "every row of a unit is recorded under the unit's name, not its kind's label: the variant rows of a "
        "decoder share one key, and a resumed table shows the first (the reference row) four times",
        "spec/exactness.md E2", (RECORDS,),
    ),
    Mutant(
        "table-event-rows-all-tolerant",
        "harness/event_rows.py",
        "    tolerance = packing_tolerance(inputs) \\\n"
        "        if (decoder, kind.label) in ROUNDED else None\n",
        "    tolerance = packing_tolerance(inputs)\n",
        "every event row gets a logit tolerance, not only the ROUNDED variants: bit-exact rows become "
        "tolerance rows, whose token match is no longer required",
        "spec/exactness.md E2", (RECORDS, ROWS),
    ),
    Mutant(
        "table-spec-unit-key-collides",
        "harness/speculative_rows.py",
        "    return f\"spec-{cache} W{width}D{depth}\" + (f\" inter{lookahead}\" if lookahead else \"\")\n",
        "    return f\"spec-{cache} W{width}D{depth}\"\n",
        "speculative rows are labelled, and so keyed, by cache and tree only: spec-dual W2D2 and its inter1 row share "
        "a records key, so the table repeats the tier E row as the tier A one",
        "spec/exactness.md E2", (RECORDS,),
    ),
    # --- veridec/recording.py and testing/running.py: block calls' logit errors ---------------------------
    Mutant(
        "rec-block-errors-final-canvas",
        "veridec/recording.py",
        "            shown.scatter_(1, call.positions, call.tokens)\n",
        "",
        "a block call's logit error is measured on the final canvas without the call's own tokens: every "
        "denoising call is compared with a forward of the finished block",
        "spec/block_diffusion.md BD9", (RECORDING, CHECK),
    ),
    Mutant(
        "rec-block-errors-bidirectional",
        "veridec/recording.py",
        '            truth = self.model(shown[rows, :end].to(self.model.device), '
        'block_size=block_size).logits.cpu()  # [R, E, V]\n',
        "            truth = self.model(shown[rows, :end].to(self.model.device)).logits.cpu()  # [R, E, V]\n",
        "the logit errors' truth is a forward without block_size (not block-causal): a candidate whose blocks "
        "see the next one would match it",
        "spec/block_diffusion.md BD9", (RECORDING, CHECK),
    ),
    Mutant(
        "rec-dynamic-logits-not-kept",
        "veridec/recording.py",
        "        return self._log_positioned(\"block\", tokens, positions, True,\n"
        "                                    lambda: self.model.forward_dynamic(tokens, positions, cache, **options))\n",
        "        self._count()\n"
        "        self.calls.append(Call(\"block\", positions.detach().cpu().clone(), tokens.detach().cpu().clone(), True))\n"
        "        return self.model.forward_dynamic(tokens, positions, cache, **options)\n",
        "forward_dynamic never keeps its logits: block_logit_errors has no call to measure and tier A reports "
        "no logit error for an hf-block candidate",
        "spec/block_diffusion.md BD9", (RECORDING, CHECK),
    ),
    Mutant(
        "run-block-errors-mask-dropped",
        "testing/running.py",
        '            side.logit_error = max(recording.block_logit_errors(side.canvas, block, mask), default=None)\n',
        '            side.logit_error = max(recording.block_logit_errors(side.canvas, block), default=None)\n',
        "run_candidate drops the attention mask when measuring an hf-block candidate's logit errors: padded rows "
        "are measured in the wrong layout",
        "spec/block_diffusion.md BD9", (CHECK, RECORDING),
    ),
    # --- harness/generate.py and harness/cli.py: veridec generate --sampler sdar, exactness decoders ---------
    Mutant(
        "gen-sdar-cut-without-prompt",
        "harness/generate.py",
        '                model, prompt, stopping_criteria_idx=eos_stops(model), **kw), '
        'prompt.shape[1] + args.gen_length)\n',
        "                model, prompt, stopping_criteria_idx=eos_stops(model), **kw), args.gen_length)\n",
        "the block decode's canvas is cut to gen_length positions, not prompt + gen_length: the generation's "
        "tail is lost from the printed text",
        "spec/block_diffusion.md BD2", (GENERATE, CLI),
    ),
    Mutant(
        "gen-sdar-on-bidirectional-accepted",
        "harness/generate.py",
        "    if blocks != (args.sampler == \"sdar\"):\n",
        "    if blocks and args.sampler != \"sdar\":\n",
        "--sampler sdar on a bidirectional model is no longer refused: SDAR's sampler runs on a model that "
        "ignores block_size",
        "spec/block_diffusion.md BD1", (GENERATE, CLI),
    ),
    Mutant(
        "cli-sdar-steps-top-gen-length",
        "harness/cli.py",
        "        top = generate_command.SDAR_BLOCK if args.block_length is None else args.block_length\n",
        "        top = args.gen_length if args.block_length is None else args.block_length\n",
        "--steps with --sampler sdar and the default block is bounded by --gen-length, not the default block "
        "length: steps that commit nothing are accepted",
        "spec/block_diffusion.md BD2", (GENERATE, CLI),
    ),
    Mutant(
        "cli-exactness-sdar-unknown",
        "harness/cli.py",
        "    others = [*exactness.EVENT_DECODERS, *exactness.SDAR_DECODERS, *exactness.FAMILY_DECODERS]\n",
        "    others = [*exactness.EVENT_DECODERS, *exactness.FAMILY_DECODERS]\n",
        "veridec exactness no longer knows the sdar-* decoders: --decoders sdar-static is refused and the "
        "default table has no sdar rows",
        "spec/exactness.md E2", (CLI, ROWS),
    ),
    # --- tools/baseline.py: the block cases -------------------------------------------------------------------
    Mutant(
        "base-reference-counters-not-summed",
        "tools/baseline.py",
        "                expected.counters = _summed(alone)\n",
        "",
        "the block cases' reference row keeps the empty counters of the assembled trace: its costs read 0 and "
        "can only improve, so the gate never fails on them",
        "spec/exactness.md E5", (BASELINE,),
    ),
    Mutant(
        "base-summed-last-only",
        "tools/baseline.py",
        "            setattr(total, name, getattr(total, name) + value)\n",
        "            setattr(total, name, value)\n",
        "_summed keeps the last decode's counters instead of adding them: the reference block cases count one "
        "prompt's forwards",
        "spec/exactness.md E5", (BASELINE,),
    ),
]
