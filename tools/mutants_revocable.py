"""A mutation catalogue for revocable commits: checking a WINO decoder or the editing sampler by its events
(spec/wino.md WN5, WN10; spec/editing.md ED4, ED5, ED7; spec/sequential.md SQ0.5; spec/exactness.md EC1, EC2, EC7).

It covers the event comparison of ``veridec.compare.compare_traces`` (``_compare_events``, ``_event_steps``,
``_decision_margin``, ``_event_divergence``, ``_observed_min``), ``veridec.events.event_trace``, the recording
proxy's event reconstruction (``RecordingModel.trace`` / ``events`` / ``_full_calls_of_one_batch``, the wider
calls of WINO's verification block), the LLaDA adapter's explicit WINO call (``_additive``, ``_positions``),
``Trace.from_dict``, the WINO case resolution (``testing.wino_cases``), the strategy dispatch and the knob
alternatives for ``threshold_back`` / ``block_length`` (``testing.strategies``, ``testing.knobs``), and the guards
of ``testing.exact`` (``_comparable``, ``_events_before``, the tie rule of ``_compare``); for the editing
sampler, its case resolution (``testing.editing_cases``), its target, knobs and strategy, the adapter's additive
mask and the recording's growing window (``_shown``). Each mutant is a one- or two-line mistake placed where a
wrong line would most likely change a verdict silently (a candidate compared by tokens only, a broken variant
excused as a tie, an equality case never drawn).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_independent.py, tools/mutants_checker.py) was read.

    python -m tools.mutation --catalogue tools/mutants_revocable.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

COMPARE = "veridec/compare.py"
EVENTS = "veridec/events.py"
TRACE = "veridec/trace.py"
RECORDING = "veridec/recording.py"
ADAPTERS = "veridec/adapters.py"
WINO_CASES = "testing/wino_cases.py"
EXACT = "testing/exact.py"
KNOBS = "testing/knobs.py"
STRATEGIES = "testing/strategies.py"
EDITING_CASES = "testing/editing_cases.py"
TARGETS = "testing/targets.py"

EVENT_TRACES = "tests/test_event_traces.py"
WINO_CHECK = "tests/test_wino_check.py"
RECORDED_EVENTS = "tests/test_recorded_events.py"
COMPARE_TESTS = "tests/test_compare.py"
RECORDING_TESTS = "tests/test_recording.py"
WINO_TESTS = "tests/test_wino.py"
CHECK = "tests/test_check.py"
KNOB_TESTS = "tests/test_knobs.py"
EDITING_CHECK = "tests/test_editing_check.py"
EDITING_TESTS = "tests/test_editing.py"

MUTANTS = [
    # --- veridec/compare.py: the event comparison (WN10, SQ0.5) ---
    Mutant("event-steps-commits-only", COMPARE,
           "mine = [e for e in events if e.row == row and e.old != e.new]",
           'mine = [e for e in events if e.row == row and e.kind == "commit" and e.old != e.new]',
           "event traces are compared by their commits only: a missing or extra revocation goes unnoticed",
           "spec/wino.md WN10", (EVENT_TRACES, COMPARE_TESTS, WINO_CHECK)),
    Mutant("event-steps-keep-mask-commits", COMPARE,
           "mine = [e for e in events if e.row == row and e.old != e.new]",
           "mine = [e for e in events if e.row == row]",
           "commits of the mask token itself (invisible to any recording) are compared, so a correct recorded "
           "candidate diverges wherever the target's model proposes the mask",
           "spec/wino.md WN10", (EVENT_TRACES, COMPARE_TESTS, WINO_CHECK)),
    Mutant("event-sets-one-sided-difference", COMPARE,
           "if set(ea) != set(eb):",
           "if set(ea) - set(eb):",
           "a step counts as equal when b has every event of a: extra events on b's side (an extra revocation) "
           "pass",
           "spec/wino.md WN10", (EVENT_TRACES, COMPARE_TESTS, WINO_CHECK)),
    Mutant("event-margin-of-next-step", COMPARE,
           "_decision_margin(a, step, row)",
           "_decision_margin(a, step + 1, row)",
           "the tie test reads the target's decision margin of the step after the divergent one (off by one)",
           "spec/wino.md WN10", (EVENT_TRACES, COMPARE_TESTS, WINO_CHECK)),
    Mutant("one-sided-step-takes-target-margin", COMPARE,
           "if step < len(trace.steps) else math.nan",
           "if step < len(trace.steps) else 0.0",
           "a step past a trace's records reads a decision margin of 0, so a decode that runs on past the "
           "reference's last step is excused as a tie under any numeric error",
           "spec/wino.md WN10", (EVENT_TRACES, COMPARE_TESTS, WINO_CHECK)),
    Mutant("observed-margin-max", COMPARE,
           "return min(observed) if observed else math.nan",
           "return max(observed) if observed else math.nan",
           "the larger of the two sides' margins decides a tie instead of the smaller",
           "spec/sequential.md SQ0.5", (COMPARE_TESTS, EVENT_TRACES)),
    # --- veridec/events.py: event_trace (WN5, WN10) ---
    Mutant("event-trace-margins-shifted", EVENTS,
           "decoded.margins[row][step] if step < decoded.forwards[row]",
           "decoded.margins[row][step - 1] if step < decoded.forwards[row]",
           "each step record carries the previous step's decision margin (step 0 the last one's)",
           "spec/wino.md WN5", (EVENT_TRACES, WINO_CHECK, WINO_TESTS)),
    # --- veridec/recording.py: events reconstructed from the calls (WN10) ---
    Mutant("trace-revocations-count-edits", RECORDING,
           "trace.counters.revocations += int((held & (now == mask_id)).sum())",
           "trace.counters.revocations += int(held.sum())",
           "the recorded revocation counter also counts edits (a shown token replaced by another)",
           "spec/wino.md WN10", (RECORDED_EVENTS, RECORDING_TESTS)),
    Mutant("trace-events-unguarded", RECORDING,
           "trace.events = self.events(final, mask_id) if self._full_calls_of_one_batch(batch) else None",
           "trace.events = self.events(final, mask_id)",
           "trace() always asks for events, which raise for cached calls: a cached candidate gets no trace at all "
           "and is compared by tokens and counters only",
           "spec/wino.md WN10", (RECORDED_EVENTS, RECORDING_TESTS, CHECK)),
    Mutant("full-calls-any-instead-of-all", RECORDING,
           'return all(c.kind == "full" and c.tokens.shape[0] == batch for c in self.calls)',
           'return any(c.kind == "full" and c.tokens.shape[0] == batch for c in self.calls)',
           "one full call of the right shape is enough for events: a decoder with cached calls gets garbage "
           "events or none (its trace is dropped)",
           "spec/wino.md WN10", (RECORDED_EVENTS, RECORDING_TESTS, CHECK, EVENT_TRACES)),
    Mutant("events-closing-diff-unsliced", RECORDING,
           "before = _shown(before, after.shape[1], mask_id)",
           "before = _shown(before, before.shape[1], mask_id)",
           "the last call is diffed against the final canvas at its full width: WINO's wider calls fail, and a "
           "WINO candidate loses its events (compared by tokens only)",
           "spec/wino.md WN10", (RECORDED_EVENTS, WINO_CHECK)),
    Mutant("trace-refuses-wider-calls", RECORDING,
           "width = max(length, *(int(c.positions.max()) + 1 for c in self.calls if c.positions.numel()))",
           "width = length",
           "calls wider than the returned canvas (the verification block) are refused: a WINO candidate gets no "
           "trace and is compared by tokens and counters only",
           "spec/wino.md WN10", (RECORDED_EVENTS, RECORDING_TESTS, WINO_CHECK)),
    # --- veridec/adapters.py: the explicit WINO call (WN10) ---
    Mutant("additive-mask-transposed", ADAPTERS,
           "sees = attention_mask.bool()",
           "sees = attention_mask.bool().transpose(-1, -2)",
           "the mask is read as (key row, query column): generation queries see the verification block and a "
           "verification query sees the token it verifies",
           "spec/wino.md WN10", (WINO_CHECK, RECORDED_EVENTS)),
    Mutant("zero-one-check-any", ADAPTERS,
           "(zero_one.all() and (attention_mask == 1).any())",
           "(zero_one.any() and (attention_mask == 1).any())",
           "a non-boolean mask passes the 0/1 check when any entry is 0 or 1 (0.5 is read as 'attends')",
           "spec/wino.md WN10", (WINO_CHECK, RECORDED_EVENTS, EVENT_TRACES)),
    Mutant("position-ids-ignored", ADAPTERS,
           "return position_ids.to(device).expand(batch, -1)",
           "return torch.arange(length, device=device).expand(batch, -1)",
           "position_ids are checked but the default 0 .. L-1 is used: the verification block is rotated at its "
           "own positions, not its block's",
           "spec/wino.md WN10", (WINO_CHECK, RECORDED_EVENTS)),
    # --- veridec/trace.py ---
    Mutant("from-dict-drops-events", TRACE,
           'Counters(**data["counters"]), None if events is None else [Event(**e) for e in events])',
           'Counters(**data["counters"]))',
           "a loaded trace loses its events and is compared by commit order: revocations vanish",
           "spec/wino.md WN5", (EVENT_TRACES, COMPARE_TESTS)),
    # --- testing/wino_cases.py: thresholds drawn as confidences (WN10) ---
    Mutant("draft-confidence-from-smallest", 'testing/families/wino.py',
           "return drafted[min(rank, len(drafted) - 1)]",
           "return sorted(drafted)[min(rank, len(drafted) - 1)]",
           "threshold rank r is counted from the smallest first-step draft confidence, not the largest",
           "spec/wino.md WN10", (WINO_CHECK,)),
    Mutant("back-confidence-wrong-step", 'testing/families/wino.py',
           'e.step == 1 and e.kind == "revoke"',
           'e.step == 0 and e.kind == "revoke"',
           "threshold_back is read from the first step, which never revokes: always the 0.9 fallback, so the "
           "strict b < threshold_back never meets equality",
           "spec/wino.md WN10", (WINO_CHECK,)),
    Mutant("back-confidence-default-threshold", 'testing/families/wino.py',
           '"temperature", "threshold")}',
           '"temperature")}',
           "the decode that reads threshold_back runs at the default threshold 0.6, not the case's, so the "
           "second step it reads is another decode's",
           "spec/wino.md WN10", (WINO_CHECK,)),
    # --- testing/strategies.py, testing/knobs.py: drawing (EC2, EC7) ---
    Mutant("wino-max-batch-ignored", STRATEGIES,
           "(family.prompts or prompts)(model, min(max_batch, target.max_batch or max_batch), padding,",
           "(family.prompts or prompts)(model, max_batch, padding,",
           "the target's row limit is ignored: WINO cases get several (padded) rows, which the official function "
           "does not take",
           "spec/exactness.md EC2", (WINO_CHECK, CHECK)),
    Mutant("threshold-back-not-a-knob", 'testing/families/wino.py',
           '"threshold_back": choices("threshold_back", BACK_THRESHOLDS)',
           '"threshold_back": lambda settings: []',
           "threshold_back has no alternatives: it is never exercised, so a candidate that ignores it passes",
           "spec/exactness.md EC7", (KNOB_TESTS, WINO_CHECK)),
    Mutant("block-lengths-exclude-one-block", 'testing/families/common.py',
           "blocks = [b for b in range(1, gen + 1) if gen % b == 0 and b != block]",
           "blocks = [b for b in range(1, gen) if gen % b == 0 and b != block]",
           "the gen length itself (one block) is never an alternative block length (off by one)",
           "spec/exactness.md EC7", (KNOB_TESTS,)),
    # --- testing/exact.py: the guards (EC1, WN10) ---
    Mutant("comparable-symmetric-events", EXACT,
           "(ours.events is None or theirs.events is not None)",
           "((ours.events is None) == (theirs.events is None))",
           "a candidate whose calls give events (full forwards of one shape) is not compared with a target "
           "without events: its commit order goes unchecked",
           "spec/exactness.md EC1", (CHECK, WINO_CHECK)),
    Mutant("tie-without-numeric-error", EXACT,
           "tie = divergence.tie and numeric_error > 0",
           "tie = divergence.tie",
           "a divergence at margin 0 is excused with numeric_error 0: exact ties (and WINO's at-confidence "
           "thresholds) excuse any choice",
           "spec/exactness.md EC1", (CHECK, WINO_CHECK)),
    Mutant("events-before-keeps-the-step", EXACT,
           "if event.step >= step:",
           "if event.step > step:",
           "the diagnosed canvas already holds the divergent step's events (the canvas after it, not before)",
           "spec/wino.md WN10", (WINO_CHECK, EVENT_TRACES)),
    # --- the editing sampler's check (spec/editing.md ED7) ---
    Mutant("editing-confidence-first-step", 'testing/families/editing.py',
           '"edit", 1, rank,',
           '"edit", 0, rank,',
           "editing_threshold is read from the first step's edits, which never happen: always the 0.9 fallback, so "
           "the strict q > editing_threshold never meets equality",
           "spec/editing.md ED7", (EDITING_CHECK,)),
    Mutant("editing-confidence-from-smallest", 'testing/families/editing.py',
           "e.kind == kind), reverse=True)",
           "e.kind == kind))",
           "both at-confidence thresholds count rank r from the smallest confidence of their step, not the largest",
           "spec/editing.md ED7", (EDITING_CHECK,)),
    Mutant("editing-resolved-with-threshold-override", 'testing/families/editing.py',
           "EDITING_FALLBACK, editing_threshold=0.0)",
           "EDITING_FALLBACK, threshold=0.0)",
           "a copy-paste of the first resolution: the edit confidences are read from a decode at threshold 0 and "
           "the default editing_threshold 0.9 (only edits above 0.9), not the case's threshold and 0",
           "spec/editing.md ED7", (EDITING_CHECK,)),
    Mutant("editing-resolution-without-fallback", 'testing/families/editing.py',
           "EDITING_FALLBACK, editing_threshold=0.0)",
           "None, editing_threshold=0.0)",
           "no 0.9 fallback: a case whose second step edits nothing at editing_threshold 0 raises instead of "
           "resolving, so such cases are never drawn",
           "spec/editing.md ED7", (EDITING_CHECK, KNOB_TESTS)),
    Mutant("editing-resolution-keeps-dict-settings", 'testing/families/editing.py',
           'if name in EDITING_SETTINGS and not isinstance(value, dict)}',
           'if name in EDITING_SETTINGS}',
           "the unresolved {'at_confidence': r} editing_threshold leaks into the decode that resolves threshold: a "
           "case drawing both at confidences fails to resolve",
           "spec/editing.md ED7", (EDITING_CHECK,)),
    Mutant("editing-resolution-unseeded", 'testing/families/editing.py',
           "    torch.manual_seed(seed)\n",
           "",
           "the resolving reference decode does not run under the case's seed: at temperature > 0 its draws are "
           "not the two sides', so the thresholds read from it miss their confidences",
           "spec/editing.md ED7", (EDITING_CHECK,)),
    Mutant("editing-target-drops-padding", 'testing/families/common.py',
           '        if attention_mask is not None:\n'
           '            raise ValueError(f"attention_mask: {refusal}")\n',
           "",
           "the revocable targets (editing, WINO) silently ignore an attention mask instead of refusing it: a padded "
           "case (--case) is judged against a decode that never saw the padding",
           "spec/editing.md ED7", (EDITING_CHECK, CHECK)),
    Mutant("editing-target-no-row-limit", TARGETS,
           'call="veridec.reference.editing.generate", max_batch=1,',
           'call="veridec.reference.editing.generate",',
           "the editing target loses its one-row limit: cases of several (padded) rows are drawn, which the "
           "sampler refuses (ED1)",
           "spec/editing.md ED7", (EDITING_CHECK, CHECK)),
    Mutant("num-to-transfer-not-a-knob", 'testing/families/editing.py',
           ' "num_to_transfer": choices("num_to_transfer", (1, 2)),',
           '',
           "num_to_transfer is no editing knob: it is never exercised, so a candidate that ignores it passes",
           "spec/editing.md ED7", (KNOB_TESTS, EDITING_CHECK)),
    Mutant("infill-drawn-for-editing", 'testing/families/editing.py',
           'resolve=resolve_editing_case)',
           'resolve=resolve_editing_case, infill=True)',
           "editing cases draw a prompt mask half the time, which ED7's cases exclude (one row without padding or "
           "prompt masks)",
           "spec/editing.md ED7", (EDITING_CHECK, CHECK)),
    Mutant("all-zero-mask-read-as-boolean", ADAPTERS,
           "(zero_one.all() and (attention_mask == 1).any())",
           "zero_one.all()",
           "an additive mask of zeros only (a one-block window: everything attends) is read as booleans, so "
           "nothing attends in the first block",
           "spec/editing.md ED7", (EDITING_CHECK, RECORDED_EVENTS)),
    Mutant("additive-mask-read-as-boolean", ADAPTERS,
           "sees = attention_mask == 0",
           "sees = attention_mask.bool()",
           "the additive branch reuses the boolean reading: 0 is read as 'does not attend' and -inf as 'attends', "
           "the block-causal mask inverted",
           "spec/editing.md ED7", (EDITING_CHECK, RECORDED_EVENTS)),
    Mutant("additive-mask-finfo-min", ADAPTERS,
           "(attention_mask == -math.inf)",
           "(attention_mask == torch.finfo(attention_mask.dtype).min)",
           "Hugging Face's finfo-min convention instead of -inf: the official sampler's 0/-inf bfloat16 mask is "
           "refused (and a finfo-min one accepted)",
           "spec/editing.md ED7", (EDITING_CHECK, RECORDED_EVENTS)),
    Mutant("shown-pads-with-zeros", RECORDING,
           'pad = torch.full((tokens.shape[0], width - tokens.shape[1]), mask_id, dtype=tokens.dtype, device="cpu")',
           'pad = torch.zeros((tokens.shape[0], width - tokens.shape[1]), dtype=tokens.dtype, device="cpu")',
           "positions a shorter call does not show count as token 0, not the mask: each block the editing "
           "sampler's window grows into (and the tail after an EOS stop) shows spurious revocations of token 0",
           "spec/editing.md ED7", (RECORDED_EVENTS, EDITING_CHECK, EVENT_TRACES)),
]
