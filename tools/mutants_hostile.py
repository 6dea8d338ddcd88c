"""A mutation catalogue for the checker's defences against a hostile or careless candidate, and for the records
and inputs that a verdict or a table rests on (spec/exactness.md EC8, E2 "Compiled rows", EC2; spec/models.md
ML2; spec/block_diffusion.md BD8).

It covers the supervisor of ``veridec check`` (``harness.supervise``: the grace period, the deadline the child's
``arm`` sets, ``_drain`` and the exit-code pass-through of ``_ended``; ``harness.child``: the lifeline that ends an
orphaned child, ``saved_streams``), the in-process guard (``testing.guard``: ``watched``,
``guarded``, ``import_seconds``, ``exits_refused``), the compiled rows of the exactness table
(``harness.compiled_rows``: ``compiled_sides``, ``recorded_logit_difference``, ``BACKENDS``' tiers), the records
that hold each line to the run's settings, key and result types (``harness.records``: ``_parse``, ``_problem``;
``harness.exactness``: ``row_problem``, ``_typed``, ``not_exact``), the validation of ``--case`` and
``--baseline`` (``testing.validation``: ``_check_steps``, ``checked_case``, ``checked_baseline``), the check
command's flags (``harness.check_command``: ``_check_tier_flags``), the
checkpoint loader's guards (``veridec.models.checkpoint``: ``_check_inside``, ``_agree_with_tokenizer``,
``_check_one_dtype``) and the block-diffusion verify check (``harness.checks.block_diffusion``). Each mutant is a
one- or two-line mistake placed where a wrong line would most likely let a wrong verdict or a silent failure
pass (a stalled candidate never stopped, a PASS from a child that gave no verdict, an orphaned check, a forged or
foreign record taken into a table, a compiled row held to itself, a check whose oracle is the code it checks).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_own_model.py beyond its format) was read.

    python -m tools.mutation --catalogue tools/mutants_hostile.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

EC8 = "spec/exactness.md EC8"
EC2 = "spec/exactness.md EC2"
E2 = "spec/exactness.md E2 (Compiled rows)"
REC = "spec/exactness.md E2 (records)"
ML2 = "spec/models.md ML2"
BD8 = "spec/block_diffusion.md BD8"
HOSTILE = ("tests/test_supervisor_units.py", "tests/test_hostile_check.py")
RECORDS = ("tests/test_hostile_records.py", "tests/test_records.py", "tests/test_supervisor_units.py")
FLAGS = ("tests/test_supervisor_units.py", "tests/test_hostile_flags.py", "tests/test_hostile_check.py")
INPUTS = ("tests/test_hostile_inputs.py", "tests/test_checkpoint.py", "tests/test_hostile_flags.py")
COMPILED = ("tests/test_compiled.py", "tests/test_units.py")
BLOCK = ("tests/test_block_diffusion.py",)

MUTANTS: list[Mutant] = [
    # --- harness/supervise.py and harness/child.py: the supervisor of `veridec check` and its child ----------
    Mutant(
        "supervise-grace-without-floor",
        "harness/supervise.py",
        "    return max(3.0, 0.25 * limit)\n",
        "    return 0.25 * limit\n",
        "the grace period loses its 3 s floor: a short limit's case is killed by the supervisor a fraction of a "
        "second past the limit, before the in-process timeout could fail the case with its own message",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-deadline-without-limit",
        "harness/supervise.py",
        "                self.deadline = time.monotonic() + self.limit + grace_seconds(self.limit)\n",
        "                self.deadline = time.monotonic() + grace_seconds(self.limit)\n",
        "the deadline is the grace period alone, not the limit plus it: a candidate (or an import under its 120 s "
        "limit) that runs long but within its limit is killed at a quarter of it",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-ended-code-after-candidate-passed-through",
        "harness/supervise.py",
        "    if code >= 0 and armed.deadline is None and armed.limit is None:\n",
        "    if code >= 0 and armed.deadline is None:\n",
        "a child that exits 0 without telling its verdict after the candidate's code ran (it ended the process "
        "from an atexit or its own exit path) passes its own code through: exit 0, a PASS without a verdict",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-no-drain-before-ended",
        "harness/supervise.py",
        "            _drain(read, armed)\n            return _ended(child, armed)\n",
        "            return _ended(child, armed)\n",
        "the exit message the child wrote just before ending is not read: a verdict that raced the child's end "
        "becomes 'ended without a verdict' (exit 1), and a stale 'arm' decides the code",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-lifeline-end-refused",
        "harness/child.py",
        "    REAL_EXIT(1)\n",
        "    os._exit(1)\n",
        "the lifeline thread ends the child with os._exit, which the check keeps refused while the candidate runs: "
        "it raises in the thread instead, so a child whose supervisor was killed runs on as an orphan",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-child-holds-own-lifeline",
        "harness/supervise.py",
        "pass_fds=(write, lifeline),\n",
        "pass_fds=(write, lifeline, held),\n",
        "the child inherits the lifeline's other end too, so the pipe never ends when the supervisor is killed: "
        "the check is left running as an orphan",
        EC8, HOSTILE,
    ),
    Mutant(
        "supervise-closed-stream-not-reopened",
        "harness/child.py",
        "    if stream is not None and not stream.closed:\n",
        "    if stream is not None:\n",
        "a sys.stdout the candidate closed is kept: printing the verdict raises 'I/O operation on closed file' "
        "and the check ends in a traceback without a report",
        EC8, HOSTILE,
    ),
    # --- testing/guard.py ----------------------------------------------------------------------------------
    Mutant(
        "guard-watched-code-dropped",
        "testing/guard.py",
        "        watcher(seconds, what, code)\n",
        "        watcher(seconds, what, 1)\n",
        "the supervisor is told exit code 1 whatever the guarded code is: an import or model factory that never "
        "ends is a FAIL (exit 1) instead of 'the candidate cannot be loaded' (exit 2)",
        EC8, HOSTILE,
    ),
    Mutant(
        "guard-watched-disarm-not-on-raise",
        "testing/guard.py",
        "    try:\n        yield\n    finally:\n        for watcher in WATCHERS:\n",
        "    yield\n    if True:\n        for watcher in WATCHERS:\n",
        "the supervisor is told the candidate's code ended only when it returns, not when it raises (its timeout, "
        "os._exit, its own error): the supervisor stays armed and kills a check that was going on",
        EC8, HOSTILE,
    ),
    Mutant(
        "guard-guarded-not-watched",
        "testing/guard.py",
        "    with watched(seconds, what, code), _limited(seconds):\n",
        "    with _limited(seconds):\n",
        "a guarded call never arms the supervisor: a candidate that swallows the timeout or stalls in native code "
        "is never stopped, and the check never ends",
        EC8, HOSTILE,
    ),
    Mutant(
        "guard-import-timeout-zero-accepted",
        "testing/guard.py",
        "    if not 0 < value <= MAX_CASE_TIMEOUT:\n",
        "    if not 0 <= value <= MAX_CASE_TIMEOUT:\n",
        "VERIDEC_IMPORT_TIMEOUT=0 is accepted: setitimer(0) arms no timer, so the import and factory run with no "
        "limit at all instead of being refused",
        EC8, HOSTILE,
    ),
    Mutant(
        "guard-posix-exit-not-refused",
        "testing/guard.py",
        'EXIT_MODULES = ("os", "posix", "nt")',
        'EXIT_MODULES = ("os", "nt")',
        "only os._exit is replaced: a candidate calling posix._exit (the same function) ends the check's process",
        EC8, HOSTILE,
    ),
    # --- harness/compiled_rows.py ----------------------------------------------------------------------------
    Mutant(
        "compiled-aot-eager-tier-a",
        "harness/compiled_rows.py",
        'BACKENDS = {"aot_eager": "E", "inductor": "A"}',
        'BACKENDS = {"aot_eager": "A", "inductor": "A"}',
        "aot_eager's rows are held to tier A: a compiled decode whose logits or commits differ from eager's never "
        "fails the table's exit code",
        E2, COMPILED,
    ),
    Mutant(
        "compiled-eager-side-compiled",
        "harness/compiled_rows.py",
        "        eager, _ = inputs.decode(base, rule)\n",
        "        eager, _ = inputs.decode(base, rule, compile=inputs.compile)\n",
        "the 'eager' decode is compiled too: the compiled rows compare the compiled decode with itself and are "
        "always exact",
        E2, COMPILED,
    ),
    Mutant(
        "compiled-logit-difference-signed",
        "harness/compiled_rows.py",
        "                worst = max(worst, (a - b).abs().max().item())\n",
        "                worst = max(worst, (a - b).max().item())\n",
        "the logit difference is signed: compiled logits above eager's (a - b < 0 everywhere) are reported as 0, "
        "an exact row",
        E2, COMPILED,
    ),
    # --- harness/records.py, harness/exactness.py ---------------------------------------------------------------
    Mutant(
        "records-settings-hash-only",
        "harness/records.py",
        "        if recorded_hash != self.hash or settings_hash(record.get(\"settings\")) != self.hash:\n",
        "        if recorded_hash != self.hash:\n",
        "a line is held to the run's settings hash only, not to its settings: a line of other settings that "
        "carries this run's hash (and its own digest) is taken into the table",
        REC, RECORDS,
    ),
    Mutant(
        "records-types-checked-only-with-check-result",
        "harness/records.py",
        "        if not isinstance(key, str):\n            return f\"its key is",
        "        if self.check_result is None:\n            return None\n        if not isinstance(key, str):\n"
        "            return f\"its key is",
        "without a check_result, a record's key and result are not type-checked: a list key crashes the run "
        "(unhashable) and a non-object result reaches the table",
        REC, RECORDS,
    ),
    Mutant(
        "exactness-typed-infinity-accepted",
        "harness/exactness.py",
        '    return numeric and (isinstance(value, int) if kind == "int" else math.isfinite(value))\n',
        '    return numeric and (isinstance(value, int) if kind == "int" else value == value)\n',
        "only NaN is refused as a float: a record with max_logit_error -Infinity (within every tolerance) is "
        "taken, and a speculative row reads as exact",
        REC, RECORDS,
    ),
    Mutant(
        "exactness-not-exact-logits-only",
        "harness/exactness.py",
        '    return [f"{r.model}/{r.decoder}/{r.variant}" for r in rows if r.tier == "E" and not r.exact]\n',
        '    return [f"{r.model}/{r.decoder}/{r.variant}" for r in rows if r.tier == "E" and r.max_logit_error != 0]\n',
        "a tier E row fails only on its logits: a row whose commit order or tokens differ with equal recorded "
        "logits passes the exit code and verify",
        E2, RECORDS + COMPILED,
    ),
    # --- testing/validation.py ---------------------------------------------------------------------------------
    Mutant(
        "validation-steps-no-lower-bound",
        "testing/validation.py",
        "        if not _integer(settings[name]) or not 1 <= settings[name] <= top:\n",
        "        if not _integer(settings[name]) or not settings[name] <= top:\n",
        "a case with steps 0 or negative is accepted: the decode divides by zero or builds an empty schedule "
        "instead of a one-line refusal",
        EC2, FLAGS,
    ),
    Mutant(
        "validation-baseline-any-key-compares",
        "testing/validation.py",
        "    if all(baseline.get(name) is None for name in (*LOWER_IS_WORSE, *HIGHER_IS_WORSE)):\n",
        "    if not baseline:\n",
        "a baseline that holds no measure a run is held to (only 'cases', or every measure null) is accepted: it "
        "passes any candidate",
        EC2, HOSTILE,
    ),
    # --- harness/check_command.py -----------------------------------------------------------------------------
    Mutant(
        "check-command-baseline-ignored-on-tier-e",
        "harness/check_command.py",
        "    if args.baseline is not None and not tier.uses_baseline:\n",
        "    if args.baseline is not None and tier.sampled:\n",
        "--baseline with --tier E is silently ignored instead of a usage error",
        EC2, HOSTILE,
    ),
    # --- veridec/models/checkpoint.py -------------------------------------------------------------------------
    Mutant(
        "checkpoint-shard-relative-path-allowed",
        "veridec/models/checkpoint.py",
        "    if Path(name).name != name or name in (\".\", \"..\"):\n",
        "    if Path(name).is_absolute() or name in (\".\", \"..\"):\n",
        "an index may name '../other/model.safetensors': weights outside the model folder are loaded",
        ML2, INPUTS,
    ),
    Mutant(
        "checkpoint-pad-not-held-to-tokenizer",
        "veridec/models/checkpoint.py",
        "    _agree_with_tokenizer(tokenizer, folder, ((\"eos_token_id\", eos_id, \"EOS\", \"eos_token\"),\n"
        "                                              (\"pad_token_id\", pad_id, \"pad\", \"pad_token\")))\n",
        "    _agree_with_tokenizer(tokenizer, folder, ((\"eos_token_id\", eos_id, \"EOS\", \"eos_token\"),))\n",
        "a config pad id that differs from the tokenizer's pad token is never warned about",
        ML2, INPUTS,
    ),
    Mutant(
        "checkpoint-one-dtype-only-floating",
        "veridec/models/checkpoint.py",
        "    if len(counts) == 1:\n",
        "    if len({kind.is_floating_point for kind in counts}) == 1:\n",
        "a checkpoint mixing float16 and float32 tensors loads as stored: the model runs at two dtypes",
        ML2, INPUTS,
    ),
    # --- harness/checks/block_diffusion.py -------------------------------------------------------------------
    Mutant(
        "bd-check-oracle-is-cached",
        "harness/checks/block_diffusion.py",
        "        alone = reference_generate(model, torch.tensor([prompt], device=\"cpu\"), mask_id, **settings,\n",
        "        alone = cached_generate(model, torch.tensor([prompt], device=\"cpu\"), mask_id, **settings,\n",
        "each row alone is decoded by the cached decoder, not the reference: a cache bug shared by single and "
        "batched decodes passes the verify check",
        BD8, BLOCK,
    ),
]
