# ruff: noqa: E501
"""An independent batch of 40 one-line mutants over the newest code: the checker (``testing/``: the block-diffusion
and other families, the explanation of a divergence, the knob search, the official-defect predictors, the case
runner, tier E's comparison and tier A's measures, the report, the figures, the strategies, the candidate's own
model; ``veridec/compare.py``, ``veridec/recording.py``, ``veridec/events.py``) and the block-diffusion code
(``veridec/rules/sdar.py``, ``veridec/rules/filters.py``, ``veridec/canvas.py``, ``reference/block_diffusion.py``,
``optimized/block_diffusion.py``, ``optimized/block_parallel.py``, ``veridec/trace.py``).

Written from the specification (spec/*.md, docs/*.md, DESIGN.md) and the production code alone: nothing under
tests/ was read (only the test files' names were listed, to name the related tests) and no other mutant
catalogue was read. Each mutant is a realistic single-point mistake that gives a wrong result silently (a
comparison's strictness, an off-by-one, a wrong side's field, a wrong slice, a statistic of the wrong kind, a
predictor firing at the wrong condition), not a crash on every call.

Run it with:

    python -m tools.mutation --catalogue tools/mutants_checker_block.py
"""

from __future__ import annotations

from tools.mutants import Mutant

_SDAR_CHECK = ("tests/test_block_diffusion_check.py", "tests/test_block_diffusion_golden.py")
_SDAR_RULE = ("tests/test_sdar_rule.py", "tests/test_block_diffusion.py", "tests/test_block_diffusion_golden.py")

CHECKER = [
    # ------------------------------------------------------------------ testing/families/sdar.py
    Mutant(
        name="sdar-defect-step-in-block-counts-from-one",
        path="testing/families/sdar.py",
        original="in_block = in_block + 1 if step.block == last else 0",
        replacement="in_block = in_block + 1 if step.block == last else 1",
        description="sdar_defect counts a block's first denoising step as step 1: BD7.4 (past the schedule) and BD7.3 (an over-quota step) are predicted one schedule step early",
        clause="spec/block_diffusion.md BD7.3, BD7.4",
        tests=(*_SDAR_CHECK, "tests/test_golden_check.py"),
    ),
    Mutant(
        name="published-entropy-score-mean-not-sum",
        path="testing/families/sdar.py",
        original="return -(q * q.log()).sum()",
        replacement="return -(q * q.log()).mean()",
        description="the published entropy_bounded score averages -q log q over the block instead of summing it, so the repaired published reading commits more masks than JetAstra's",
        clause="spec/block_diffusion.md BD7.2",
        tests=("tests/test_explain.py", *_SDAR_CHECK),
    ),
    Mutant(
        name="entropy-details-explain-the-next-denoising-call",
        path="testing/families/sdar.py",
        original="index = sum(step.block >= 0 for step in outcome.target.trace.steps[:divergence.step])",
        replacement="index = sum(step.block >= 0 for step in outcome.target.trace.steps[:divergence.step + 1])",
        description="entropy_bounded's explanation counts the divergent call itself among the denoising calls before it, so it shows the entropies of the call after the first divergence",
        clause="spec/exactness.md EC11 (spec/block_diffusion.md BD6.4, BD7.2)",
        tests=("tests/test_explain.py", "tests/test_block_diffusion_check.py"),
    ),
    Mutant(
        name="eb-threshold-knob-on-cases-without-the-bound",
        path="testing/families/sdar.py",
        original='choices("eb_threshold", EB_THRESHOLDS)(settings) if settings.get("eb_threshold") is not None else []',
        replacement='choices("eb_threshold", EB_THRESHOLDS)(settings) if settings.get("eb_threshold") is None else []',
        description="the eb_threshold knob varies the bound only on cases that do not use entropy_bounded (where it moves nothing), so an ignored eb_threshold is never found",
        clause="spec/exactness.md EC7",
        tests=("tests/test_knobs.py", "tests/test_block_diffusion_check.py"),
    ),
    # ------------------------------------------------------------------ testing/families/common.py
    Mutant(
        name="at-confidence-ranked-ascending",
        path="testing/families/common.py",
        original="confidence = torch.softmax(logits[candidates].double(), dim=-1).max(dim=-1).values.sort(descending=True).values",
        replacement="confidence = torch.softmax(logits[candidates].double(), dim=-1).max(dim=-1).values.sort().values",
        description="a threshold drawn at_confidence r resolves to the r-th lowest first-step confidence instead of the r-th highest, so the threshold rarely meets a committing confidence exactly",
        clause="spec/exactness.md EC2 (spec/fastdllm.md FD2)",
        tests=("tests/test_check.py", "tests/test_knobs.py", "tests/test_upstream.py"),
    ),
    # ------------------------------------------------------------------ testing/explain.py
    Mutant(
        name="explain-tie-reading-is-the-checks-own-order",
        path="testing/explain.py",
        original='    if ties == "lowest":\n',
        replacement='    if ties == "torch":\n',
        description="the tie reading offered for a failure is the check's own tie rule instead of the other one, so a candidate that ranks ties with torch.topk is never explained as such",
        clause="spec/exactness.md EC11 (spec/sequential.md SQ0.4)",
        tests=("tests/test_explain.py",),
    ),
    Mutant(
        name="explain-candidate-line-reads-the-target-trace",
        path="testing/explain.py",
        original="    trace = theirs.trace\n",
        replacement="    trace = ours.trace\n",
        description="the explanation's candidate line lists the target's commits at the divergent step, so both lines agree where the sides differ",
        clause="spec/exactness.md EC11",
        tests=("tests/test_explain.py",),
    ),
    # ------------------------------------------------------------------ testing/knobs.py
    Mutant(
        name="knob-search-draws-three-cases",
        path="testing/knobs.py",
        original="SEARCHED = 12",
        replacement="SEARCHED = 3",
        description="a knob's verdict is drawn from 3 cases instead of 12: knobs that move the target only on some cases are reported not exercised and an idle one escapes",
        clause="spec/exactness.md EC7",
        tests=("tests/test_knobs.py", "tests/test_block_diffusion_check.py"),
    ),
    Mutant(
        name="knob-moves-differently-judges-the-unchanged-case",
        path="testing/knobs.py",
        original='outcome = setup.goal.family.runners.get("E", run_case)(setup, found["other"])',
        replacement='outcome = setup.goal.family.runners.get("E", run_case)(setup, found["case"])',
        description="tier E's knob judgement compares the sides on the original case (already passed) instead of the changed one, so a setting read otherwise is never 'moves differently'",
        clause="spec/exactness.md EC7",
        tests=("tests/test_knobs.py",),
    ),
    # ------------------------------------------------------------------ testing/official.py
    Mutant(
        name="canvases-before-aliases-one-canvas",
        path="testing/official.py",
        original="found.append(canvas.clone())",
        replacement="found.append(canvas)",
        description="canvases_before keeps the same tensor for every step, which the later commits overwrite: every 'canvas before step k' is the final canvas, so the defect predictors read the wrong masks",
        clause="spec/exactness.md EC6 (spec/fastdllm.md FD9, spec/sequential.md SQ2.8)",
        tests=("tests/test_golden_check.py", "tests/test_upstream.py", "tests/test_upstream_predictions.py"),
    ),
    # ------------------------------------------------------------------ testing/check.py
    Mutant(
        name="check-reports-the-first-failure-not-the-shrunk-one",
        path="testing/check.py",
        original="result.failure = failures[-1]",
        replacement="result.failure = failures[0]",
        description="a tier E failure reports the first failing case drawn instead of the shrunk one Hypothesis replays last",
        clause="spec/exactness.md EC2",
        tests=("tests/test_check.py", "tests/test_check_reports.py", "tests/test_editing_check.py"),
    ),
    Mutant(
        name="check-knob-divergence-judged-after-a-failure",
        path="testing/check.py",
        original="exact=mode.shrinks and result.passed",
        replacement="exact=mode.shrinks",
        description="the knob search also judges changed cases that diverge after the drawn cases already failed, adding a 'moves differently' finding that the spec keeps for checks whose drawn cases found none",
        clause="spec/exactness.md EC7",
        tests=("tests/test_knobs.py", "tests/test_check.py", "tests/test_explain.py"),
    ),
    # ------------------------------------------------------------------ testing/running.py
    Mutant(
        name="running-stalled-target-not-marked-stalled",
        path="testing/running.py",
        original='return Side(trace=err.trace, error=f"RuntimeError: {err}", stalled=True)',
        replacement='return Side(trace=err.trace, error=f"RuntimeError: {err}", stalled=False)',
        description="a target that stops at its step budget is not marked stalled, so the official loop that never ends (FD9.2) is never predicted and such cases are skipped as refusals",
        clause="spec/exactness.md EC6 (spec/fastdllm.md FD9.2)",
        tests=("tests/test_upstream.py", "tests/test_upstream_predictions.py", "tests/test_golden_check.py"),
    ),
    # ------------------------------------------------------------------ testing/exact.py
    Mutant(
        name="exact-zero-margin-excused-without-numeric-error",
        path="testing/exact.py",
        original="tie = divergence.tie and numeric_error > 0",
        replacement="tie = divergence.tie",
        description="with numeric_error 0 a divergence whose margin is exactly 0 (an exact tie decided the wrong way) is excused as a numeric tie instead of failing",
        clause="spec/exactness.md EC1",
        tests=("tests/test_check.py", "tests/test_checker_truths.py"),
    ),
    Mutant(
        name="exact-drift-quantiles-of-unsorted-calls",
        path="testing/exact.py",
        original="values = sorted(drifts)",
        replacement="values = list(drifts)",
        description="drift_p50 and drift_p99 are read from the drifts in call order instead of sorted, so the quantiles are whichever calls happen to sit there",
        clause="spec/exactness.md EC9",
        tests=("tests/test_own_model.py",),
    ),
    Mutant(
        name="diagnose-swaps-target-and-candidate-tokens",
        path="testing/exact.py",
        original='"target": token(divergence.token_a), "candidate": token(divergence.token_b),',
        replacement='"target": token(divergence.token_b), "candidate": token(divergence.token_a),',
        description="the first divergence's diagnosis names the candidate's token as the target's and the other way round",
        clause="spec/exactness.md EC2",
        tests=("tests/test_check.py", "tests/test_check_reports.py", "tests/test_checker_truths.py"),
    ),
    # ------------------------------------------------------------------ veridec/compare.py
    Mutant(
        name="compare-divergence-at-highest-position",
        path="veridec/compare.py",
        original="position = min(differing)",
        replacement="position = max(differing)",
        description="the first divergence names the highest differing position of the step instead of the lowest, with that position's tokens and margin",
        clause="spec/sequential.md SQ0.5",
        tests=("tests/test_compare.py", "tests/test_check.py"),
    ),
    # ------------------------------------------------------------------ veridec/recording.py
    Mutant(
        name="block-logit-errors-keep-padded-rows",
        path="veridec/recording.py",
        original="bool(attention_mask[r].all())",
        replacement="bool(attention_mask[r].any())",
        description="the block calls' logit error keeps rows with left padding (any real token), whose canvas layout is the decoder's own, so a correct batched candidate shows a large max_logit_error",
        clause="spec/block_diffusion.md BD9",
        tests=("tests/test_block_diffusion_check.py", "tests/test_recording.py"),
    ),
    # ------------------------------------------------------------------ veridec/events.py
    Mutant(
        name="events-divergence-names-the-wrong-side",
        path="veridec/events.py",
        original="({'ours' if b is None else 'theirs'})",
        replacement="({'theirs' if b is None else 'ours'})",
        description="first_divergence says a step exists on the side that lacks it, when one event trace is longer than the other",
        clause="spec/wino.md WN5",
        tests=("tests/test_event_traces.py", "tests/test_recorded_events.py", "tests/test_trace_records.py"),
    ),
    # ------------------------------------------------------------------ testing/report.py
    Mutant(
        name="report-target-counters-from-the-candidate",
        path="testing/report.py",
        original='"target_counters": _counters(failure.target)',
        replacement='"target_counters": _counters(failure.candidate)',
        description="the JSON report's target_counters hold the candidate's counters, so a counter divergence shows two equal sides",
        clause="spec/exactness.md EC2",
        tests=("tests/test_check_reports.py", "tests/test_check.py"),
    ),
    # ------------------------------------------------------------------ testing/strategies.py
    Mutant(
        name="strategies-ignore-the-targets-row-limit",
        path="testing/strategies.py",
        original="min(max_batch, target.max_batch or max_batch)",
        replacement="max(max_batch, target.max_batch or max_batch)",
        description="cases for a one-row target (editing, WINO, LLaDA2.0) are drawn with up to max_batch rows, which the target only refuses: those cases are left unchecked",
        clause="spec/exactness.md EC2 (spec/block_diffusion.md BD12.1)",
        tests=("tests/test_llada2_check.py", "tests/test_wino_check.py", "tests/test_editing_check.py", "tests/test_check.py"),
    ),
    # ------------------------------------------------------------------ testing/figures.py
    Mutant(
        name="figure-labels-edits-as-revocations",
        path="testing/figures.py",
        original="'M' if e.kind == 'revoke' else e.new",
        replacement="'M' if e.kind == 'edit' else e.new",
        description="the commit timeline labels an edit 'old->M' and a revocation 'old->mask id', so the picture shows revocations as edits and edits as revocations",
        clause="spec/exactness.md EC12",
        tests=("tests/test_check_html.py",),
    ),
    # ------------------------------------------------------------------ testing/own_model.py
    Mutant(
        name="own-model-weights-compared-at-their-own-dtype-only",
        path="testing/own_model.py",
        original="for dtype in {tensor.dtype, *dtypes}",
        replacement="for dtype in {tensor.dtype}",
        description="the weight digest compares veridec's tensors only at their own dtype, so a bfloat16 (or float64) load of the same checkpoint is refused as other weights",
        clause="spec/exactness.md EC9",
        tests=("tests/test_own_model.py", "tests/test_hf_model.py"),
    ),
]

BLOCK = [
    # ------------------------------------------------------------------ veridec/rules/sdar.py
    Mutant(
        name="sdar-schedule-remainder-inclusive",
        path="veridec/rules/sdar.py",
        original="return [block_length // steps + (i < block_length % steps) for i in range(steps)]",
        replacement="return [block_length // steps + (i <= block_length % steps) for i in range(steps)]",
        description="the transfer schedule gives one more token to the first b mod S + 1 steps, so a block's quotas sum to b + 1",
        clause="spec/block_diffusion.md BD3",
        tests=_SDAR_RULE,
    ),
    Mutant(
        name="sdar-top-p-before-top-k",
        path="veridec/rules/sdar.py",
        original="    if top_k > 0:\n        logits = top_k_filter(logits, top_k)\n    if top_p < 1.0:\n        logits = top_p_filter(logits, top_p)\n",
        replacement="    if top_p < 1.0:\n        logits = top_p_filter(logits, top_p)\n    if top_k > 0:\n        logits = top_k_filter(logits, top_k)\n",
        description="SDAR's sampler filters top-p before top-k (Dream's order) instead of top-k then top-p: the nucleus is taken over the whole vocabulary",
        clause="spec/block_diffusion.md BD4",
        tests=_SDAR_RULE,
    ),
    Mutant(
        name="sdar-sequential-one-short",
        path="veridec/rules/sdar.py",
        original="return masked & (masked.cumsum(0) <= n)",
        replacement="return masked & (masked.cumsum(0) < n)",
        description="sequential commits the first n - 1 masked positions instead of the first n",
        clause="spec/block_diffusion.md BD5.2, BD6.3",
        tests=_SDAR_RULE,
    ),
    Mutant(
        name="sdar-dynamic-threshold-inclusive",
        path="veridec/rules/sdar.py",
        original="high = confidence > params.confidence_threshold  # strict, as published",
        replacement="high = confidence >= params.confidence_threshold  # strict, as published",
        description="low_confidence_dynamic counts a confidence equal to the threshold as high (c >= threshold) where the published rule is strict",
        clause="spec/block_diffusion.md BD5.2",
        tests=(*_SDAR_RULE, "tests/test_llada2_golden.py"),
    ),
    Mutant(
        name="sdar-entropy-running-sum-excludes-own",
        path="veridec/rules/sdar.py",
        original="k = max(1, int((scores[order].cumsum(0) < bound).sum()))",
        replacement="k = max(1, int((scores[order].cumsum(0) - scores[order] < bound).sum()))",
        description="entropy_bounded compares the running entropy before each position with eb_threshold instead of the sum including it, committing one position more",
        clause="spec/block_diffusion.md BD6.4",
        tests=_SDAR_RULE,
    ),
    Mutant(
        name="sdar-official-overwrite-at-equal-quota",
        path="veridec/rules/sdar.py",
        original='return params.remasking_strategy != "entropy_bounded" and quota > count',
        replacement='return params.remasking_strategy != "entropy_bounded" and quota >= count',
        description="official_overwrites predicts an overwrite when the quota equals the masks left, where the published top-k takes exactly the masks",
        clause="spec/block_diffusion.md BD7.3",
        tests=(*_SDAR_CHECK, "tests/test_golden_check.py"),
    ),
    Mutant(
        name="sdar-trace-commits-drawn-mask-tokens",
        path="veridec/rules/sdar.py",
        original="committed = transfer & masked & (x0 != mask_id)  # [b]",
        replacement="committed = transfer & masked  # [b]",
        description="the step record lists a selected position that drew the mask token as committed, though it stays masked",
        clause="spec/block_diffusion.md BD6.2",
        tests=(*_SDAR_RULE, "tests/test_block_diffusion_check.py"),
    ),
    Mutant(
        name="sdar-selection-gap-against-weakest-mask-left",
        path="veridec/rules/sdar.py",
        original="strongest = x0_p[left].double().max().item() if left.any() else -math.inf",
        replacement="strongest = x0_p[left].double().min().item() if left.any() else -math.inf",
        description="the selection gap subtracts the weakest mask left instead of the strongest, overstating how clear the step's choice was (ties excused by it are judged on the wrong margin)",
        clause="spec/sequential.md SQ0.5 (spec/block_diffusion.md BD9)",
        tests=("tests/test_sdar_rule.py", "tests/test_trace_records.py", "tests/test_block_diffusion.py"),
    ),
    # ------------------------------------------------------------------ veridec/rules/filters.py
    Mutant(
        name="top-k-threshold-at-the-largest",
        path="veridec/rules/filters.py",
        original="kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1:]  # [.., 1]",
        replacement="kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., :1]  # [.., 1]",
        description="top-k's cut is the largest of the k best logits instead of the k-th, so any top_k keeps only the argmax (and its ties)",
        clause="spec/block_diffusion.md BD4 (spec/sequential.md SQ2.5, spec/editing.md ED3)",
        tests=(*_SDAR_RULE, "tests/test_editing.py"),
    ),
    # ------------------------------------------------------------------ veridec/canvas.py
    Mutant(
        name="whole-blocks-adds-a-block-on-a-boundary",
        path="veridec/canvas.py",
        original="return -(-length // block_size) * block_size",
        replacement="return (length // block_size + 1) * block_size",
        description="rounding up to whole blocks adds a whole extra block when the length is already a multiple of the block size",
        clause="spec/block_diffusion.md BD2",
        tests=("tests/test_block_diffusion.py", "tests/test_block_parallel.py", "tests/test_block_diffusion_golden.py"),
    ),
    # ------------------------------------------------------------------ reference/block_diffusion.py
    Mutant(
        name="llada2-steps-max-not-min",
        path="reference/block_diffusion.py",
        original="min(steps, gen_length // minimal_topk), temperature,",
        replacement="max(steps, gen_length // minimal_topk), temperature,",
        description="LLaDA2.0's loop runs max(steps, gen_length // minimal_topk) steps per block instead of the min",
        clause="spec/block_diffusion.md BD12, BD12.1",
        tests=("tests/test_llada2_golden.py", "tests/test_llada2_check.py"),
    ),
    # ------------------------------------------------------------------ optimized/block_diffusion.py
    Mutant(
        name="leave-keeps-masks-one-step-late",
        path="optimized/block_diffusion.py",
        original='return params.after_schedule == "leave" and step >= params.denoising_steps',
        replacement='return params.after_schedule == "leave" and step > params.denoising_steps',
        description='after_schedule="leave" lets the cached decoder take BD6.2\'s extra step (every mask committed) before leaving, instead of ending the block when its schedule is spent',
        clause="spec/block_diffusion.md BD12",
        tests=("tests/test_llada2_golden.py", "tests/test_block_diffusion.py"),
    ),
    Mutant(
        name="live-rows-skip-the-last-block",
        path="optimized/block_diffusion.py",
        original="not stop and end <= last for stop, last",
        replacement="not stop and end < last for stop, last",
        description="a row does not decode the block that ends its own canvas, so its last block stays masked",
        clause="spec/block_diffusion.md BD8.2",
        tests=("tests/test_block_diffusion.py", "tests/test_block_diffusion_golden.py", "tests/test_block_parallel.py"),
    ),
    Mutant(
        name="stop-search-includes-the-prompt",
        path="optimized/block_diffusion.py",
        original="generated = self.x[row, self.layout.shift[row] + len(self.layout.prompts[row]):end]",
        replacement="generated = self.x[row, self.layout.shift[row]:end]",
        description="the cached decoder looks for a stop id from the row's prompt on instead of its generation, so a prompt holding a stop id ends the decode after the first block",
        clause="spec/block_diffusion.md BD5.5",
        tests=("tests/test_block_diffusion.py", "tests/test_stop_ids.py", "tests/test_block_diffusion_golden.py"),
    ),
    Mutant(
        name="official-loop-writes-only-masks",
        path="optimized/block_diffusion.py",
        original="        return transfer\n\n\nLOOPS",
        replacement="        return transfer & masked\n\n\nLOOPS",
        description='loop="official" writes its draws only over masks, so the published overwrites of prompt and committed tokens (BD7.3) are not reproduced',
        clause="spec/block_diffusion.md BD10",
        tests=(*_SDAR_CHECK, "tests/test_block_diffusion.py"),
    ),
    # ------------------------------------------------------------------ optimized/block_parallel.py
    Mutant(
        name="block-parallel-decodes-rows-that-are-done",
        path="optimized/block_parallel.py",
        original="while (candidates := (self.x[:, start:end] == self.mask_id) & live[:, None]).any():",
        replacement="while (candidates := (self.x[:, start:end] == self.mask_id)).any():",
        description="the batched parallel-rule decoder keeps decoding rows that stopped or whose canvas ended, writing tokens past their stop id",
        clause="spec/block_diffusion.md BD11 (BD8.2)",
        tests=("tests/test_block_parallel.py",),
    ),
    # ------------------------------------------------------------------ veridec/trace.py
    Mutant(
        name="record-step-gap-against-masks-before-the-step",
        path="veridec/trace.py",
        original="left = (after == mask_id) & torch.isfinite(conf)  # [B, W] candidates left masked\n    strongest = torch.where(left, conf, -torch.inf).amax(dim=1)  # [B]",
        replacement="left = (before == mask_id) & torch.isfinite(conf)  # [B, W] candidates left masked\n    strongest = torch.where(left, conf, -torch.inf).amax(dim=1)  # [B]",
        description="the selection gap's strongest candidate is taken over the masks before the step (the commits included), so every gap is at most 0",
        clause="spec/sequential.md SQ0.5",
        tests=("tests/test_trace_records.py", "tests/test_block_parallel.py", "tests/test_compare.py"),
    ),
]

MUTANTS = CHECKER + BLOCK
