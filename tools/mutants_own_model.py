"""A mutation catalogue for a candidate on the user's own model (spec/exactness.md EC9; spec/notation.md N8 for
the recording's counters).

It covers ``testing.own_model`` (the factory call of ``own_model``, the preflight canvases, ``preflight``'s
comparison and its measured bound, ``_max_difference``), the recording at the module's top-level forward
(``veridec.recording.ModuleRecording``: the canvas of a call, cached calls, the hook's removal), the candidate's
run in ``testing.running`` (``run_candidate``'s call limit and drift, ``run_own``'s served model), the preflight
difference becoming the numeric error in ``testing.check.check_decoder``, the report's lines that name and rebuild
the model (``testing.report``: the reproducer and ``reproducer_command``), the CLI's ``--candidate-model``
(``harness.check_command``), and the check models' mask patch (``veridec.models.tiny.never_predicts_mask``), whose
copy one precision up is what the preflight's bound is measured against. Each mutant is a one- or two-line
mistake placed where a wrong line would most likely let a wrong verdict pass silently (a model of other weights
let through, a drifting cache reported as exact, a reproducer that reruns on veridec's model).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_revocable.py beyond its docstring) was read.

    python -m tools.mutation --catalogue tools/mutants_own_model.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

EC9 = "spec/exactness.md EC9"
N8 = "spec/notation.md N8"
OWN = ("tests/test_own_model.py",)
SHARED = ("tests/test_own_model.py", "tests/test_check.py")

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
        "    bound = tolerance(ours[finite], exact[finite])\n",
        "    bound = tolerance(theirs[finite], exact[finite])\n",
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
        "    numeric_error = numeric_error if difference is None else max(numeric_error, difference)\n",
        "    numeric_error = numeric_error if difference is None else min(numeric_error, difference)\n",
        "the preflight difference never widens the numeric error (and a larger user-given one shrinks to it): on "
        "a user's model that rounds differently (difference > 0), a near-tie flip fails the case instead of being "
        "excused",
        EC9, SHARED,
    ),
    Mutant(
        "ownmodel-numeric-error-replaced",
        "testing/check.py",
        "    numeric_error = numeric_error if difference is None else max(numeric_error, difference)\n",
        "    numeric_error = numeric_error if difference is None else difference\n",
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
]
