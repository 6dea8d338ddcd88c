# ruff: noqa: E501  (a mutant's original and mutated texts are verbatim source lines)
"""A mutation catalogue for veridec's product and checker plumbing: the code around the decoders that turns a
decode into a number, a file or a verdict.

Files: ``veridec/throughput.py`` (tokens to the first EOS per second), ``veridec/trace.py`` and
``veridec/events.py`` (traces, counters, event comparison: spec/sequential.md SQ0.1/SQ0.5, spec/notation.md N8,
spec/wino.md WN5/WN10), ``veridec/files.py`` (atomic report writes), ``veridec/numerics.py`` (measured
tolerances, spec/exactness.md E3); ``testing/`` (loading and calling a foreign candidate, validating a replayed
case and a tier A baseline, Dream's hooks, the tier table, SDAR case draws, the check models: spec/exactness.md
EC1-EC5, spec/block_diffusion.md BD9); ``harness/arguments.py`` and ``harness/workloads.py`` (command-line
refusals, the exactness table's prompts and columns: spec/exactness.md E2-E4, EC2, EC8, spec/guidance.md G3b);
``harness/checks/`` (the ``veridec verify`` rows: spec/models.md MC2-MC3, spec/sequential.md SQ1.4,
spec/fastdllm.md FD3, spec/block_diffusion.md BD8, spec/theorems.md TD1/TK3).

Kinds of mistakes: a strict/inclusive comparison swapped at a boundary (an EOS, a vocabulary id, a seed limit,
a probability), a count that counts the wrong thing (one row's queries, every step, a revocation as an edit),
a setting not forwarded (the mask id, the verify seed), the wrong row or side (row 0's padding, the candidate's
own error as the tolerance, a fresh cache where a stale one was meant), a missing clone, a check weakened
(signed instead of absolute error, ``zip`` instead of ``zip_longest``, an accumulator overwritten) and a flipped
default. Each is placed where it would most likely let a wrong result pass silently. ``veridec/throughput.py``
has no spec clause of its own (its definition is its module docstring and docs/maintainers.md); its mutants
cite spec/notation.md N8, the costs a speed is reported with.

Written from the spec and the production code alone: nothing under tests/ and no other catalogue was read.

    python -m tools.mutation --catalogue tools/mutants_product.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

GPU_BENCH = "tests/test_gpu_bench.py"
BLOCK_BENCH = "tests/test_block_bench.py"
HOST_SHARE = "tests/test_host_share.py"
REFERENCE_SAMPLERS = "tests/test_reference_samplers.py"
COMPARE = "tests/test_compare.py"
COUNTERS = "tests/test_counters.py"
EVENT_TRACES = "tests/test_event_traces.py"
EVENT_ROWS = "tests/test_event_rows.py"
WINO_CHECK = "tests/test_wino_check.py"
HOSTILE_FLAGS = "tests/test_hostile_flags.py"
RECORDS = "tests/test_records.py"
OWN_MODEL = "tests/test_own_model.py"
SPECULATIVE = "tests/test_speculative.py"
CLI = "tests/test_cli.py"
CHECK = "tests/test_check.py"
HOSTILE_INPUTS = "tests/test_hostile_inputs.py"
HOSTILE_CHECK = "tests/test_hostile_check.py"
STOCHASTIC = "tests/test_stochastic.py"
EXACT_LAW_FIT = "tests/test_exact_law_fit.py"
BLOCK_DIFFUSION_CHECK = "tests/test_block_diffusion_check.py"
BLOCK_DIFFUSION = "tests/test_block_diffusion.py"
DEVICE_READINESS = "tests/test_device_readiness.py"
EXPERIMENTS = "tests/test_experiments.py"
THEOREMS = "tests/test_theorems.py"
LAWS = "tests/test_laws.py"
FASTDLLM = "tests/test_fastdllm.py"
UNITS = "tests/test_units.py"

# Tests written for this catalogue's survivors (the module's own tests, by hand)
THROUGHPUT_DEFINITION = "tests/test_throughput.py"
TRACE_RECORDS = "tests/test_trace_records.py"
ATOMIC_FILES = "tests/test_files.py"
NUMERICS = "tests/test_numerics.py"
CANDIDATE_CALLS = "tests/test_candidate_calls.py"
CASE_VALIDATION = "tests/test_case_validation.py"
DREAM_HOOKS = "tests/test_dream_hooks.py"
ARGUMENT_TYPES = "tests/test_argument_types.py"
WORKLOADS = "tests/test_workloads.py"
VERIFY_CHECKS = "tests/test_verify_checks.py"

MUTANTS: list[Mutant] = [
    # --- veridec/throughput.py: tokens to the first EOS per second -------------------------------------------
    Mutant(
        "pr-throughput-drops-the-eos",
        "veridec/throughput.py",
        "        kept = columns[None] <= first[:, None]  # [B, G] up to and including it\n",
        "        kept = columns[None] < first[:, None]  # [B, G] up to and including it\n",
        "the first EOS itself is not counted: every row that ends reports one token fewer, and a lower speed",
        "spec/notation.md N8", (THROUGHPUT_DEFINITION, GPU_BENCH, BLOCK_BENCH, HOST_SHARE),
    ),
    Mutant(
        "pr-throughput-mask-id-not-forwarded",
        "veridec/throughput.py",
        "    return Throughput(generated_tokens(canvas, prompt_length, eos_id, mask_id), seconds, model_calls,\n",
        "    return Throughput(generated_tokens(canvas, prompt_length, eos_id), seconds, model_calls,\n",
        "throughput() drops mask_id: positions left masked count as generated tokens, inflating the reported speed",
        "spec/notation.md N8", (THROUGHPUT_DEFINITION, GPU_BENCH, BLOCK_BENCH, HOST_SHARE),
    ),
    Mutant(
        "pr-throughput-batch-is-canvas-width",
        "veridec/throughput.py",
        "                      str(dtype).removeprefix(\"torch.\"), canvas.shape[0])\n",
        "                      str(dtype).removeprefix(\"torch.\"), canvas.shape[1])\n",
        "the reported batch size is the canvas length, so a speed is stated with the wrong batch it depends on",
        "spec/notation.md N8", (THROUGHPUT_DEFINITION, GPU_BENCH, BLOCK_BENCH, HOST_SHARE),
    ),
    # --- veridec/trace.py: counters, step records, commit order ------------------------------------------------
    Mutant(
        "pr-trace-query-positions-one-row",
        "veridec/trace.py",
        "        self.query_positions += rows * queries\n",
        "        self.query_positions += queries\n",
        "query positions count one row per forward instead of B x Q, so a batched decoder under-reports its cost",
        "spec/notation.md N8", (TRACE_RECORDS, COUNTERS, REFERENCE_SAMPLERS),
    ),
    Mutant(
        "pr-trace-cached-call-counted-as-full-forward",
        "veridec/trace.py",
        "        self.full_forwards += int(full)\n",
        "        self.full_forwards += 1\n",
        'every model call, cached or packed, counts as a full forward: full_forwards equals '
        'model_calls and cache savings vanish',
        "spec/notation.md N8", (TRACE_RECORDS, COUNTERS, REFERENCE_SAMPLERS),
    ),
    Mutant(
        "pr-trace-gap-from-strongest-commit",
        "veridec/trace.py",
        "        weakest = min(confidences[-1]) if mine else float(\"inf\")\n",
        "        weakest = max(confidences[-1]) if mine else float(\"inf\")\n",
        'the selection gap uses the strongest committed confidence, overstating how far a position '
        'choice was from a tie',
        "spec/sequential.md SQ0.1", (TRACE_RECORDS, REFERENCE_SAMPLERS, COMPARE),
    ),
    Mutant(
        "pr-trace-window-positions-without-offset",
        "veridec/trace.py",
        "        positions.append([cols[i] + offset for i in mine])\n",
        "        positions.append([cols[i] for i in mine])\n",
        "a cached decoder's commits are recorded at window positions, not canvas positions: its "
        'commit order is shifted',
        "spec/sequential.md SQ0.1", (TRACE_RECORDS, REFERENCE_SAMPLERS, COMPARE),
    ),
    Mutant(
        "pr-trace-tokens-per-step-ignores-batch",
        "veridec/trace.py",
        "        return self.tokens_committed() / max(1, len(self.steps) * self.batch_size)\n",
        "        return self.tokens_committed() / max(1, len(self.steps))\n",
        "tokens per step sums over the batch instead of the mean per row: a batch of B reports B times the parallelism",
        "spec/sequential.md SQ0.1", (TRACE_RECORDS, REFERENCE_SAMPLERS, COUNTERS),
    ),
    Mutant(
        "pr-trace-commit-order-reads-row-0",
        "veridec/trace.py",
        "        return [step.committed(row) for step in self.steps if step.positions[row]]\n",
        "        return [step.committed(row) for step in self.steps if step.positions[0]]\n",
        "a row's commit order skips steps by row 0's commits: another row's steps are kept or dropped by the wrong row",
        "spec/sequential.md SQ0.5", (TRACE_RECORDS, COMPARE, REFERENCE_SAMPLERS),
    ),
    # --- veridec/events.py: revocable commits -------------------------------------------------------------------
    Mutant(
        "pr-events-edits-counted-as-revocations",
        "veridec/events.py",
        '    return Counters(**{**counters.__dict__, "revocations": kinds.count("revoke"), "edits": '
        'kinds.count("edit")})\n',
        '    return Counters(**{**counters.__dict__, "revocations": kinds.count("revoke"), "edits": '
        'kinds.count("revoke")})\n',
        "the edits counter counts revocations (copy-paste): an editing decoder's edit count is wrong in every trace",
        "spec/wino.md WN5", (TRACE_RECORDS, EVENT_TRACES, EVENT_ROWS),
    ),
    Mutant(
        "pr-events-divergence-zip-truncates",
        "veridec/events.py",
        "    for step, (a, b) in enumerate(zip_longest(steps_of(ours, row), steps_of(theirs, row))):\n",
        "    for step, (a, b) in enumerate(zip(steps_of(ours, row), steps_of(theirs, row))):\n",
        'zip stops at the shorter trace: a decode with extra steps (late revocations) after a common '
        'prefix is called equal',
        "spec/wino.md WN5", (TRACE_RECORDS, EVENT_TRACES, WINO_CHECK),
    ),
    Mutant(
        "pr-events-visible-keeps-mask-commits",
        "veridec/events.py",
        "        if e.row == row and e.old != e.new and e.step < forwards:\n",
        "        if e.row == row and e.step < forwards:\n",
        "a commit of the mask token itself (which changes nothing) is listed as a visible change a recording must show",
        "spec/wino.md WN10", (TRACE_RECORDS, EVENT_TRACES, WINO_CHECK),
    ),
    # --- veridec/files.py: atomic writes ------------------------------------------------------------------------
    Mutant(
        "pr-files-replaces-a-device",
        "veridec/files.py",
        "    if path.exists() and not path.is_file():\n",
        "    if path.is_dir():\n",
        "only a folder is refused: a device or pipe at the report's path is silently replaced by the rename",
        "spec/exactness.md E4", (ATOMIC_FILES, HOSTILE_FLAGS, RECORDS),
    ),
    # --- veridec/numerics.py: measured tolerances ---------------------------------------------------------------
    Mutant(
        "pr-numerics-signed-max-error",
        "veridec/numerics.py",
        "    return (a.double() - b.double()).abs().max().item()\n",
        "    return (a.double() - b.double()).max().item()\n",
        "max_abs takes the signed maximum: an error where the actual is below the expected is never seen",
        "spec/exactness.md E3", (NUMERICS, OWN_MODEL, SPECULATIVE, CLI),
    ),
    Mutant(
        "pr-numerics-ulp-of-bfloat16",
        "veridec/numerics.py",
        "    return torch.finfo(torch.float32).eps * reference.abs().max().item()\n",
        "    return torch.finfo(torch.bfloat16).eps * reference.abs().max().item()\n",
        "the one-ulp term uses bfloat16's epsilon (65536x float32's): every measured tolerance is "
        'wide enough to pass real errors',
        "spec/exactness.md E3", (NUMERICS, OWN_MODEL, SPECULATIVE, CLI),
    ),
    # --- testing/candidates.py: loading and calling a foreign decoder -------------------------------------------
    Mutant(
        "pr-candidates-prompt-not-cloned",
        "testing/candidates.py",
        "    given = prompt.clone(), None if attention_mask is None else attention_mask.clone()\n",
        "    given = prompt, None if attention_mask is None else attention_mask.clone()\n",
        "the prompt is kept by reference, not copied: a candidate that writes into its prompt in place is never caught",
        "spec/exactness.md EC2", (CANDIDATE_CALLS, CHECK, HOSTILE_INPUTS),
    ),
    Mutant(
        "pr-candidates-reported-nfe-dropped",
        "testing/candidates.py",
        "        return _tokens(tokens), int(nfe)\n",
        "        return _tokens(tokens), None\n",
        "a (tokens, nfe) pair loses its nfe: a candidate that reports a wrong number of function evaluations passes",
        "spec/exactness.md EC1", (CANDIDATE_CALLS, CHECK, HOSTILE_INPUTS),
    ),
    Mutant(
        "pr-candidates-vocab-size-id-accepted",
        "testing/candidates.py",
        "    outside = (tokens < 0) | (tokens >= vocab_size)\n",
        "    outside = (tokens < 0) | (tokens > vocab_size)\n",
        "token id V (one past the vocabulary) is accepted from a candidate instead of failing the case",
        "spec/exactness.md EC2", (CANDIDATE_CALLS, CHECK, HOSTILE_INPUTS),
    ),
    Mutant(
        "pr-candidates-boolean-tokens-accepted",
        "testing/candidates.py",
        "    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:\n",
        "    if tokens.dtype.is_floating_point or tokens.dtype.is_complex:\n",
        "a candidate returning a boolean tensor passes as integer token ids (0 and 1)",
        "spec/exactness.md EC2", (CANDIDATE_CALLS, CHECK, HOSTILE_INPUTS),
    ),
    # --- testing/validation.py: replayed cases and tier A baselines ---------------------------------------------
    Mutant(
        "pr-validation-seed-limit-inclusive",
        "testing/validation.py",
        "    if not _integer(case[\"seed\"]) or not 0 <= case[\"seed\"] < SEED_LIMIT:\n",
        "    if not _integer(case[\"seed\"]) or not 0 <= case[\"seed\"] <= SEED_LIMIT:\n",
        "a replayed case with seed 2**63 passes validation and fails later inside torch.manual_seed",
        "spec/exactness.md EC2", (CASE_VALIDATION, HOSTILE_FLAGS, CHECK),
    ),
    Mutant(
        "pr-validation-max-batch-counts-columns",
        "testing/validation.py",
        "    if max_batch is not None and len(case[\"prompt\"]) > max_batch:\n",
        "    if max_batch is not None and len(case[\"prompt\"][0]) > max_batch:\n",
        "max_batch is held against the prompt's length, not its rows: a case with more rows than the "
        'candidate takes is accepted',
        "spec/exactness.md EC2", (CASE_VALIDATION, HOSTILE_FLAGS, CHECK),
    ),
    Mutant(
        "pr-validation-zero-steps-accepted",
        "testing/validation.py",
        "        if not _integer(settings[name]) or not 1 <= settings[name] <= top:\n",
        "        if not _integer(settings[name]) or not 0 <= settings[name] <= top:\n",
        "steps = 0 (or denoising_steps = 0) in a replayed case passes validation instead of being refused up front",
        "spec/exactness.md EC2", (CASE_VALIDATION, HOSTILE_FLAGS, CHECK),
    ),
    Mutant(
        "pr-validation-at-confidence-rank-zero",
        "testing/validation.py",
        "        if set(threshold) != {\"at_confidence\"} or not _integer(rank) or rank < 1:\n",
        "        if set(threshold) != {\"at_confidence\"} or not _integer(rank) or rank < 0:\n",
        "an at_confidence rank of 0 is accepted, though rank 0 commits anyway and the spec requires r >= 1",
        "spec/exactness.md EC2", (CASE_VALIDATION, HOSTILE_FLAGS, CHECK),
    ),
    Mutant(
        "pr-validation-negative-baseline-measure",
        "testing/validation.py",
        "    if not 0 <= value <= high:\n",
        "    if not value <= high:\n",
        'a tier A baseline with a negative count or rate is accepted, so its comparisons pass or '
        'fail on a nonsense bound',
        "spec/exactness.md EC2", (CASE_VALIDATION, HOSTILE_FLAGS, CHECK),
    ),
    # --- testing/hooks.py: Dream's hooks as data ---------------------------------------------------------------
    Mutant(
        "pr-hooks-log-drops-the-step",
        "testing/hooks.py",
        "        self.log.append((self.name, step, logits is None))\n",
        "        self.log.append((self.name, logits is None))\n",
        "the hook log records no step: a candidate that calls the hooks at other steps has the same log and passes",
        "spec/exactness.md EC5", (DREAM_HOOKS, CHECK,),
    ),
    Mutant(
        "pr-hooks-tokens-hook-writes-row-0",
        "testing/hooks.py",
        "            x[:, d[\"position\"]] = d[\"token\"]\n",
        "            x[0, d[\"position\"]] = d[\"token\"]\n",
        'the tokens hook writes its token into row 0 only, not every row: hooks on batched cases '
        'test less than described',
        "spec/exactness.md EC5", (DREAM_HOOKS, CHECK,),
    ),
    # --- testing/tiers.py: the tier table ----------------------------------------------------------------------
    Mutant(
        "pr-tiers-a-measures-no-logits",
        "testing/tiers.py",
        "              runs_every_case=True, measures_logits=True, uses_baseline=True, reports_metrics=True),\n",
        "              runs_every_case=True, measures_logits=False, uses_baseline=True, reports_metrics=True),\n",
        "tier A no longer measures the cached calls' logit error: max_logit_error is None and a "
        'stale cache passes its baseline',
        "spec/exactness.md EC3", (CHECK, STOCHASTIC),
    ),
    # --- testing/sdar_cases.py: block-diffusion case draws ----------------------------------------------------
    Mutant(
        "pr-sdar-cases-stop-id-never-drawn",
        'testing/families/sdar.py',
        "    if \"stopping_criteria_idx\" in names and eos_id is not None:\n",
        "    if \"stopping_criteria_idx\" in names and eos_id is None:\n",
        "stop ids at the model's EOS are never drawn for a model with an EOS: a candidate ignoring "
        'its stop criterion passes',
        "spec/block_diffusion.md BD9", (BLOCK_DIFFUSION_CHECK,),
    ),
    # --- testing/models.py: the check models -------------------------------------------------------------------
    Mutant(
        "pr-check-models-half-the-tied-pairs",
        "testing/models.py",
        "        for first in range(0, 2 * TIED_PAIRS, 2):\n",
        "        for first in range(0, TIED_PAIRS, 2):\n",
        'only tokens 0..31 are tied in pairs: argmaxes over tokens 32..63 are never exact ties, so '
        "SQ0.4's lowest id is exercised less",
        "spec/exactness.md EC4", (CHECK, EXACT_LAW_FIT),
    ),
    Mutant(
        "pr-check-models-scale-the-embedding",
        "testing/models.py",
        "    head = model.embed.weight if model.lm_head is None else model.lm_head.weight  # [V, hidden]\n",
        "    head = model.embed.weight  # [V, hidden]\n",
        "an untied model's embedding is scaled and tied instead of its LM head: its logits have "
        'neither the spread nor the ties',
        "spec/exactness.md EC4", (CHECK, EXACT_LAW_FIT),
    ),
    # --- harness/arguments.py: command-line refusals -----------------------------------------------------------
    Mutant(
        "pr-arguments-seed-limit-inclusive",
        "harness/arguments.py",
        "seed = integer(0, SEED_LIMIT - 1)\n",
        "seed = integer(0, SEED_LIMIT)\n",
        "--seed 2**63 is accepted and the run fails later in torch.manual_seed instead of exiting 2 up front",
        "spec/exactness.md E4", (ARGUMENT_TYPES, HOSTILE_FLAGS, CLI),
    ),
    Mutant(
        "pr-arguments-number-accepts-nan",
        "harness/arguments.py",
        "        if not math.isfinite(value) or value < low or (high is not None and value > high):\n",
        "        if value < low or (high is not None and value > high):\n",
        'a numeric flag accepts nan (every comparison with nan is false) and inf when unbounded, '
        'e.g. --case-timeout nan',
        "spec/exactness.md EC8", (ARGUMENT_TYPES, HOSTILE_FLAGS, CLI),
    ),
    Mutant(
        "pr-arguments-probability-inclusive",
        "harness/arguments.py",
        "    if not 0 < value < 1:\n",
        "    if not 0 <= value <= 1:\n",
        "--alpha 0 or --delta 1 is accepted: a tier S check with no false-alarm budget or a vacuous detectable TV",
        "spec/exactness.md EC2", (ARGUMENT_TYPES, HOSTILE_FLAGS, CLI),
    ),
    Mutant(
        "pr-arguments-cuda-index-off-by-one",
        "harness/arguments.py",
        '    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= '
        'torch.cuda.device_count()):\n',
        '    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) > '
        'torch.cuda.device_count()):\n',
        '--device cuda:N with N equal to the device count is accepted and fails at the first '
        'allocation, not as a usage error',
        "spec/exactness.md E4", (ARGUMENT_TYPES, HOSTILE_FLAGS, CLI, DEVICE_READINESS),
    ),
    # --- harness/workloads.py: prompts and table columns -------------------------------------------------------
    Mutant(
        "pr-workloads-single-prompts-row-0-padding",
        "harness/workloads.py",
        "    return [prompt[i:i + 1, int((mask[i] == 0).sum()):] for i in range(prompt.shape[0])]\n",
        "    return [prompt[i:i + 1, int((mask[0] == 0).sum()):] for i in range(prompt.shape[0])]\n",
        "each row is unpadded by row 0's padding: shorter rows keep pad tokens as prompt, longer rows lose real tokens",
        "spec/exactness.md E2", (WORKLOADS, CLI, EVENT_ROWS),
    ),
    Mutant(
        "pr-workloads-tokens-per-step-counts-idle-steps",
        "harness/workloads.py",
        "        steps = [len(s.positions[row]) for s in trace.steps if s.positions[row]]\n",
        "        steps = [len(s.positions[row]) for s in trace.steps]\n",
        "tokens_per_step divides by every step, not the steps in which the prompt committed: the column is understated",
        "spec/exactness.md E3", (WORKLOADS, CLI, EXPERIMENTS),
    ),
    Mutant(
        "pr-workloads-scores-the-cut-line",
        "harness/workloads.py",
        "    return (lines if ended else lines[:-1]), ended  # a line cut by gen_length is not scored\n",
        "    return lines, ended  # a line cut by gen_length is not scored\n",
        'a line cut off by gen_length is scored as a complete line, biasing validity (usually down) '
        'for runs without EOS',
        "spec/guidance.md G3b", (WORKLOADS, EXPERIMENTS, CLI),
    ),
    Mutant(
        "pr-workloads-hmm-nll-counts-the-mask",
        "harness/workloads.py",
        "    symbols = ((canvas < hmm.num_symbols) | (full_mask == 0)).all(dim=1)\n",
        "    symbols = ((canvas <= hmm.num_symbols) | (full_mask == 0)).all(dim=1)\n",
        'rows still holding the mask token (id S) are scored, clamped to symbol S-1, instead of '
        'skipped: hmm_nll_per_token is wrong',
        "spec/exactness.md E3", (WORKLOADS, CLI, EVENT_ROWS),
    ),
    # --- harness/checks/block_diffusion.py: verify's BD8 row ----------------------------------------------------
    Mutant(
        "pr-verify-bd-failures-overwritten",
        "harness/checks/block_diffusion.py",
        "            failed += [f\"{size}/{name}/row {row}\" for row in _rows_differing(model, prompts, settings)]\n",
        "            failed = [f\"{size}/{name}/row {row}\" for row in _rows_differing(model, prompts, settings)]\n",
        'each setting overwrites the failures of the ones before: a row that differs except in the '
        'last size/setting passes',
        "spec/block_diffusion.md BD8", (BLOCK_DIFFUSION, CLI),
    ),
    Mutant(
        "pr-verify-bd-one-seed-for-every-row",
        "harness/checks/block_diffusion.py",
        "    seeded = lambda row: torch.Generator().manual_seed(40 + row)  # noqa: E731\n",
        "    seeded = lambda row: torch.Generator().manual_seed(40)  # noqa: E731\n",
        "every row's generator has the same seed: a batched decoder that uses row 0's sample for "
        'every row still passes',
        "spec/block_diffusion.md BD8", (BLOCK_DIFFUSION, CLI),
    ),
    # --- harness/checks/bounds.py: verify's theorem rows -------------------------------------------------------
    Mutant(
        "pr-verify-bounds-seed-not-forwarded",
        "harness/checks/bounds.py",
        "    report = _report(20_000 if ctx.quick else 100_000, ctx.seed)\n",
        "    report = _report(20_000 if ctx.quick else 100_000, 0)\n",
        "verify --seed does not reach the theorem rows: every seed re-checks the same joints",
        "spec/theorems.md TK3", (VERIFY_CHECKS, CLI, THEOREMS),
    ),
    Mutant(
        "pr-verify-td1-best-row",
        "harness/checks/bounds.py",
        "    worst = max(r[\"mass_error\"] for r in rows)\n",
        "    worst = min(r[\"mass_error\"] for r in rows)\n",
        "TD1 holds only the best law's mass error to 1e-9: a decoder law whose mass is off 1 passes",
        "spec/theorems.md TD1", (VERIFY_CHECKS, CLI, LAWS),
    ),
    # --- harness/checks/models.py: verify's model rows ---------------------------------------------------------
    Mutant(
        "pr-verify-tolerance-from-the-candidate",
        "harness/checks/models.py",
        "    return _slack(max_abs(got, reference), tolerance(reference, higher))\n",
        "    return _slack(max_abs(got, reference), tolerance(got, higher))\n",
        "the tolerance is measured from the cached result's own error, so it grows with the error it should bound",
        "spec/models.md MC2", (VERIFY_CHECKS, CLI,),
    ),
    Mutant(
        "pr-verify-recompute-on-fresh-cache",
        "harness/checks/models.py",
        '            _, cache = model.prefill(x)\n            return model.raw_forward(y, '
        'positions).logits, model.forward_cached(y, positions, cache).logits\n',
        '            _, cache = model.prefill(y)\n            return model.raw_forward(y, '
        'positions).logits, model.forward_cached(y, positions, cache).logits\n',
        "MC3's check fills the cache from the new canvas, not a stale one: a cache that reads stale entries passes",
        "spec/models.md MC3", (VERIFY_CHECKS, CLI,),
    ),
    # --- harness/checks/reference.py: verify's reference rows --------------------------------------------------
    Mutant(
        "pr-verify-brute-force-ties-highest",
        "harness/checks/reference.py",
        "            best = max(candidates, key=lambda i: (probs[i].max().item(), -i))\n",
        "            best = max(candidates, key=lambda i: (probs[i].max().item(), i))\n",
        'the brute-force greedy loop breaks confidence ties to the highest position, so the oracle '
        'disagrees with SQ0.4 on ties',
        "spec/sequential.md SQ1.4", (VERIFY_CHECKS, CLI, REFERENCE_SAMPLERS),
    ),
    Mutant(
        "pr-verify-fastdllm-extra-forwards-pass",
        "harness/checks/reference.py",
        "        ok &= torch.equal(fast.canvas, slow.canvas) and fast.trace.counters.full_forwards == 16\n",
        "        ok &= torch.equal(fast.canvas, slow.canvas) and fast.trace.counters.full_forwards >= 16\n",
        "Fast-dLLM with an unreachable threshold may make extra forwards and still pass as one token per step",
        "spec/fastdllm.md FD3", (VERIFY_CHECKS, CLI, FASTDLLM),
    ),
    # --- harness/checks/registry.py: the verify registry -------------------------------------------------------
    Mutant(
        "pr-verify-generator-ignores-seed",
        "harness/checks/registry.py",
        "        return torch.Generator().manual_seed(self.seed * 1_000_003 + salt)\n",
        "        return torch.Generator().manual_seed(salt)\n",
        "verify --seed does not reach the checks' generators: every seed draws the same cases",
        "spec/exactness.md E4", (VERIFY_CHECKS, CLI, UNITS),
    ),
    Mutant(
        "pr-verify-block-diffusion-not-registered",
        "harness/checks/registry.py",
        'CHECK_MODULES = ("veridec.harness.checks.models", "veridec.harness.checks.reference", '
        '"veridec.harness.checks.bounds",\n                 "veridec.harness.checks.block_diffusion")\n',
        'CHECK_MODULES = ("veridec.harness.checks.models", "veridec.harness.checks.reference", '
        '"veridec.harness.checks.bounds")\n',
        "the block-diffusion module is not imported, so its BD8 check never runs and verify passes without it",
        "spec/block_diffusion.md BD8", (VERIFY_CHECKS, CLI, BLOCK_DIFFUSION),
    ),
]
