"""A check's result as JSON, as markdown, and as a reproducer: a Python snippet and a CLI line that rerun the
shrunk failing case alone."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict

from .hooks import live_hooks
from .tiers import TIERS


def result_dict(result) -> dict:
    data = {key: value for key, value in asdict(result).items() if key != "failure"}
    failure = result.failure
    if failure is not None and TIERS[result.tier].sampled:
        data["failure"] = {"case": failure.case, "problems": failure.problems, "samples": failure.samples,
                           "detectable_tv": failure.delta, "top": {k: [[list(o), c] for o, c in v]
                                                                   for k, v in failure.top.items()},
                           "tests": None if failure.comparison is None else failure.comparison.tests}
    elif failure is not None:
        data["failure"] = {"case": failure.case, "problems": failure.problems, "diagnosis": failure.diagnosis,
                           "explanation": failure.explanation,
                           "target_counters": _counters(failure.target), "candidate_counters": _counters(
                               failure.candidate), "candidate_nfe": failure.candidate.nfe,
                           "token_match": failure.token_match}
    return data


def _counters(side) -> dict | None:
    return None if side.counters is None else asdict(side.counters)


def markdown(result) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    lines = [f"# veridec check: {verdict}", "",
             f"- candidate: `{result.candidate}`", f"- against: {result.against} (convention {result.convention}, "
             f"model {result.model}, tier {result.tier}, ties {result.ties}, seed {result.seed})",
             f"- cases run: {result.trials} ({result.numeric_ties} numeric ties, {_official_count(result)}"
             f"{result.skipped} refused by the target)"]
    if result.candidate_model is not None:
        lines.append(f"- candidate ran on its own model `{result.candidate_model}` (preflight: logits within "
                     f"{result.model_difference:.3g} of veridec's model; ties within {result.numeric_error:.3g} "
                     "excused: the larger of that and numeric_error)")
    if result.agreement is not None:
        lines.append(f"- token agreement: {result.agreement}")
    if TIERS[result.tier].reports_metrics:
        lines.append(f"- metrics: {json.dumps(result.metrics)}")
    lines += _flip_lines(result.metrics.get("flips"))
    if result.knobs:
        lines.append("- knobs: " + ", ".join(f"{name} {verdict}" for name, verdict in result.knobs.items()))
    lines += _knob_lines(result)
    failure = result.failure
    if failure is None:
        return "\n".join(lines) + "\n"
    if TIERS[result.tier].sampled:
        return "\n".join(lines + _law_lines(result)) + "\n"
    lines += [f"- detected after {result.trials_to_detection} case(s); shrunk to the case below", "",
              "## What differs", *[f"- {problem}" for problem in failure.problems]]
    if failure.diagnosis:
        lines += ["", "## First divergence", *_diagnosis_lines(failure.diagnosis)]
    if failure.explanation:
        lines += ["", "## Why they differ", *[f"- {line}" for line in failure.explanation]]
    lines += ["", "## Costs (spec N8)", f"- target: {_counters(failure.target)}",
              f"- candidate: {_counters(failure.candidate)}" + (
                  f", reports nfe={failure.candidate.nfe}" if failure.candidate.nfe is not None else ""),
              "", "## Case", "```json", json.dumps(failure.case), "```",
              "", "## Reproduce", "```python", result.reproducer.rstrip(), "```", "```sh", result.command, "```"]
    return "\n".join(lines) + "\n"


def _flip_lines(flips: dict | None) -> list[str]:
    """Tier A's decision-flip budget (spec EC13): per dtype, the flips and the first failing ones in words."""
    if not flips:
        return []
    k = "before the decode ends" if flips["rejoin_within"] is None else f"within {flips['rejoin_within']} step(s)"
    lines = []
    for dtype, entry in flips["by_dtype"].items():
        lines.append(f"- decision flips (EC13), {dtype}: {entry['flips']} in {entry['cases_judged']} judged cases "
                     f"({entry['cases_unjudged']} unjudged), {entry['within_budget']} within the budget, "
                     f"{entry['forks']} forks, largest eps {entry['max_error']}, wakes closed after at most "
                     f"{entry['k_measured']} step(s) (required {k}); {entry['failing']} failing")
        lines += [f"  - not judged ({count} cases): {why}" for why, count in entry.get("unjudged_why", {}).items()]
        lines += [f"  - {_flip_sentence(f)}" for f in entry["failures"]]
    return lines


def _flip_sentence(flip: dict) -> str:
    wake = "its wake never closed" if flip["rejoin"] is None else f"{flip['wake']} after {flip['rejoin']} step(s)"
    return (f"{flip['kind']} flip at step {flip['step']} (row {flip['row']}, position {flip['position']}): the "
            f"reference's {flip['quantity']} {flip['margin']:.6g} against the bound {flip['bound']:.6g} (eps "
            f"{flip['error']:.6g}), {'within' if flip['within'] else 'outside'} the budget; {wake}; case "
            f"{json.dumps(flip['case'])}")


def _knob_lines(result) -> list[str]:
    """Each knob without effect, or moving the candidate otherwise (spec EC7): what moved, and the case (rerun it
    with either value)."""
    lines = []
    for finding in result.knob_failures:
        title = "## A knob that moves the candidate otherwise" if finding["verdict"] == "moves differently" else \
            "## A knob without effect"
        lines += ["", title, f"- {finding['sentence']}", "```json", json.dumps(finding["case"]),
                  "```"]
    return lines


def _official_count(result) -> str:
    """The cases that reproduced an official defect, by clause (spec EC6), or nothing when there were none."""
    if not result.official_defects:
        return ""
    total = sum(result.official_defects.values())
    clauses = ", ".join(f"{clause} x{count}" for clause, count in sorted(result.official_defects.items()))
    return f"{total} reproduce official defects ({clauses}), "


def _law_lines(result) -> list[str]:
    """Tier S's failure: the test that fired, each side's most frequent outputs, the case and its rerun."""
    failure = result.failure
    lines = [f"- detected at case {result.trials_to_detection} (not shrunk: samples are random)", "",
             "## What differs", *[f"- {problem}" for problem in failure.problems]]
    for side, top in failure.top.items():
        lines.append(f"- {side}'s most frequent outputs: " + ", ".join(f"{list(o)} x{c}" for o, c in top))
    if failure.delta is not None:
        lines.append(f"- each test detects a total variation of {failure.delta:.3g} with probability 0.95 "
                     "(spec ST3)")
    return lines + ["", "## Case", "```json", json.dumps(failure.case), "```", "", "## Reproduce", "```python",
                    result.reproducer.rstrip(), "```", "```sh", result.command, "```"]


def _diagnosis_lines(diagnosis: dict) -> list[str]:
    side = lambda entry: "nothing" if entry is None else \
        f"token {entry['token']} (probability {entry['probability']:.6g})"
    did = "committed" if diagnosis["kind"] in ("token", "position") else "wrote"  # event traces: any event
    lines = [f"- step {diagnosis['step']}, row {diagnosis['row']}, position {diagnosis['position']} "
             f"({diagnosis['kind']} divergence)",
             f"- target {did} {side(diagnosis['target'])}; candidate {did} {side(diagnosis['candidate'])}",
             f"- logit margin (top1 - top2) there: {diagnosis['logit_margin']:.6g} (full forward of the canvas "
             "before the step)"]
    if diagnosis["decision_margin"] is not None:
        lines.append(f"- the target's decision margin at that step: {diagnosis['decision_margin']:.6g}")
    return lines


def reproducer_snippet(result, goal, fit, model_name: str, against, cache: str) -> str:
    """Python that reruns the failing case on both sides and prints both canvases (tier S: reruns the check of
    the case, whose samples are drawn from seeds derived from it). ``against`` and ``cache`` as check_decoder
    was given them."""
    case = result.failure.case
    load = (f"candidate = load_candidate({result.source!r})" if result.source else
            f"from {result.module} import {result.candidate.split('.')[0]} as candidate")
    if TIERS[result.tier].sampled:
        named = isinstance(against, str)
        return "\n".join([
            "from veridec.testing import check_decoder, load_candidate", load,
            *([] if named else ["# reference = the callable you passed as against= (define it here)"]),
            f"result = check_decoder(candidate, {repr(against) if named else 'reference'}, cache={cache!r}, "
            f"convention={result.convention!r}, model={model_name!r}, tier='S', ties={result.ties!r}, "
            f"alpha={result.alpha!r}, delta={result.delta!r}, samples={result.samples!r}, case={case!r})",
            "print(result.markdown())"]) + "\n"
    settings, _ = live_hooks(goal.settings_of(case))
    arguments = ", ".join(f"{name}={value!r}" for name, value in settings.items())
    theirs = "".join(f", {name}={value!r}" for name, value in settings.items() if fit.takes(name))  # as called
    module, name = goal.call.rsplit(".", 1)
    ours = (f"{name}(model, prompt, attention_mask, ties={result.ties!r}, {goal.fixed}{arguments}).canvas"
            if goal.veridec else f"reference(adapt(model, {result.convention!r}), prompt, {arguments})")
    extra = ", attention_mask=attention_mask" if case["attention_mask"] is not None else ""
    if goal.mask_name and fit.takes(goal.mask_name):  # uniform-state targets name none
        extra = f", {goal.mask_name}=model.special.mask_id" + extra
    return "\n".join([
        "import torch",
        "from veridec.adapters import adapt",
        "from veridec.testing import load_check_model, load_candidate",
        *(["from veridec.testing.hooks import DreamHook"] if "DreamHook(" in arguments else []),
        f"from {module} import {name}" if goal.veridec else
        "# reference = the callable you passed as against= (define it here)",
        f"model = load_check_model({model_name!r})",
        load,
        *([] if result.candidate_model is None else _own_model_lines(result.candidate_model, model_name)),
        f"prompt = torch.tensor({case['prompt']})",
        "attention_mask = None" if case["attention_mask"] is None else
        f"attention_mask = torch.tensor({case['attention_mask']})",
        f"torch.manual_seed({case['seed']})",
        f"theirs = candidate({'candidate_model' if result.candidate_model else f'adapt(model, {result.convention!r})'}"
        f", prompt{theirs}{extra})",
        f"torch.manual_seed({case['seed']})",
        f"ours = {ours}",
        "print(theirs, ours, sep='\\n')",
    ]) + "\n"


def _own_model_lines(label: str, model_name: str) -> list[str]:
    """The reproducer's lines that rebuild the candidate's own model (spec EC9)."""
    if label.startswith("hf"):
        return ["from veridec.testing.own_model import load_hf_model",
                f"candidate_model = load_hf_model({model_name!r}, trust_remote_code={label != 'hf'})"]
    if ":" not in label:
        return [f"candidate_model = ...  # your {label} object, as passed to check_decoder"]
    return ["from veridec.testing.own_model import own_model",
            f"candidate_model, _ = own_model({label!r}, {model_name!r})"]


def reproducer_command(result, against, model_name: str, cache: str) -> str:
    """The CLI line that reruns the case alone (``--case``)."""
    source = result.source or "FILE.py:FUNCTION"
    if source.startswith("-"):  # a relative path read as an option otherwise
        source = f"./{source}"
    words = ["veridec", "check", source, "--against", against if isinstance(against, str) else "CALLABLE",
             "--cache", cache, "--convention", result.convention, "--model", model_name,
             "--ties", result.ties, "--case", json.dumps(result.failure.case)]
    if result.official_mode != "match":
        words[-2:-2] = ["--official-defects", result.official_mode]
    if result.case_timeout is not None:
        words[-2:-2] = ["--case-timeout", str(result.case_timeout)]
    if result.candidate_model is not None and result.candidate_model.startswith("hf"):
        words[-2:-2] = ["--hf-model"] + ([] if result.candidate_model == "hf" else ["--trust-remote-code"])
    elif result.candidate_model is not None:
        words[-2:-2] = ["--candidate-model", result.candidate_model if ":" in result.candidate_model else
                        "FILE.py:FACTORY"]
    if TIERS[result.tier].sampled:
        words[-2:-2] = ["--tier", "S", "--alpha", str(result.alpha), "--delta", str(result.delta)]
        if result.samples is not None:
            words[-2:-2] = ["--samples", str(result.samples)]
    return shlex.join(words)

