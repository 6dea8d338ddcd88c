"""A mutation catalogue for the code that judges other code: the checker (``veridec.testing``: tiers E, A and S,
the exact-law fit, case drawing and resolution, the upstream-defect predictions, the knob search, the tier table
and the report), the calling conventions and the recording proxy it runs candidates behind
(``veridec/adapters.py``, ``veridec/recording.py``), the exact decoder laws (``proofs_checks/laws.py``), the
records that make runs resumable (``harness/records.py``, ``harness/units.py``) and the golden replay
(``tools/golden/replay.py``, ``tools/golden/candidate.py``).

Each mutant is a one- or two-line mistake a competent developer could make and a reviewer could miss, chosen
where a wrong line would most likely change a verdict silently (a check that passes what it should fail, or fails
what it should pass). The catalogue was written from the specification (spec/*.md) and the production code alone,
without reading the test suite (tests/ was only listed, for the related test files) or the other catalogues
(tools/mutants.py beyond its ``Mutant`` dataclass, tools/mutants_independent.py).

    python -m tools.mutation --catalogue tools/mutants_checker.py --list
"""

from __future__ import annotations

from dataclasses import replace

from tools.mutants import Mutant

STOCHASTIC = ("tests/test_stochastic.py",)
EXACT_LAW = ("tests/test_exact_law_fit.py", "tests/test_stochastic.py")
CHECK = ("tests/test_check.py",)
UPSTREAM = ("tests/test_upstream.py", "tests/test_golden_check.py")
KNOBS = ("tests/test_knobs.py",)
ADAPTERS = ("tests/test_check.py", "tests/test_golden_check.py", "tests/test_checker_truths.py")
RECORDING = ("tests/test_recording.py", "tests/test_check.py", "tests/test_checker_truths.py")
LAWS = ("tests/test_laws.py", "tests/test_exact_law_fit.py")
RECORDS = ("tests/test_records.py", "tests/test_units.py")
GOLDEN = ("tests/test_golden.py", "tests/test_golden_check.py")

MUTANTS = [
    # ------------------------------------------------------------------ testing/stochastic.py (tier S, ST1-ST6)
    Mutant(
        "tier-s-candidate-shares-target-seed", "testing/stochastic.py",
        '{**drawn, "seed": drawn["seed"] + 1}',
        '{**drawn, "seed": drawn["seed"]}',
        "tier S seeds the candidate's draw i like the target's, so the two samples are not independent",
        "spec/stochastic.md ST2", STOCHASTIC),
    Mutant(
        "tier-s-seeds-overlap-between-draws", "testing/stochastic.py",
        'drawn = {**case, "seed": case["seed"] + 2 * i}',
        'drawn = {**case, "seed": case["seed"] + i}',
        "target seeds step by 1 instead of 2: the candidate's draw i reuses the target's draw i + 1 stream",
        "spec/stochastic.md ST2", STOCHASTIC),
    Mutant(
        "homogeneity-own-cell-needs-more-than-five", "testing/stochastic.py",
        "own = [value for value in ranked if pooled[value] >= MIN_POOLED][: MAX_CELLS - 1]",
        "own = [value for value in ranked if pooled[value] > MIN_POOLED][: MAX_CELLS - 1]",
        "a value seen exactly 5 times in the pooled sample is pooled into the rest cell instead of its own",
        "spec/stochastic.md ST1", STOCHASTIC),
    Mutant(
        "homogeneity-two-cells-read-as-one", "testing/stochastic.py",
        "if table.shape[1] < 2:",
        "if table.shape[1] < 3:",
        "a two-cell table (a binary view) is treated as one cell: p = 1, nothing can differ",
        "spec/stochastic.md ST1", STOCHASTIC),
    Mutant(
        "homogeneity-yates-correction", "testing/stochastic.py",
        "stats.chi2_contingency(table, correction=False)",
        "stats.chi2_contingency(table, correction=True)",
        "the two-sample test applies Yates' continuity correction on 2 x 2 tables (spec: no correction)",
        "spec/stochastic.md ST1", STOCHASTIC),
    Mutant(
        "bonferroni-over-views-dropped", "testing/stochastic.py",
        "return min(1.0, self.smallest_p * max(1, len(self.tests)))",
        "return min(1.0, self.smallest_p)",
        "the case's p-value is the smallest of its 2m tests without multiplying by their number",
        "spec/stochastic.md ST2", STOCHASTIC),
    Mutant(
        "tier-s-level-counts-one-test-per-position", "testing/stochastic.py",
        "tests = 2 * decoded",
        "tests = decoded",
        "the derived samples divide alpha by m instead of the 2m views (whole, positions, pairs)",
        "spec/stochastic.md ST3", STOCHASTIC),
    Mutant(
        "noncentrality-per-sample-swapped", "testing/stochastic.py",
        "return 4.0 if exact_law else 2.0",
        "return 2.0 if exact_law else 4.0",
        "the noncentrality bounds are swapped: 4 N delta^2 for two samples, 2 N delta^2 against an exact law",
        "spec/stochastic.md ST3", STOCHASTIC + ("tests/test_exact_law_fit.py",)),
    Mutant(
        "samples-for-power-rounds-down", "testing/stochastic.py",
        "max(1, math.ceil(_noncentrality_needed(",
        "max(1, math.floor(_noncentrality_needed(",
        "samples_for_power rounds the needed N down, so the derived N falls just short of the stated power",
        "spec/stochastic.md ST3", STOCHASTIC),
    Mutant(
        "pearson-pools-most-probable-value", "testing/stochastic.py",
        "rest += law[own.pop()]",
        "rest += law[own.pop(0)]",
        "a rare rest cell is filled with the most probable own value instead of the least probable one",
        "spec/stochastic.md ST6", EXACT_LAW),
    Mutant(
        "pearson-impossible-output-accepted", "testing/stochastic.py",
        "if any(law.get(value, 0.0) <= 0 for value in observed):",
        "if any(law.get(value, 0.0) < 0 for value in observed):",
        "an output the law gives probability 0 no longer rejects outright (it is pooled or counted as rest)",
        "spec/stochastic.md ST6", EXACT_LAW),
    # ------------------------------------------------------------------ testing/exact_law.py (ST7)
    Mutant(
        "exact-law-draws-share-one-seed", "testing/exact_law.py",
        '{**case, "seed": case["seed"] + i}',
        '{**case, "seed": case["seed"]}',
        "every one of the N candidate draws on an oracle uses the case's seed: N copies of one sample",
        "spec/stochastic.md ST7", EXACT_LAW),
    Mutant(
        "exact-law-quota-is-steps-per-block", "testing/exact_law.py",
        'return TopK(settings["block_length"] // steps_per_block)',
        "return TopK(steps_per_block)",
        "the quota rule's law is enumerated for TopK(steps per block) instead of TopK(block / steps per block)",
        "spec/stochastic.md ST7", EXACT_LAW),
    Mutant(
        "exact-law-accepts-cached-target", 'testing/targets.py',
        'official=block.FASTDLLM_PREFIX),',
        'official=block.FASTDLLM_PREFIX, exact_law=True),',
        'the prefix-cache target is marked exact-law: a cached target is held against the no-cache '
        'law instead of being refused',
        "spec/stochastic.md ST7", EXACT_LAW),
    # ------------------------------------------------------------------ testing/running.py
    Mutant(
        "at-confidence-ranked-ascending", 'testing/families/common.py',
        ".values.sort(descending=True).values",
        ".values.sort().values",
        "an at_confidence threshold takes the r-th lowest first-step confidence instead of the r-th highest",
        "spec/exactness.md EC2", CHECK),
    Mutant(
        "at-confidence-over-whole-generation", 'testing/families/common.py',
        'end = prompt.shape[1] + settings["block_length"]',
        'end = prompt.shape[1] + settings["gen_length"]',
        "at_confidence ranks the masks of every block, not only those before the first block's end",
        "spec/exactness.md EC2", CHECK + KNOBS),
    Mutant(
        "candidate-seeded-off-by-one", "testing/running.py",
        "target_seconds)\n    torch.manual_seed(case[\"seed\"])",
        "target_seconds)\n    torch.manual_seed(case[\"seed\"] + 1)",
        "the candidate's global RNG is seeded one past the case's seed, unlike the target's",
        "spec/exactness.md EC1", CHECK + STOCHASTIC),
    # ------------------------------------------------------------------ testing/exact.py (tiers E and A)
    Mutant(
        "costs-skip-query-positions", "testing/exact.py",
        'COST_FIELDS = ("model_calls", "full_forwards", "query_positions")',
        'COST_FIELDS = ("model_calls", "full_forwards")',
        "the query positions computed are not among the counters both sides are held to (nor gated at tier A)",
        "spec/exactness.md EC1", CHECK),
    Mutant(
        "zero-numeric-error-excuses-exact-ties", "testing/exact.py",
        "tie = divergence.tie and numeric_error > 0",
        "tie = divergence.tie",
        "with numeric_error 0 a divergence at an exact tie (margin 0) is excused instead of decided by SQ0.4",
        "spec/exactness.md EC1", CHECK),
    Mutant(
        "nfe-held-to-full-forwards", "testing/exact.py",
        'theirs.nfe != b["model_calls"]:',
        'theirs.nfe != b["full_forwards"]:',
        "a reported nfe is compared with the candidate's full forwards instead of its model calls",
        "spec/exactness.md EC1", CHECK),
    Mutant(
        "hook-calls-compared-by-count", "testing/exact.py",
        "if ours.hook_calls != theirs.hook_calls:",
        "if len(ours.hook_calls) != len(theirs.hook_calls):",
        "Dream's hook logs are compared by length only: a hook called at other steps passes",
        "spec/exactness.md EC5", CHECK),
    Mutant(
        "deviation-at-its-step-not-reproduced", "testing/exact.py",
        "divergence.step >= defect.at_step",
        "divergence.step > defect.at_step",
        "a candidate that deviates exactly at the official deviation's step is failed instead of matched",
        "spec/exactness.md EC6", UPSTREAM),
    Mutant(
        "candidate-call-limit-once-target", "testing/exact.py",
        "case, 2 * counters.model_calls + CALL_SLACK, setup.measure_logits,",
        "case, counters.model_calls + CALL_SLACK, setup.measure_logits,",
        "the candidate is stopped past the target's calls plus 64 instead of twice the target's plus 64",
        "spec/exactness.md EC2", CHECK + UPSTREAM),
    Mutant(
        "tier-a-logit-error-smallest", "testing/exact.py",
        '"max_logit_error": max(errors, default=None)',
        '"max_logit_error": min(errors, default=None)',
        "tier A reports the smallest cached-call logit error over the cases instead of the largest",
        "spec/exactness.md EC3", CHECK),
    Mutant(
        "diagnosis-canvas-after-the-step", "testing/exact.py",
        "for record in trace.steps[step:]:",
        "for record in trace.steps[step + 1:]:",
        "the diagnosis forwards the canvas after the divergent step's commits instead of before it",
        "spec/exactness.md EC2", CHECK),
    # ------------------------------------------------------------------ testing/check.py
    Mutant(
        "tier-s-no-bonferroni-over-cases", "testing/check.py",
        'level = o.alpha / (1 if case is not None else max_examples)',
        'level = o.alpha',
        "each drawn tier S case is tested at alpha instead of alpha / cases: the check's false alarms exceed alpha",
        "spec/stochastic.md ST2", STOCHASTIC + CHECK),
    Mutant(
        "baseline-equal-counts-as-worse", "testing/check.py",
        "both(name) and result.metrics[name] < baseline[name]]",
        "both(name) and result.metrics[name] <= baseline[name]]",
        "tier A fails a measure that equals its baseline's (exact share, token or commit-order match)",
        "spec/exactness.md EC3", CHECK),
    Mutant(
        "baseline-costs-direction-inverted", "testing/check.py",
        "both(name) and result.metrics[name] > baseline[name]]",
        "both(name) and result.metrics[name] < baseline[name]]",
        "tier A fails a smaller logit error or fewer calls and passes more calls and a larger logit error",
        "spec/exactness.md EC3", CHECK),
    Mutant(
        "reports-the-unshrunk-case", "testing/check.py",
        "result.failure = failures[-1]",
        "result.failure = failures[0]",
        "the report and reproducer give the first failing case instead of the shrunk one Hypothesis replays last",
        "spec/exactness.md EC2", CHECK),
    # ------------------------------------------------------------------ testing/tiers.py
    Mutant(
        "tier-a-logits-unmeasured", "testing/tiers.py",
        "runs_every_case=True, measures_logits=True,",
        "runs_every_case=True, measures_logits=False,",
        "tier A no longer measures the candidate's cached-call logit error (max_logit_error always None)",
        "spec/exactness.md EC3", CHECK),
    Mutant(
        "tier-e-does-not-shrink", "testing/tiers.py",
        "case_metrics, shrinks=True)",
        "case_metrics, shrinks=False)",
        "tier E reports its first failing case unshrunk",
        "spec/exactness.md EC2", CHECK),
    # ------------------------------------------------------------------ testing/official.py (FD9, SQ2.8)
    Mutant(
        "fd9-4-dual-batch-a-step-late", 'testing/families/block.py',
        'if loop.dual and batch > 1 and in_block >= 1:',
        'if loop.dual and batch > 1 and in_block >= 2:',
        "FD9.4 is predicted at a block's second cached forward instead of its first (step j = 1)",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "fd9-1-quota-exhausted-strict", 'testing/families/block.py',
        "if quota and in_block >= per_block:",
        "if quota and in_block > per_block:",
        "FD9.1 is predicted one forward after the block outlives its schedule (j > S instead of j >= S)",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "fd9-5-june-batch-of-two-runs", 'testing/families/block.py',
        'if loop.one_row and batch > 1:',
        'if loop.one_row and batch > 2:',
        "the June 2025 loop's one-row canvas is predicted to fail only from batch 3, not batch 2",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "fd9-3-candidate-windows-swapped", 'testing/families/block.py',
        'candidates = masked[:, :end] if loop.full else masked[:, start:end]',
        'candidates = masked[:, start:end] if loop.full else masked[:, :end]',
        "FD9.3's candidates: inside the block without a cache and before the block's end with one (swapped)",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "fd9-3-every-row-without-candidates", 'testing/families/block.py',
        "return bool((candidates.sum(dim=1) == 0).any() and masked[:, start:end].any())",
        "return bool((candidates.sum(dim=1) == 0).all() and masked[:, start:end].any())",
        "FD9.3 needs every row to lack candidates instead of some row, while another still decodes the block",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "fd9-2-endless-at-any-temperature", 'testing/families/block.py',
        'deterministic = settings.get("temperature", 0) == 0 and settings.get("remasking") != "random"',
        'deterministic = settings.get("temperature", 0) == 0 or settings.get("remasking") != "random"',
        "FD9.2 predicts an endless official loop for a sampled stall too (either condition instead of both)",
        "spec/fastdllm.md FD9", UPSTREAM),
    Mutant(
        "sq2-8-row-clamp-inclusive", 'testing/families/dream.py',
        "if bool((masked.sum(dim=1) < count).any()):",
        "if bool((masked.sum(dim=1) <= count).any()):",
        "SQ2.8 predicts Dream's deviation where a row holds exactly the step's count of masks, not fewer",
        "spec/sequential.md SQ2.8", UPSTREAM),
    # ------------------------------------------------------------------ testing/knobs.py (EC7)
    Mutant(
        "knob-moves-counted-by-any-counter", "testing/knobs.py",
        "return all(getattr(a.counters, f) == getattr(b.counters, f) for f in COST)",
        "return any(getattr(a.counters, f) == getattr(b.counters, f) for f in COST)",
        "two runs count as the same when any one counter agrees: a knob that moves only some costs is missed",
        "spec/exactness.md EC7", KNOBS),
    Mutant(
        "block-length-knob-never-searched", "testing/knobs.py",
        'knobs = [name for name in setup.goal.family.knobs if name in names]',
        'knobs = [name for name in setup.goal.family.knobs if name in names and name != "block_length"]',
        "block_length is never searched as a knob, so a candidate that ignores it passes",
        "spec/exactness.md EC7", KNOBS),
    Mutant(
        "block-length-variants-keep-too-many-steps", 'testing/families/common.py',
        '"steps": (gen // b) * min(per_block, b)}',
        '"steps": (gen // b) * per_block}',
        "a changed block length keeps the steps per block even where they exceed the new block's length",
        "spec/exactness.md EC7", KNOBS),
    # ------------------------------------------------------------------ testing/strategies.py, candidates.py
    Mutant(
        "tier-s-draws-greedy-cases", 'testing/families/block.py',
        '"temperature": draw(temperatures(sampled)), "remasking": draw(st.sampled_from(REMASKING))}',
        '"temperature": draw(temperatures(False)), "remasking": draw(st.sampled_from(REMASKING))}',
        'tier S block-family cases may be drawn at temperature 0, where both laws are point masses '
        '(spec: 0.7 or 1 only)',
        "spec/stochastic.md ST2", STOCHASTIC + CHECK),
    Mutant(
        "prompt-masks-drawn-for-dream-only", 'testing/families/block.py',
        '"block_length": divisor_block_lengths}, infill=True,',
        '"block_length": divisor_block_lengths}, infill=False,',
        'prompt masks are never drawn for LLaDA / Fast-dLLM cases (the block family loses infill)',
        "spec/exactness.md EC2", CHECK),
    Mutant(
        "kwargs-candidate-gets-no-settings", "testing/candidates.py",
        "kwargs = {name: value for name, value in settings.items() if fit.takes(name)}",
        "kwargs = {name: value for name, value in settings.items() if name in fit.names}",
        "a candidate taking **kwargs is called without the drawn settings (it runs at its defaults)",
        "spec/exactness.md EC2", CHECK),
    # ------------------------------------------------------------------ testing/report.py, models.py
    Mutant(
        "reproducer-upstream-flag-inside-case", "testing/report.py",
        'words[-2:-2] = ["--official-defects", result.official_mode]',
        'words[-1:-1] = ["--official-defects", result.official_mode]',
        "the reproducer command puts --upstream-defects between --case and its JSON",
        "spec/exactness.md EC6", UPSTREAM + CHECK),
    Mutant(
        "check-model-ties-half-the-pairs", "testing/models.py",
        "for first in range(0, 2 * TIED_PAIRS, 2):",
        "for first in range(0, TIED_PAIRS, 2):",
        "the tiny check models tie only tokens 0 .. 31 in pairs instead of 0 .. 63",
        "spec/exactness.md EC4", CHECK),
    # ------------------------------------------------------------------ veridec/adapters.py (MA1)
    Mutant(
        "llada-convention-ignores-padding-by-default", "veridec/adapters.py",
        'def __init__(self, model, padding: str = "honour"):',
        'def __init__(self, model, padding: str = "ignore"):',
        "the llada convention drops the attention mask by default instead of honouring it",
        "spec/models.md MA1", ADAPTERS),
    Mutant(
        "prefix-continuation-drops-padding", "veridec/adapters.py",
        "self._key_mask.shape[0] != batch or self._key_mask.shape[1] < length:",
        "self._key_mask.shape[0] != batch or self._key_mask.shape[1] != length:",
        "a prefix continuation (C < L) uses an all-ones key mask: left padding is ignored in cached calls",
        "spec/models.md MA1", ADAPTERS),
    Mutant(
        "prefix-continuation-positions-off-by-one", "veridec/adapters.py",
        "positions = torch.arange(cached, cached + queries, device=x.device)",
        "positions = torch.arange(cached + 1, cached + queries + 1, device=x.device)",
        "x after a cached prefix of length C sits at C + 1 .. C + Q instead of C .. C + Q - 1",
        "spec/models.md MA1", ADAPTERS),
    Mutant(
        "replace-position-rows-may-differ", "veridec/adapters.py",
        "if not (marks == marks[:1]).all():",
        "if not (marks == marks[:1]).any():",
        "replace_position marking other positions in other rows is accepted (row 0's run is used)",
        "spec/models.md MA1", ADAPTERS),
    Mutant(
        "dream-convention-ignores-tok-idx", "veridec/adapters.py",
        "positions = torch.arange(x.shape[1], device=x.device).expand_as(x) if tok_idx is None else tok_idx",
        "positions = torch.arange(x.shape[1], device=x.device).expand_as(x)",
        "the dream convention ignores tok_idx: left-padded rows get RoPE positions 0 .. L-1",
        "spec/models.md MA1", ADAPTERS),
    # ------------------------------------------------------------------ veridec/recording.py (N9)
    Mutant(
        "commit-placed-at-previous-call", "veridec/recording.py",
        "step_of[committed] = last_masked[committed]",
        "step_of[committed] = index - 1",
        "a commit is placed at the call just before it showed, not the last call that showed it masked",
        "spec/notation.md N9", RECORDING),
    Mutant(
        "cached-calls-counted-as-full-forwards", "veridec/recording.py",
        'full=call.kind == "full")',
        "full=True)",
        "the recorded counters count every cached call as a full forward",
        "spec/notation.md N8", RECORDING),
    Mutant(
        "call-limit-allows-one-more", "veridec/recording.py",
        "if self.limit is not None and len(self.calls) >= self.limit:",
        "if self.limit is not None and len(self.calls) > self.limit:",
        "RecordingModel(limit=N) raises at call N + 2 instead of N + 1",
        "spec/notation.md N9", RECORDING),
    Mutant(
        "logit-error-held-canvas-off-by-one-call", "veridec/recording.py",
        "for row, positions in enumerate(steps[index].positions):",
        "for row, positions in enumerate(steps[index - 1].positions):",
        "a cached call's logits are held against the canvas with the previous call's commits masked, not its own",
        "spec/notation.md N9", RECORDING),
    # ------------------------------------------------------------------ proofs_checks/laws.py (TD1, TD2)
    Mutant(
        "law-block-step-not-reset-at-block-end", "proofs_checks/laws.py",
        "law_from(next_canvas, 0 if done else block_step + 1, after)",
        "law_from(next_canvas, block_step + 1, after)",
        "the step within the block keeps counting into the next block (a quota schedule reads the wrong entry)",
        "spec/theorems.md TD1", LAWS),
    Mutant(
        "law-memo-key-ignores-memory-contents", "proofs_checks/laws.py",
        "(str(t.dtype), tuple(t.shape), t.numpy().tobytes())",
        "(str(t.dtype), tuple(t.shape))",
        "states whose rule memories differ (KLASS) share one memo entry: the law of one is reused for the other",
        "spec/theorems.md TD1", LAWS),
    Mutant(
        "law-proposals-temperature-multiplied", "proofs_checks/laws.py",
        "probs = torch.softmax(logits.double() / temperature, dim=-1)",
        "probs = torch.softmax(logits.double() * temperature, dim=-1)",
        "proposals are drawn from softmax(logits * T) instead of softmax(logits / T) (equal only at T = 1)",
        "spec/theorems.md TD1", LAWS),
    Mutant(
        "td2-threshold-selection-exponents-swapped", "proofs_checks/laws.py",
        "(1 - tau) ** size * tau ** (m - size)",
        "tau ** size * (1 - tau) ** (m - size)",
        "Threshold(tau)'s random selection weighs a passing draw tau and a failing one 1 - tau (equal at 1/2)",
        "spec/theorems.md TD2", LAWS),
    Mutant(
        "td2-sub-bound-not-weighted-by-tokens", "proofs_checks/laws.py",
        "bound += p_chosen * weight * sub_bound",
        "bound += p_chosen * sub_bound",
        "TD2's bound adds each following state's bound without the probability of the tokens that lead there",
        "spec/theorems.md TD2", LAWS),
    # ------------------------------------------------------------------ harness/records.py, harness/units.py
    Mutant(
        "torn-line-truncation-eats-newline", "harness/records.py",
        "handle.truncate(len(complete) + 1 if complete else 0)",
        "handle.truncate(len(complete))",
        "dropping a torn last line also drops the newline of the last complete one; the next record is glued on",
        "spec/exactness.md E4", RECORDS),
    Mutant(
        "merge-rewrites-main-records", "harness/records.py",
        "[(k, v) for k, v in self.done.items() if k not in recorded]",
        "[(k, v) for k, v in self.done.items()]",
        "merging the rank files appends the main file's own records to it again (units recorded twice)",
        "spec/exactness.md E4", RECORDS),
    Mutant(
        "rank-files-never-read", "harness/records.py",
        "for path in [self.main, *self._rank_files()]:",
        "for path in [self.main]:",
        "only the main file is read: other ranks' records are not merged (and their files are then deleted)",
        "spec/exactness.md E4", RECORDS),
    Mutant(
        "fresh-keeps-rank-files", "harness/units.py",
        'for old in [path, *path.parent.glob(f"{path.stem}.rank*.jsonl")]:',
        "for old in [path]:",
        "--fresh removes the main records file but leaves the rank files, whose units are then resumed",
        "spec/exactness.md E4", RECORDS),
    Mutant(
        "resume-recomputes-finished-units", "harness/units.py",
        "if group.mine(i) and key not in results]",
        "if group.mine(i)]",
        "a rerun recomputes (and records again) the units its records already hold",
        "spec/exactness.md E4", RECORDS),
    # ------------------------------------------------------------------ tools/golden/replay.py, candidate.py
    Mutant(
        "golden-replay-ignores-step-commits", "tools/golden/replay.py",
        'return a["canvas"] == b["canvas"] and a["nfe"] == b["nfe"] and a["steps"] == b["steps"]',
        'return a["canvas"] == b["canvas"] and a["nfe"] == b["nfe"]',
        "the golden replay no longer compares the per-step commits of completed runs",
        "spec/sequential.md SQ0.7", GOLDEN),
    Mutant(
        "golden-replay-ignores-forward-count", "tools/golden/replay.py",
        'return a["canvas"] == b["canvas"] and a["nfe"] == b["nfe"] and a["steps"] == b["steps"]',
        'return a["canvas"] == b["canvas"] and a["steps"] == b["steps"]',
        "the golden replay no longer compares the forward count of completed runs",
        "spec/sequential.md SQ0.7", GOLDEN),
    Mutant(
        "golden-padding-ignored-only-when-every-row-pads", "tools/golden/replay.py",
        'any(0 in row for row in case["attention_mask"])',
        'all(0 in row for row in case["attention_mask"])',
        "a LLaDA case is replayed without its mask only when every row is padded, not when any row is",
        "spec/sequential.md SQ1.8", GOLDEN),
    Mutant(
        "golden-candidate-drops-june-extra-forward", "tools/golden/candidate.py",
        'if done and not (self.loop == "legacy" and self.in_block == 1):',
        "if done:",
        "the replayed June 2025 loop moves on when the refresh completes the block, skipping its extra cached call",
        "spec/fastdllm.md FD6", ("tests/test_golden_check.py",)),
    Mutant(
        "golden-candidate-prefix-feeds-block-only", "tools/golden/candidate.py",
        "self.model(self.x[:, start:], past_key_values=self.kv, use_cache=True)",
        "self.model(self.x[:, start:end], past_key_values=self.kv, use_cache=True)",
        "the replayed prefix-cache call feeds the block only instead of everything from the block's start",
        "spec/fastdllm.md FD6", ("tests/test_golden_check.py",)),
]


# The checker's independent truths (added after the catalogue was written, by the maintainers): each area's
# mutants also run these test files before the rest of the suite.
AREA_TRUTHS = {
    "testing": ("tests/test_checker_truths.py", "tests/test_upstream.py", "tests/test_knobs.py",
                "tests/test_golden_check.py"),
    "veridec/adapters": ("tests/test_golden_check.py",),
    "veridec/recording": ("tests/test_golden_check.py", "tests/test_recording.py"),
    "proofs_checks": ("tests/test_laws.py", "tests/test_laws_brute.py"),
    "harness": ("tests/test_checker_truths.py",),
    "tools": ("tests/test_golden.py", "tests/test_golden_check.py"),
}
MUTANTS = [replace(m, tests=m.tests + tuple(t for t in AREA_TRUTHS.get(m.area, ()) if t not in m.tests))
           for m in MUTANTS]
