# ruff: noqa: E501  (a mutant's original and mutated texts are verbatim source lines)
"""A mutation catalogue for veridec's checker and command plumbing, second batch: the report and its reproducers
(testing/report.py), tier S against an exact law (testing/exact_law.py), the official defects as typed outcomes
(testing/official.py), the guard on a candidate's calls (testing/guard.py), vLLM's agreement rule
(testing/agreement.py), the trace comparison (veridec/compare.py), the canvas and decoder bookkeeping
(veridec/canvas.py, veridec/decoding.py), records and units of work (harness/records.py, harness/units.py), the
``veridec check`` command (harness/check_command.py), the event and compiled rows of the exactness table
(harness/event_rows.py, harness/compiled_rows.py) and the default model's corpus (harness/corpus.py); spec
clauses spec/exactness.md E2-E4 and EC1-EC10, spec/notation.md N5, spec/sequential.md SQ0.5-SQ2.8,
spec/fastdllm.md FD9, spec/parallel.md P11, spec/stochastic.md ST2/ST7, spec/guidance.md G3b.

Each entry is a one-line mistake placed where a wrong result would pass silently: a verdict inverted at an
edge, a comparison's strictness, an off-by-one, a tie order, a reproducer that reruns another case than the one
that failed, a report field taken from the wrong side, a resumed run that recomputes or a fresh run that
resumes, a limit that never triggers, a count of the wrong thing, a refusal that no longer fires, a missing
clone.

Written from the spec and the production code alone: nothing under tests/ and no other catalogue was read.

    python -m tools.mutation --catalogue tools/mutants_product2.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

CHECK = "tests/test_check.py"
HOSTILE_CHECK = "tests/test_hostile_check.py"
HOSTILE_FLAGS = "tests/test_hostile_flags.py"
HOSTILE_INPUTS = "tests/test_hostile_inputs.py"
HOSTILE_RECORDS = "tests/test_hostile_records.py"
CASE_VALIDATION = "tests/test_case_validation.py"
UPSTREAM = "tests/test_upstream.py"
GOLDEN_CHECK = "tests/test_golden_check.py"
LAW_FIT = "tests/test_exact_law_fit.py"
STOCHASTIC = "tests/test_stochastic.py"
AGREEMENT = "tests/test_agreement.py"
COMPARE = "tests/test_compare.py"
EVENT_TRACES = "tests/test_event_traces.py"
RECORDING = "tests/test_recording.py"
REFERENCE = "tests/test_reference_samplers.py"
PARALLEL = "tests/test_parallel_decoders.py"
RECORDS = "tests/test_records.py"
UNITS = "tests/test_units.py"
CLI = "tests/test_cli.py"
OWN_MODEL = "tests/test_own_model.py"
HF_MODEL = "tests/test_hf_model.py"
EVENT_ROWS = "tests/test_event_rows.py"
WINO = "tests/test_wino.py"
EDITING = "tests/test_editing.py"
COMPILED = "tests/test_compiled.py"
CORPUS = "tests/test_corpus.py"

# Tests written for this catalogue's survivors (by hand)
CHECK_REPORTS = "tests/test_check_reports.py"
UPSTREAM_PREDICTIONS = "tests/test_upstream_predictions.py"
GUARD_TIMERS = "tests/test_guard_timers.py"

MUTANTS: list[Mutant] = [
    # --- testing/report.py: the JSON report and the reproducers -------------------------------------------------
    Mutant(
        "p2-report-fail-mode-flag-dropped",
        "testing/report.py",
        '    if result.official_mode != "match":\n',
        '    if result.official_mode == "match":\n',
        'the CLI reproducer of a check run with --upstream-defects fail omits the flag, so rerunning '
        'the case in match mode passes the reproduced official defect that failed',
        "spec/exactness.md EC6", (UPSTREAM, CHECK),
    ),
    Mutant(
        "p2-report-snippet-drops-padding-mask",
        "testing/report.py",
        '    extra = ", attention_mask=attention_mask" if case["attention_mask"] is not None else ""\n',
        '    extra = ", attention_mask=attention_mask" if case["attention_mask"] is None else ""\n',
        "the Python reproducer calls the candidate without the case's left-padding mask, so it "
        'reruns an unpadded case instead of the padded one that failed',
        "spec/exactness.md EC2", (CHECK,),
    ),
    Mutant(
        "p2-report-target-counters-from-candidate",
        "testing/report.py",
        '                           "target_counters": _counters(failure.target), "candidate_counters": _counters(\n',
        '                           "target_counters": _counters(failure.candidate), '
        '"candidate_counters": _counters(\n',
        "the JSON report's target_counters are the candidate's, so a counter divergence shows both sides equal",
        "spec/exactness.md EC2", (CHECK_REPORTS, CHECK),
    ),
    Mutant(
        "p2-report-upstream-total-counts-clauses",
        "testing/report.py",
        '    total = sum(result.official_defects.values())\n',
        '    total = len(result.official_defects)\n',
        "the report's count of cases that reproduce official defects counts distinct clauses, not "
        'cases (FD9.1 x5 reads as 1)',
        "spec/exactness.md EC6", (CHECK_REPORTS, UPSTREAM, GOLDEN_CHECK),
    ),
    # --- testing/exact_law.py: tier S against the exact law of an oracle decode ----------------------------------
    Mutant(
        "p2-law-quota-remainder-accepted",
        "testing/exact_law.py",
        '    if steps_per_block < 1 or settings["block_length"] % steps_per_block:\n',
        "    if steps_per_block < 1:\n",
        'a case whose steps do not divide the block (a non-constant quota) is enumerated as a '
        'constant TopK, so the candidate is held against a law the target does not decode',
        "spec/stochastic.md ST7", (CHECK_REPORTS, LAW_FIT, STOCHASTIC),
    ),
    Mutant(
        "p2-law-cached-target-accepted",
        'testing/targets.py',
        'official=block.FASTDLLM_DUAL),',
        'official=block.FASTDLLM_DUAL, exact_law=True),',
        "the dual-cache target is marked exact-law: an oracle check with cache='dual' is no longer "
        'refused and is held against the no-cache law, passing a cached candidate against the wrong target',
        "spec/stochastic.md ST7", (LAW_FIT, STOCHASTIC),
    ),
    # --- testing/official.py: where the official code fails, as typed outcomes ----------------------------------
    Mutant(
        "p2-upstream-eos-vocab-edge",
        'testing/families/block.py',
        '    entry = EOS_IDS_HARD_CODED if max(needed) >= model.vocab_size else '
        '(*EOS_IDS_HARD_CODED[:2], "deviates")\n',
        '    entry = EOS_IDS_HARD_CODED if max(needed) > model.vocab_size else '
        '(*EOS_IDS_HARD_CODED[:2], "deviates")\n',
        'on a vocabulary whose size equals the hard-coded id the official IndexError is predicted as '
        'a deviation, so a candidate that completes differently passes',
        "spec/sequential.md SQ1.10", (UPSTREAM_PREDICTIONS, UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-first-step-counted-in-block",
        'testing/families/block.py',
        "        in_block = in_block + 1 if k and step.block == steps[k - 1].block else 0\n",
        "        in_block = in_block + 1 if step.block == steps[k - 1].block else 0\n",
        "step 0 compares its block with the last step's (steps[-1]), so a one-block decode counts "
        'the refresh as step 1 and predicts FD9.4 / FD9.1 a step early',
        "spec/fastdllm.md FD9", (UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-quota-exhausted-late",
        'testing/families/block.py',
        "        if quota and in_block >= per_block:\n",
        "        if quota and in_block > per_block:\n",
        'quota mode predicts the official IndexError one forward after step j = S, so a candidate '
        'that raises at j = S is failed and one that computes one more step passes',
        "spec/fastdllm.md FD9", (UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-endless-at-temperature",
        'testing/families/block.py',
        '    deterministic = settings.get("temperature", 0) == 0 and settings.get("remasking") != "random"\n',
        '    deterministic = settings.get("temperature", 0) == 0 or settings.get("remasking") != "random"\n',
        'a stall at temperature > 0 is predicted as the official endless loop (FD9.2), so a '
        'candidate that fails there passes as reproducing a defect instead of the case being refused',
        "spec/fastdllm.md FD9", (UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-factor-candidates-swapped",
        'testing/families/block.py',
        '    candidates = masked[:, :end] if loop.full else masked[:, start:end]\n',
        '    candidates = masked[:, start:end] if loop.full else masked[:, :end]\n',
        "factor mode's candidates are the block's masks without a cache and every earlier mask with "
        'one, the reverse of the official loops, so FD9.3 is predicted where it does not fire',
        "spec/fastdllm.md FD9", (UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-canvases-alias",
        "testing/official.py",
        "        found.append(canvas.clone())\n",
        "        found.append(canvas)\n",
        'every canvas before a step aliases the final canvas, so the per-step predictions (FD9.3, '
        'FD9.6, SQ2.8) read the finished decode and miss or misplace the defect',
        "spec/exactness.md EC6", (UPSTREAM, GOLDEN_CHECK),
    ),
    Mutant(
        "p2-upstream-dream-clamp-at-equal",
        'testing/families/dream.py',
        "        if bool((masked.sum(dim=1) < count).any()):\n",
        "        if bool((masked.sum(dim=1) <= count).any()):\n",
        "a row holding exactly the step's count of masks is predicted to be clamped, so a candidate "
        'that deviates after an ordinary final step passes as reproducing SQ2.8',
        "spec/sequential.md SQ2.8", (UPSTREAM, GOLDEN_CHECK),
    ),
    # --- testing/guard.py: limits on a candidate's calls ----------------------------------------------------------
    Mutant(
        "p2-guard-default-limit-floor-scaled",
        "testing/guard.py",
        "    return UNTIMED_SECONDS if target_seconds is None else TIMEOUT_FACTOR * target_seconds + TIMEOUT_FLOOR\n",
        "    return UNTIMED_SECONDS if target_seconds is None else TIMEOUT_FACTOR * (target_seconds + TIMEOUT_FLOOR)\n",
        'the default limit is 20x (target + 10 s), over 200 s instead of 20x + 10 s, so a stalling '
        'candidate is waited out far past its limit',
        "spec/exactness.md EC8", (HOSTILE_CHECK,),
    ),
    Mutant(
        "p2-guard-import-timeout-zero-accepted",
        "testing/guard.py",
        "    if not 0 < value <= MAX_CASE_TIMEOUT:\n",
        "    if not 0 <= value <= MAX_CASE_TIMEOUT:\n",
        "VERIDEC_IMPORT_TIMEOUT=0 is accepted and setitimer(0) arms no alarm, so the candidate's "
        'import runs with no in-process limit',
        "spec/exactness.md EC8", (GUARD_TIMERS, HOSTILE_CHECK),
    ),
    Mutant(
        "p2-guard-outer-timer-full-rearm",
        "testing/guard.py",
        "                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))\n",
        "                signal.setitimer(signal.ITIMER_REAL, max(outer, 1e-3))\n",
        'an outer timer is re-armed with its full time instead of what was left, so each candidate '
        "call postpones the caller's own deadline",
        "spec/exactness.md EC8", (GUARD_TIMERS, HOSTILE_CHECK),
    ),
    # --- testing/agreement.py: vLLM's rule at the first divergent position ---------------------------------------
    Mutant(
        "p2-agreement-top-k-admits-k-plus-one",
        "testing/agreement.py",
        '    found["agrees"] = (found["candidate_token_rank_in_target"] < rule.top_k\n',
        '    found["agrees"] = (found["candidate_token_rank_in_target"] <= rule.top_k\n',
        "a candidate token ranked k (the (k+1)-th) under the target's distribution agrees, so top-1 "
        'accepts the second-best token',
        "spec/exactness.md EC10", (AGREEMENT,),
    ),
    Mutant(
        "p2-agreement-first-divergence-by-position",
        "testing/agreement.py",
        "    order = lambda rp: (_step_of(trace, *rp) if _step_of(trace, *rp) is not None else never, rp[0], rp[1])\n",
        "    order = lambda rp: (_step_of(trace, *rp) if _step_of(trace, *rp) is not None else never, rp[1], rp[0])\n",
        'within one commit step the divergence is chosen by position before row, so the rule judges '
        "another row's position than the first in the target's order",
        "spec/exactness.md EC10", (AGREEMENT,),
    ),
    Mutant(
        "p2-agreement-canvas-after-the-step",
        "testing/agreement.py",
        "    for record in side.trace.steps[step:]:\n",
        "    for record in side.trace.steps[step + 1:]:\n",
        "each side's distribution is taken on the canvas after it committed the position (the token "
        'already written there), not the canvas it held before',
        "spec/exactness.md EC10", (AGREEMENT,),
    ),
    # --- veridec/compare.py: commit order, ties, token match, logit error ----------------------------------------
    Mutant(
        "p2-compare-tie-strict",
        "veridec/compare.py",
        "                      tie=margin <= numeric_error)\n",
        "                      tie=margin < numeric_error)\n",
        "a divergence whose margin equals the numeric error (an exact tie at numeric_error 0) is no longer a tie",
        "spec/notation.md N5", (COMPARE, CHECK),
    ),
    Mutant(
        "p2-compare-first-divergence-by-row",
        "veridec/compare.py",
        '                divergences.append(_one_sided(step, row, extra, longer_is_a))\n    first = '
        'min(divergences, key=lambda d: (d.step, d.row), default=None)\n',
        '                divergences.append(_one_sided(step, row, extra, longer_is_a))\n    first = '
        'min(divergences, key=lambda d: (d.row, d.step), default=None)\n',
        "the first divergence is the lowest row's, not the earliest step's, so the report and its "
        'tie verdict name a later divergence',
        "spec/sequential.md SQ0.5", (COMPARE, CHECK),
    ),
    Mutant(
        "p2-compare-token-match-counts-prompt",
        "veridec/compare.py",
        "    return (canvas_a[:, prompt_length:] == canvas_b[:, prompt_length:]).double().mean().item()\n",
        "    return (canvas_a == canvas_b).double().mean().item()\n",
        "the token match rate counts the prompt positions (always equal), inflating tier A's token "
        "match and the table's column",
        "spec/exactness.md E3", (COMPARE, CHECK),
    ),
    Mutant(
        "p2-compare-logits-by-index-not-position",
        "veridec/compare.py",
        "        lb = torch.tensor(sb.logits[row][order_b[position]], dtype=torch.float64, device=\"cpu\")\n",
        "        lb = torch.tensor(sb.logits[row][i], dtype=torch.float64, device=\"cpu\")\n",
        "b's logits are taken by list index, so a step listing the same commits in another order "
        "compares different positions' logits",
        "spec/sequential.md SQ0.5", (COMPARE, RECORDING),
    ),
    # --- veridec/canvas.py: the starting canvas and the prompt's refusals ----------------------------------------
    Mutant(
        "p2-canvas-token-id-equal-vocab-accepted",
        "veridec/canvas.py",
        '    if low < 0 or high >= (vocab or float("inf")):\n',
        '    if low < 0 or high > (vocab or float("inf")):\n',
        "a prompt token id equal to the vocabulary size is accepted instead of refused",
        "spec/sequential.md SQ0.6", (HOSTILE_INPUTS, CASE_VALIDATION),
    ),
    Mutant(
        "p2-canvas-mask-only-row-counts-padding",
        "veridec/canvas.py",
        "        if (prompt[row][real[row]] == mask_id).all():\n",
        "        if (prompt[row] == mask_id).all():\n",
        'a padded row whose real tokens are all the mask token is accepted (its pad ids are not '
        'masks), decoding a row nothing conditions',
        "spec/sequential.md SQ0.6", (HOSTILE_INPUTS, CASE_VALIDATION),
    ),
    # --- veridec/decoding.py: step budget and stalls --------------------------------------------------------------
    Mutant(
        "p2-decoding-stall-one-step-early",
        "veridec/decoding.py",
        "    if step > budget:\n",
        "    if step >= budget:\n",
        'a block that finishes on the last forward its budget allows raises DecodeStalled, so the '
        'target refuses valid cases and the check discards them',
        "spec/parallel.md P11", (PARALLEL, UPSTREAM),
    ),
    Mutant(
        "p2-decoding-budget-smallest-row",
        "veridec/decoding.py",
        '    budget = int(candidates.sum(dim=1).max()) + getattr(rule, "steps_per_block", 0)\n',
        '    budget = int(candidates.sum(dim=1).min()) + getattr(rule, "steps_per_block", 0)\n',
        'the step budget is the row with the fewest masks, so a batch whose rows differ in prompt '
        'masks stalls falsely and its cases are discarded as refused',
        "spec/parallel.md P11", (PARALLEL, UPSTREAM),
    ),
    # --- harness/records.py: records that survive a kill ---------------------------------------------------------
    Mutant(
        "p2-records-truncate-eats-newline",
        "harness/records.py",
        "                handle.truncate(len(complete) + 1 if complete else 0)\n",
        "                handle.truncate(len(complete) if complete else 0)\n",
        'dropping a cut-short last line also drops the newline of the last complete record, so the '
        'next record is glued onto it',
        "spec/exactness.md E4", (RECORDS, HOSTILE_RECORDS),
    ),
    Mutant(
        "p2-records-settings-hash-alone",
        "harness/records.py",
        '        if recorded_hash != self.hash or settings_hash(record.get("settings")) != self.hash:\n',
        '        if recorded_hash != self.hash and settings_hash(record.get("settings")) != self.hash:\n',
        "a line with this run's settings hash but other settings (a forged line with its digest "
        "redone) is taken as this run's result",
        "spec/exactness.md E4", (HOSTILE_RECORDS, RECORDS),
    ),
    Mutant(
        "p2-records-merge-duplicates",
        "harness/records.py",
        "        self._append(self.main, [(k, v) for k, v in self.done.items() if k not in recorded])\n",
        "        self._append(self.main, [(k, v) for k, v in self.done.items()])\n",
        "rank 0's merge appends every known unit again, so the main records hold each of its own units twice",
        "spec/exactness.md E4", (RECORDS, UNITS),
    ),
    Mutant(
        "p2-records-hard-link-accepted",
        "harness/records.py",
        "    if links > 1:\n",
        "    if links > 2:\n",
        "a records file with a second hard link (a name outside the output folder) is read and appended to",
        "spec/exactness.md E4", (HOSTILE_INPUTS, HOSTILE_RECORDS),
    ),
    # --- harness/units.py: runs made of units ----------------------------------------------------------------------
    Mutant(
        "p2-units-resume-recomputes",
        "harness/units.py",
        '    todo = [(key, unit) for i, (key, unit) in enumerate(zip(keys, units)) if group.mine(i) '
        'and key not in results]\n',
        '    todo = [(key, unit) for i, (key, unit) in enumerate(zip(keys, units)) if group.mine(i) '
        'or key not in results]\n',
        'a resumed run recomputes (and records again) the units already recorded, and each rank also '
        "computes others' missing units",
        "spec/exactness.md E4", (UNITS, RECORDS),
    ),
    Mutant(
        "p2-units-fresh-keeps-rank-files",
        "harness/units.py",
        "        for old in [path, *path.parent.glob(f\"{path.stem}.rank*.jsonl\")]:\n",
        "        for old in [path]:\n",
        "--fresh deletes only the main records, so a fresh run resumes from a previous run's rank files",
        "spec/exactness.md E4", (UNITS, RECORDS),
    ),
    # --- harness/check_command.py: veridec check's arguments and verdict ------------------------------------------
    Mutant(
        "p2-command-case-null-draws",
        "harness/check_command.py",
        "    if not isinstance(case, dict):\n",
        "    if case is not None and not isinstance(case, dict):\n",
        '--case null is no longer refused and falls back to drawn cases, so a replayed case is '
        'silently not the one run',
        "spec/exactness.md EC2", (CHECK_REPORTS, HOSTILE_FLAGS, CHECK),
    ),
    Mutant(
        "p2-command-remote-code-without-flag",
        "harness/check_command.py",
        "                         trust_remote_code=args.trust_remote_code, agreement=_agreement(args),\n",
        "                         trust_remote_code=args.hf_model, agreement=_agreement(args),\n",
        "--hf-model alone runs the modelling code shipped in the folder, as if --trust-remote-code were given",
        "spec/exactness.md EC9", (HF_MODEL, OWN_MODEL),
    ),
    Mutant(
        "p2-command-baseline-overwritten",
        "harness/check_command.py",
        "    if tier.uses_baseline and args.baseline and baseline is None:\n",
        "    if tier.uses_baseline and args.baseline:\n",
        "tier A rewrites an existing --baseline with this run's metrics, so a regression becomes the "
        'new baseline and passes next time',
        "spec/exactness.md EC3", (CHECK_REPORTS, CHECK, CLI),
    ),
    Mutant(
        "p2-command-alpha-default-from-delta",
        "harness/check_command.py",
        "                         alpha=0.01 if args.alpha is None else args.alpha,\n",
        "                         alpha=0.05 if args.alpha is None else args.alpha,\n",
        "the command's tier S runs at a false-alarm rate of 0.05 instead of the stated default 0.01 "
        '(fewer samples, weaker tests)',
        "spec/stochastic.md ST2", (CHECK_REPORTS, STOCHASTIC, CLI),
    ),
    # --- harness/event_rows.py: WINO's and the editing sampler's rows ---------------------------------------------
    Mutant(
        "p2-event-rows-skip-divergent-call",
        "harness/event_rows.py",
        "        if k > divergent:  # call k (k <= the divergent step) was fed the same canvas on both sides\n",
        "        if k >= divergent:  # call k (k <= the divergent step) was fed the same canvas on both sides\n",
        "the logit error leaves out the call at the divergent step, the one whose logits decided the divergence",
        "spec/exactness.md E2", (EVENT_ROWS, WINO, EDITING),
    ),
    Mutant(
        "p2-event-rows-counters-of-reference",
        "harness/event_rows.py",
        "        full, positions = full + out.counters.full_forwards, positions + out.counters.query_positions\n",
        "        full, positions = full + ours.counters.full_forwards, positions + ours.counters.query_positions\n",
        "the row's full_forwards and positions_per_prompt are the reference's, so a cache's savings "
        '(or extra forwards) never show',
        "spec/exactness.md E2", (EVENT_ROWS, WINO, EDITING),
    ),
    Mutant(
        "p2-event-rows-one-sided-inf-ignored",
        "harness/event_rows.py",
        "        return math.inf\n",
        "        return 0.0\n",
        'a logit finite on one side and -inf on the other (a token banned by one side only) gives '
        'error 0 instead of infinite',
        "spec/exactness.md E2", (EVENT_ROWS, WINO, EDITING),
    ),
    # --- harness/compiled_rows.py: compiled rows held to eager ----------------------------------------------------
    Mutant(
        "p2-compiled-rows-timed-decode-eager",
        "harness/compiled_rows.py",
        "    out, seconds = inputs.decode(base, rule, compile=inputs.compile)\n",
        "    out, seconds = inputs.decode(base, rule)\n",
        "the compared decode runs eager, so every compiled row compares eager with eager and is exact whatever the compiled kernels do",
        "spec/exactness.md E2", (COMPILED,),
    ),
    Mutant(
        "p2-compiled-rows-signed-difference",
        "harness/compiled_rows.py",
        "                worst = max(worst, (a - b).abs().max().item())\n",
        "                worst = max(worst, (a - b).max().item())\n",
        "the logit difference drops its absolute value, so compiled logits above eager's are never counted",
        "spec/exactness.md E2", (COMPILED,),
    ),
    # --- harness/corpus.py: the default model's world and its checkers --------------------------------------------
    Mutant(
        "p2-corpus-sentence-determiner-agreement",
        "harness/corpus.py",
        '    return verb_ok and DETERMINERS[det] in ("any", number)\n',
        "    return verb_ok\n",
        "a sentence whose determiner disagrees with its noun ('a cats run.') is scored valid, inflating validity",
        "spec/guidance.md G3b", (CORPUS,),
    ),
    Mutant(
        "p2-corpus-document-ignores-newlines",
        "harness/corpus.py",
        "        if sum(len(x) + 1 for x in lines) + len(line) > max_chars:\n",
        "        if sum(len(x) for x in lines) + len(line) > max_chars:\n",
        "a document's length leaves out its newlines, so documents (and the table's prompts) exceed max_chars",
        "spec/exactness.md E2", (CORPUS,),
    ),
]
