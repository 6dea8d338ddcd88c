"""A mutation catalogue for a candidate on the user's own model (spec/exactness.md EC9; spec/notation.md N8 for
the recording's counters).

It covers ``testing.own_model`` (the factory call of ``own_model``, the preflight canvases, ``preflight``'s
comparison and its measured bound, ``_max_difference``), the recording at the module's top-level forward
(``veridec.recording.ModuleRecording``: the canvas of a call, cached calls, the hook's removal), the candidate's
run in ``testing.running`` (``run_candidate``'s call limit and drift, ``run_own``'s served model), the preflight
difference becoming the numeric error in ``testing.check.check_decoder``, the report's lines that name and rebuild
the model (``testing.report``: the reproducer and ``reproducer_command``), the CLI's ``--candidate-model``
(``harness.check_command``), and the check models' mask patch (``veridec.models.tiny.never_predicts_mask``), whose
copy one precision up is what the preflight's bound is measured against. It also covers the weights' digest
(``check_same_weights``, ``_digest`` and the preflight's call of it), the ``"hf"`` model (``load_hf_model``'s auto
class and ``trust_remote_code``, the reproducer's and the rerun command's ``"hf"`` labels), ``drift_by_call`` in
``testing.exact``, and vLLM's token-agreement rule (spec/exactness.md EC10): ``testing.agreement`` (the
parameters' validation, ranks and gap in ``_judge``, the first divergence in the target's commit order,
``_step_of``, the canvas re-masked from a side's commit step, each side's own canvas), its metrics and its place
in ``run_case`` (``testing.exact``, ``agreement_rate`` gated lower-is-worse), ``testing.check``'s rule and the
failure it makes, and the CLI's ``--agreement-max-gap``. Each mutant is a one- or two-line mistake placed where
a wrong line would most likely let a wrong verdict pass silently (a model of other weights let through, a
drifting cache reported as exact, a reproducer that reruns on veridec's model, a disagreement left unfailed).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_revocable.py beyond its docstring) was read.

    python -m tools.mutation --catalogue tools/mutants_own_model.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

EC9 = "spec/exactness.md EC9"
EC10 = "spec/exactness.md EC10"
N8 = "spec/notation.md N8"
OWN = ("tests/test_own_model.py",)
SHARED = ("tests/test_own_model.py", "tests/test_check.py")
AGREE = ("tests/test_agreement.py",)
HFM = ("tests/test_hf_model.py",)
CLI = ("tests/test_agreement.py", "tests/test_hf_model.py")

MUTANTS: list[Mutant] = [
    # --- testing/own_model.py: the factory and the preflight -------------------------------------------------
    Mutant(
        "ownmodel-factory-source-inverted",
        "testing/own_model.py",
        "            candidate_model = factory(model_source) if takes and model_source is not None else factory()\n",
        "            candidate_model = factory(model_source) if takes and model_source is None else factory()\n",
        "a factory with a required argument is called without --model's name (TypeError, refused) when a model "
        "name is given, and with None when the model is an object: FILE.py:FACTORY(source) no longer loads",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-canvases-first-only",
        "testing/own_model.py",
        "    return torch.stack([tokens, torch.full_like(tokens, mask_id)]).to(model.device)  # [2, L]\n",
        "    return tokens[None].to(model.device)  # [1, L]\n",
        "the preflight checks only the half-masked canvas, never the all-mask one: a user's model that differs "
        "from veridec's only when every position is masked (a wrong mask embedding path) passes the preflight",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-against-itself",
        "testing/own_model.py",
        "        output = candidate_model(x)\n",
        "        output = adapt(model, convention)(input_ids=x)\n",
        "the preflight compares veridec's model with itself (difference 0): a user's model of other weights or "
        "scaled logits (load_scaled) is never refused and the candidate is checked on a different function",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-bound-from-user-model",
        "testing/own_model.py",
        "    bound = max(tolerance(ours[finite], exact[finite]), lower_rounding(",
        "    bound = max(tolerance(theirs[finite], exact[finite]), lower_rounding(",
        "the measured rounding is taken from the user's model against the higher-precision copy, so it grows with "
        "the mismatch itself: scaled logits or other weights set their own bound and pass the preflight",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-higher-copy-as-theirs",
        "testing/own_model.py",
        "    difference = _max_difference(ours, theirs.to(ours.device))\n",
        "    difference = _max_difference(ours, exact.to(ours.device))\n",
        "the preflight difference is veridec's model against its own higher-precision copy, not the user's model: "
        "a model of other weights or scaled logits passes, and the reported difference is veridec's rounding",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-one-sided-inf-ignored",
        "testing/own_model.py",
        "    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):\n"
        "        return math.inf\n"
        "    finite = torch.isfinite(a)\n",
        "    finite = torch.isfinite(a) & torch.isfinite(b)\n",
        "entries infinite on one side only are masked out instead of making the difference infinite: a user's "
        "model that proposes the mask token (no -inf where veridec's check model has it) passes the preflight",
        EC9, OWN,
    ),
    # --- testing/check.py: the preflight difference becomes the numeric error ---------------------------------
    Mutant(
        "ownmodel-numeric-error-min",
        "testing/check.py",
        '    numeric_error = o.numeric_error if difference is None else max(o.numeric_error, difference)\n',
        '    numeric_error = o.numeric_error if difference is None else min(o.numeric_error, difference)\n',
        "the preflight difference never widens the numeric error (and a larger user-given one shrinks to it): on "
        "a user's model that rounds differently (difference > 0), a near-tie flip fails the case instead of being "
        "excused",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-numeric-error-replaced",
        "testing/check.py",
        '    numeric_error = o.numeric_error if difference is None else max(o.numeric_error, difference)\n',
        '    numeric_error = o.numeric_error if difference is None else difference\n',
        "the preflight difference replaces the user's numeric_error even when the user's is larger: with "
        "numeric_error above the difference (0 for an exact wrapper), ties the user asked to excuse fail",
        EC9, SHARED,
    ),
    # --- veridec/recording.py: ModuleRecording -------------------------------------------------------------
    Mutant(
        "ownmodel-keyword-canvas-ignored",
        "veridec/recording.py",
        '        x = args[0] if args else kwargs.get("input_ids")\n',
        '        x = args[0] if args else kwargs.get("x")\n',
        "a candidate that calls its model as model(input_ids=x) is refused as calling without a canvas; only "
        "positional calls are recorded (shows on any decoder using the Hugging Face keyword)",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-cached-counted-full",
        "veridec/recording.py",
        '        self.calls.append(Call("cached", where, x.detach().cpu().clone(), False))\n',
        '        self.calls.append(Call("full", where, x.detach().cpu().clone(), True))\n',
        "a call with past_key_values counts as a full forward that shows the canvas: full_forwards is inflated and "
        "a trace is reconstructed from a cached call's few tokens (shows on any candidate using past_key_values)",
        N8, SHARED,
    ),
    Mutant(
        "ownmodel-pre-hook-never-removed",
        "veridec/recording.py",
        "        for hook in self._hooks:\n"
        "            hook.remove()\n",
        "        for hook in self._hooks[1:]:\n"
        "            hook.remove()\n",
        "the forward pre-hook stays on the user's model after each case: old recordings keep logging (and raise "
        "their call limit inside later cases), and the model handed back to the user still carries the hook",
        EC9, SHARED,
    ),
    # --- testing/running.py: the candidate's run -------------------------------------------------------------
    Mutant(
        "ownmodel-no-call-limit",
        "testing/running.py",
        "    recording = ModuleRecording(setup.candidate_model, limit=limit,"
        " keep_logits=measure_logits) if own else \\\n",
        "    recording = ModuleRecording(setup.candidate_model, keep_logits=measure_logits) if own else \\\n",
        "on the user's model the call limit is never enforced: a candidate that never stops runs to its time "
        "limit (reported as a timeout, not past the limit), and an official non-termination is not reproduced",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-drift-smallest",
        "testing/running.py",
        "            side.logit_error = max(side.drift, default=None)\n",
        "            side.logit_error = min(side.drift, default=None)\n",
        "tier A on the user's model reports the smallest call drift as max_logit_error: a cache that refreshes "
        "every fourth forward (zero drift on its refreshes) reads 0 and passes a baseline it exceeds",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-candidate-on-veridec-model",
        "testing/running.py",
        "        return _run_recorded(setup.candidate, setup.fit, setup.goal, recording,"
        " recording.model, setup.model,\n",
        "        return _run_recorded(setup.candidate, setup.fit, setup.goal, recording, setup.model, setup.model,\n",
        "the candidate is handed veridec's model instead of the user's: its hooks land on veridec's layers, the "
        "recording sees no call (zero counters, no trace), and a bug in the user's model is never exercised",
        EC9, OWN,
    ),
    # --- testing/report.py and harness/check_command.py: naming and rebuilding the model -----------------------
    Mutant(
        "ownmodel-reproducer-candidate-on-veridec-model",
        "testing/report.py",
        "        f\"theirs = candidate({'candidate_model' if result.candidate_model else f'adapt(model, "
        "{result.convention!r})'}\"\n",
        "        f\"theirs = candidate(adapt(model, {result.convention!r})\"\n",
        "the reproducer of a failure found on the user's model runs the candidate on veridec's model: it rebuilds "
        "candidate_model but never uses it, so a failure that needs the user's model does not reproduce",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-command-placeholder-factory",
        "testing/report.py",
        "        words[-2:-2] = [\"--candidate-model\", result.candidate_model if \":\" in"
        " result.candidate_model else\n"
        "                        \"FILE.py:FACTORY\"]\n",
        "        words[-2:-2] = [\"--candidate-model\", \"FILE.py:FACTORY\"]\n",
        "the rerun command of a failure found with --candidate-model FILE.py:FACTORY names the placeholder "
        "FILE.py:FACTORY instead of the user's factory, so the printed command does not run as given",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-cli-drops-candidate-model",
        "harness/check_command.py",
        "    return \"hf\" if args.hf_model else args.candidate_model\n",
        "    return \"hf\" if args.hf_model else None\n",
        "veridec check ignores --candidate-model: the candidate runs on veridec's model, no preflight runs, and "
        "the report never names the user's model (shows on any command line with --candidate-model)",
        EC9, OWN,
    ),
    # --- veridec/models/tiny.py: the patch the higher-precision copy must carry --------------------------------
    Mutant(
        "ownmodel-tiny-patch-bound-to-original",
        "veridec/models/tiny.py",
        "    model.raw_forward = types.MethodType(_raw_forward_without_mask, model)\n",
        "    model.raw_forward = lambda *args, **kwargs: _raw_forward_without_mask(model, *args, **kwargs)\n",
        "a deepcopy of a check model keeps forwarding through the original float32 weights: the preflight's "
        "higher-precision copy equals veridec's model, the measured rounding collapses to one ulp, and a user's "
        "model that only rounds differently is refused (precision reruns everywhere measure nothing)",
        EC9, SHARED,
    ),
    # --- testing/agreement.py: vLLM's token-agreement rule (EC10) ---------------------------------------------
    Mutant(
        "ownmodel-agreement-top-k-zero-accepted",
        "testing/agreement.py",
        "        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:\n",
        "        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:\n",
        "agreement={'top_k': 0} is accepted instead of refused: a rule no token can meet runs, so every "
        "divergent case disagrees and the API's bad parameter is never named",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-rank-counts-ties",
        "testing/agreement.py",
        "    rank = lambda logp, token: int((logp > logp[token]).sum())"
        "  # 0: the most probable (ties share the rank)\n",
        "    rank = lambda logp, token: int((logp >= logp[token]).sum())"
        "  # 0: the most probable (ties share the rank)\n",
        "a token's rank counts the tokens at least as probable (itself and its exact ties included): the best "
        "token ranks 1, so top-1 fails every divergence and a tied twin (tokens sharing an LM-head row) ranks past K",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-gap-target-side-only",
        "testing/agreement.py",
        "    gap = max((at_target[target_token] - at_target[candidate_token]).item(),\n"
        "              (at_candidate[candidate_token] - at_candidate[target_token]).item())\n",
        "    gap = (at_target[target_token] - at_target[candidate_token]).item()\n",
        "the gap is taken from the target's distribution only: a candidate that strongly prefers its own token "
        "on its own canvas (the larger side of the gap) passes a --agreement-max-gap it exceeds",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-first-divergence-reading-order",
        "testing/agreement.py",
        "    order = lambda rp: (_step_of(trace, *rp) if _step_of(trace, *rp) is not None else never, rp[0], rp[1])\n",
        "    order = lambda rp: (rp[0], rp[1])  # row, then position\n",
        "the first divergence is the first differing position in reading order, not in the target's commit "
        "order: a decoder whose first wrong commit lies late in the row is judged at an early position, "
        "conditioned on its wrong commit (the two canvases differ there), and may agree",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-candidate-on-target-canvas",
        "testing/agreement.py",
        "    for name, side in ((\"target\", ours), (\"candidate\", theirs)):\n",
        "    for name, side in ((\"target\", ours), (\"candidate\", ours)):\n",
        "the candidate's distribution is computed from the target's canvas and step: the target's token always "
        "ranks 0 in the 'candidate' distribution and the candidate's own preference never enters the gap",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-canvas-after-commit",
        "testing/agreement.py",
        "    for record in side.trace.steps[step:]:\n",
        "    for record in side.trace.steps[step + 1:]:\n",
        "the canvas is re-masked only after the committing step: the position itself and the tokens committed "
        "with it stay on the canvas, so each side's distribution is read after its own commit (off by one step)",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-step-of-row-zero",
        "testing/agreement.py",
        "        if position in record.positions[row]:\n",
        "        if position in record.positions[0]:\n",
        "a position's commit step is looked up in row 0 whatever the row: in a batch the first divergence of "
        "row 1+ is ordered and re-masked by another row's commits (or left unplaced), so it is judged elsewhere",
        EC10, AGREE,
    ),
    # --- testing/exact.py: agreement and drift in the metrics -------------------------------------------------
    Mutant(
        "ownmodel-agreement-unplaced-counted-agreeing",
        "testing/exact.py",
        "    return {\"agreement_rate\": sum(o.agreement[\"agrees\"] for o in placed) / len(placed)"
        " if placed else None,\n",
        "    return {\"agreement_rate\": sum(o.agreement[\"agrees\"] is not False for o in found) / len(found),\n",
        "cases the rule could not place count as agreeing in agreement_rate: a cached or revocable candidate "
        "reads a rate near 1 and passes a baseline its placed cases fall below",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-rate-not-gated",
        "testing/exact.py",
        "LOWER_IS_WORSE = (\"exact_rate\", \"mean_token_match\", \"commit_order_match\", \"agreement_rate\")\n",
        "LOWER_IS_WORSE = (\"exact_rate\", \"mean_token_match\", \"commit_order_match\")\n",
        "agreement_rate is reported but not gated by --baseline: a change that lowers the share of agreeing "
        "cases passes against a stored baseline",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-drift-by-call-min",
        "testing/exact.py",
        "    return {\"drift_by_call\": [max(d[k] for d in drifts if k < len(d)) for k in"
        " range(max(map(len, drifts)))]}\n",
        "    return {\"drift_by_call\": [min(d[k] for d in drifts if k < len(d)) for k in"
        " range(max(map(len, drifts)))]}\n",
        "drift_by_call takes the smallest drift of each call index over the cases: one clean case hides a "
        "stale cache at that call in every other case (the metric reads 0 where the decode drifts)",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-agreement-skips-diverged-cases",
        "testing/exact.py",
        '    if setup.agreement is not None and theirs.error is None and outcome.verdict != "official":\n',
        '    if setup.agreement is not None and theirs.error is None and outcome.verdict not in ("official", '
        '"diverged"):\n',
        "the rule is applied only to cases already exact or tied, never to diverged ones: no case ever "
        "disagrees, so a candidate whose tokens fall outside the top-K passes with agreement_rate 1",
        EC10, AGREE,
    ),
    # --- testing/check.py: the rule's parameters and its verdict ----------------------------------------------
    Mutant(
        "ownmodel-agreement-failures-not-failing",
        "testing/check.py",
        '    if setup.agreement is not None and result.metrics.get("agreement_failures"):\n',
        '    if setup.agreement is not None and result.metrics.get("agreement_rate") == 0:\n',
        "the check fails only when no placed case agrees: one disagreement among agreeing cases (the spec's "
        "'fails when any placed case disagrees') passes",
        EC10, AGREE,
    ),
    Mutant(
        "ownmodel-agreement-dict-max-gap-dropped",
        "testing/check.py",
        "        return Agreement(**agreement)\n",
        "        return Agreement(agreement.get(\"top_k\", 5))\n",
        "a dict rule keeps top_k but drops max_gap (no bound): agreement={'top_k': K, 'max_gap': NATS} and "
        "--agreement-max-gap pass a candidate whose gap is above the bound",
        EC10, AGREE,
    ),
    # --- testing/own_model.py: the weights' digest, the preflight's call of it, the "hf" load -----------------
    Mutant(
        "ownmodel-digest-no-dtype-cast",
        "testing/own_model.py",
        "        if not any(_digest(tensor.to(dtype)) in found for dtype in {tensor.dtype, *dtypes}):\n",
        "        if _digest(tensor) not in found:\n",
        "veridec's weights are compared only at their own dtype, never cast to the user's: a bfloat16 or "
        "float64 load of the same checkpoint is refused as holding other weights",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-digest-first-elements-only",
        "testing/own_model.py",
        "    return tuple(tensor.shape), tensor.dtype,"
        " hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()\n",
        "    return tuple(tensor.shape), tensor.dtype,"
        " hashlib.sha256(flat[:1024].view(torch.uint8).numpy().tobytes()).hexdigest()\n",
        "the digest hashes only a tensor's first 1024 values: a weight changed past them (one float32 step "
        "deep in a matrix) is taken for veridec's, and the preflight canvases may not show the difference",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-preflight-weights-against-veridec",
        "testing/own_model.py",
        "    check_same_weights(candidate_model, model)\n",
        "    check_same_weights(model, model)\n",
        "the preflight checks veridec's weights against veridec's own state dict: a user's model missing a "
        "tensor or holding one changed by a float32 step is never refused when the two canvases hide it",
        EC9, OWN,
    ),
    Mutant(
        "ownmodel-hf-trust-remote-code-always",
        "testing/own_model.py",
        "    options = dict(trust_remote_code=trust_remote_code, local_files_only=True)\n",
        "    options = dict(trust_remote_code=True, local_files_only=True)\n",
        "--hf-model always passes trust_remote_code=True: modelling code shipped in the folder runs without "
        "--trust-remote-code instead of the check being refused before any of it runs",
        EC9, HFM,
    ),
    Mutant(
        "ownmodel-hf-causal-lm-always",
        "testing/own_model.py",
        "        loader = AutoModel if \"AutoModel\" in auto_map else AutoModelForCausalLM\n",
        "        loader = AutoModelForCausalLM\n",
        "--hf-model always loads AutoModelForCausalLM, ignoring the config's auto_map: the official LLaDA and "
        "Dream folders (auto_map naming AutoModel only) fail to load or load another class than their code names",
        EC9, HFM,
    ),
    Mutant(
        "ownmodel-hf-remote-code-refusal-unnamed",
        "testing/own_model.py",
        "        if \"trust_remote_code\" in str(err) and not trust_remote_code:\n",
        "        if \"trust_remote_code\" in str(err) and trust_remote_code:\n",
        "a folder refused for want of trust_remote_code gets transformers' generic error instead of the line "
        "naming --trust-remote-code as the remedy (and the remedy's line where it was given)",
        EC9, HFM,
    ),
    # --- testing/report.py and harness/check_command.py: "hf" labels and the agreement flags -----------------
    Mutant(
        "ownmodel-reproducer-hf-drops-trust-remote-code",
        "testing/report.py",
        "                f\"candidate_model = load_hf_model({model_name!r}, trust_remote_code={label != 'hf'})\"]\n",
        "                f\"candidate_model = load_hf_model({model_name!r})\"]\n",
        "the reproducer of a failure found with --hf-model --trust-remote-code loads the folder without "
        "trust_remote_code: it is refused (or loads other modelling) and the failure does not reproduce",
        EC9, HFM,
    ),
    Mutant(
        "ownmodel-command-hf-remote-code-as-factory",
        "testing/report.py",
        "    if result.candidate_model is not None and result.candidate_model.startswith(\"hf\"):\n",
        "    if result.candidate_model is not None and result.candidate_model == \"hf\":\n",
        "the rerun command of a failure on 'hf (remote code)' falls to the factory branch and prints "
        "--candidate-model FILE.py:FACTORY instead of --hf-model --trust-remote-code: it does not rerun the case",
        EC9, HFM,
    ),
    Mutant(
        "ownmodel-cli-agreement-max-gap-ignored",
        "harness/check_command.py",
        "    gap = float(\"inf\") if args.agreement_max_gap is None else args.agreement_max_gap\n",
        "    gap = float(\"inf\")\n",
        "veridec check reads --agreement-max-gap but never passes it on: the rule runs without a bound, and a "
        "candidate whose gap exceeds the given NATS passes",
        EC10, CLI,
    ),
]
