"""Tiers E and A, one case: both sides run on the case, then tokens, commit order (reconstructed from the recorded
calls), counters (model calls, full forwards, query positions; spec N8), a reported ``nfe`` and Dream's hook calls
are compared. A divergence is excused only as a numeric tie: its decision margin is at most the setup's
``numeric_error`` (0 by default: the candidate's forwards are the target's own, so exact ties are decided by the
lowest-index rule, spec SQ0.4). Where the official code fails or deviates (the target's ``Official.defects``, spec
EC6) a candidate that fails there, or deviates there, reproduces the official defect ("official"), unless the
setup asks for better than the official code (``official_defects="fail"``) or to leave such cases out
(``"skip"``). ``case_metrics`` are tier A's measures over the cases run (spec EC3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from veridec.canvas import initial_canvas
from veridec.compare import Divergence, compare_traces, token_match_rate

from .agreement import agreement_at_divergence
from .flips import CaseFlips, flip_metrics, judged_flips
from .running import CALL_SLACK, CheckSetup, Side, case_tensors, full_canvas, resolve_case, run_candidate, run_target
from .official import OfficialDefect

COST_FIELDS = ("model_calls", "full_forwards", "query_positions")  # the counters both sides are held to (N8)

@dataclass
class CaseOutcome:
    case: dict
    verdict: str  # "exact" | "tie" | "official" (reproduces an official defect) | "diverged" | "skipped"
    problems: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    diagnosis: dict = field(default_factory=dict)
    target: Side = field(default_factory=Side)
    candidate: Side = field(default_factory=Side)
    token_match: float | None = None
    commit_order_match: float | None = None  # share of rows with the same commit order (when both traced)
    defect: OfficialDefect | None = None  # where the official code fails or deviates on this case
    agreement: dict | None = None  # tier A with vLLM's rule (spec EC10): its verdict at the first divergence
    explanation: list[str] = field(default_factory=list)  # why the sides differ (testing.explain), the shrunk case
    flips: CaseFlips | None = None  # tier A's decision-flip budget (spec EC13), where asked for

    @property
    def failed(self) -> bool:
        return self.verdict == "diverged"


def run_case(setup: CheckSetup, case: dict) -> CaseOutcome:
    """Run both sides on ``case`` and compare them (see the module docstring); with ``setup.measure_logits``
    also the candidate's logit error (tier A)."""
    model = setup.model
    prompt, mask = case_tensors(case, model)
    try:
        case = resolve_case(case, model, prompt, mask, setup.goal)
    except ValueError as err:  # a prompt no decoder reads (spec SQ0.6)
        return CaseOutcome(case, "skipped", [f"the target refused the case: ValueError: {err}"])
    ours = run_target(setup, prompt, mask, case)
    defect = official_defect(setup, case, ours, prompt, mask)
    if ours.error is not None and defect is None:
        return CaseOutcome(case, "skipped", [f"the target refused the case: {ours.error}"], target=ours)
    if defect is not None and setup.official_defects == "skip":
        return CaseOutcome(case, "skipped", [f"the official code fails here: {defect} (official defects skipped)"],
                           target=ours, defect=defect)
    counters = ours.counters or ours.trace.counters  # a stalled target: its calls until it stopped
    theirs = run_candidate(setup, prompt, mask, case, 2 * counters.model_calls + CALL_SLACK, setup.measure_logits,
                           ours.seconds)
    outcome = CaseOutcome(case, "exact", target=ours, candidate=theirs, defect=defect)
    if defect is None:
        compare_sides(outcome, model, prompt, mask, setup.numeric_error)
    else:
        _judge_at_defect(outcome, model, prompt, mask, setup)
    if setup.agreement is not None and theirs.error is None and outcome.verdict != "official":
        outcome.agreement = agreement_at_divergence(setup.agreement, model, prompt, mask, ours, theirs)
    if setup.flip_budget:
        outcome.flips = judged_flips(setup, case, ours, theirs, prompt, mask)
    return outcome


def official_defect(setup: CheckSetup, case: dict, ours: Side, prompt, mask) -> OfficialDefect | None:
    """Where the official loop the target is exact to fails or deviates on ``case`` (None: nowhere, or a target
    exact to no official loop)."""
    official = setup.goal.official
    if official is None or ours.trace is None:
        return None
    return official.defects(case, ours.trace.steps, ours.stalled, setup.model, prompt, mask)


def _judge_at_defect(outcome: CaseOutcome, model, prompt, mask, setup: CheckSetup) -> None:
    """A case where the official code fails: a candidate that fails too (any error, or past the call limit)
    reproduces it; one that completes must equal the target, or, where the official code completes otherwise
    (``deviates``), equal the official run when the target can reproduce it (``Official.run``), else may
    differ from the defect's step on."""
    theirs, defect, problems = outcome.candidate, outcome.defect, outcome.problems
    if theirs.error is not None:  # where the official code deviates, what it does next is not predicted
        _reproduces(outcome, setup, f"the candidate fails where the official code does ({theirs.error})")
        return
    if outcome.target.canvas is None:  # the official loop never ends, a stall here
        outcome.verdict = "skipped"
        problems.append(f"the official loop never ends here ({defect}) and the target stalls; the candidate "
                        "completed, which nothing here can check")
        return
    compare_sides(outcome, model, prompt, mask, setup.numeric_error)
    divergence = outcome.divergence
    if not outcome.failed or defect.kind != "deviates":
        return
    if setup.goal.official.run is not None:  # the official behaviour is known: the candidate must do just that
        _judge_as_published(outcome, setup, prompt, mask)
    elif divergence is None or divergence.step >= defect.at_step:
        problems.clear()
        _reproduces(outcome, setup, f"the candidate deviates from step {defect.at_step} on, as the official code")


def _judge_as_published(outcome: CaseOutcome, setup: CheckSetup, prompt, mask) -> None:
    """Where the official code deviates and the target knows what it does (``Official.run``): a candidate
    with the official canvas and counters reproduces the defect; any other one fails, saying how it differs."""
    case, theirs = outcome.case, outcome.candidate
    torch.manual_seed(case["seed"])
    try:
        official = setup.goal.official.run(setup.model, prompt, mask, setup.ties, **setup.goal.settings_of(case))
    except (IndexError, RuntimeError) as raised:  # the official run deviates, then raises: so must the candidate
        outcome.problems.append(f"the official code deviates at {outcome.defect.clause}, then raises "
                                f"({type(raised).__name__}); the candidate completed")
        return
    counters = {name: getattr(official.trace.counters, name) for name in COST_FIELDS}
    same = torch.equal(official.canvas.cpu(), theirs.canvas.cpu()) and counters == {
        name: getattr(theirs.counters, name) for name in COST_FIELDS}
    outcome.problems.clear()
    if same:
        _reproduces(outcome, setup, f"the candidate does what the official code does at {outcome.defect.clause}")
        return
    outcome.problems.append(f"the official code deviates here ({outcome.defect}); the candidate deviates "
                            f"otherwise: its canvas or counters differ from the official run's (counters {counters})")


def _reproduces(outcome: CaseOutcome, setup: CheckSetup, how: str) -> None:
    """The candidate does what the official code does at its defect: a match, or (official_defects="fail") a failure."""
    if setup.official_defects == "match":
        outcome.verdict = "official"
        return
    outcome.verdict = "diverged"
    outcome.problems.append(f"{how}: official defect {outcome.defect}; better than the official code was asked for")


def compare_sides(outcome: CaseOutcome, model, prompt, mask, numeric_error: float = 0.0) -> None:
    """The two sides of ``outcome`` compared (tokens, commit order or events, counters, hook calls): its verdict
    and problems."""
    ours, theirs, problems = outcome.target, outcome.candidate, outcome.problems
    prompt_length = prompt.shape[1]
    if theirs.error is not None:
        problems.append(f"the candidate failed: {theirs.error}")
        outcome.verdict = "diverged"
        return
    canvas = full_canvas(theirs.canvas, ours.canvas, prompt_length)
    if canvas is None:
        problems.append(f"the candidate returned shape {tuple(theirs.canvas.shape)}; the target's canvas is "
                        f"{tuple(ours.canvas.shape)} (the prompt {prompt_length} wide): return the whole canvas or "
                        "the generation alone, uncut")
        outcome.verdict = "diverged"
        return
    theirs.canvas = canvas
    outcome.token_match = token_match_rate(ours.canvas.cpu(), canvas.cpu(), prompt_length)
    tie = False
    if _comparable(ours.trace, theirs.trace):
        comparison = compare_traces(ours.trace, theirs.trace, numeric_error=numeric_error)
        divergence = comparison.first_divergence
        outcome.commit_order_match = comparison.commit_order_match_rate
        if divergence is not None:
            tie = divergence.tie and numeric_error > 0
            outcome.divergence = divergence
            outcome.diagnosis = diagnose(model, ours, divergence, prompt, mask)
            if not tie:
                problems.append(_divergence_problem(divergence, ours.trace, theirs.trace))
    if not tie and not torch.equal(canvas.cpu(), ours.canvas.cpu()):
        row, position = (canvas.cpu() != ours.canvas.cpu()).nonzero()[0].tolist()
        problems.append(f"tokens differ (first at row {row}, position {position}: target "
                        f"{int(ours.canvas[row, position])}, candidate {int(canvas[row, position])}; token match "
                        f"{outcome.token_match:.3f})")
    _compare_costs(ours, theirs, problems)
    if ours.hook_calls != theirs.hook_calls:
        problems.append(f"Dream's hooks were called differently: target {_hook_steps(ours)}, candidate "
                        f"{_hook_steps(theirs)}")
    outcome.verdict = "diverged" if problems else ("tie" if tie else "exact")


def _divergence_problem(divergence: Divergence, ours, theirs) -> str:
    """The first divergence in one line: where the commit order differs, or (event traces) which events."""
    where = f"step {divergence.step} (row {divergence.row}, position {divergence.position})"
    if ours.events is None:
        return f"commit order differs from {where}"
    return (f"events differ from {where}: target {_events_at(ours, divergence)}, candidate "
            f"{_events_at(theirs, divergence)}")


def _events_at(trace, divergence: Divergence) -> str:
    """The token-changing events of the divergence's step and position, as "revoke 12 -> mask" (or "none")."""
    mask_id = trace.params.get("mask_id")
    token = lambda t: "mask" if mask_id is not None and t == mask_id else str(t)
    where = (divergence.step, divergence.row, divergence.position)
    found = [f"{e.kind} {token(e.old)} -> {token(e.new)}" for e in trace.events
             if (e.step, e.row, e.position) == where and e.old != e.new]
    return ", ".join(found) or "none"


def _comparable(ours, theirs) -> bool:
    """Both sides traced, and the candidate's events reconstructed where the target's commits are revocable
    (``RecordingModel.trace``: only from full forwards of one shape; else tokens and counters are compared)."""
    return ours is not None and theirs is not None and (ours.events is None or theirs.events is not None)


def _hook_steps(side: Side) -> str:
    """The hook calls as ``tokens@None logits@0 tokens@0 ...`` (at most 12)."""
    calls = [f"{name.split('_')[1]}@{step}" for name, step, _ in side.hook_calls]
    return " ".join(calls[:12]) + (f" ... ({len(calls)} calls)" if len(calls) > 12 else "")


def _compare_costs(ours: Side, theirs: Side, problems: list[str]) -> None:
    a = {name: getattr(ours.counters, name) for name in COST_FIELDS}
    b = {name: getattr(theirs.counters, name) for name in COST_FIELDS}
    if a != b:
        problems.append(f"counters differ (spec N8): target {a}, candidate {b}")
    if theirs.nfe is not None and theirs.nfe != b["model_calls"]:
        problems.append(f"the candidate reports nfe={theirs.nfe} but made {b['model_calls']} model calls")


def diagnose(model, ours: Side, divergence: Divergence, prompt, mask) -> dict:
    """What decided the first divergent step, as a full forward of the canvas before it sees it: each side's
    token at the position with its probability, and the logit margin (top1 - top2) there."""
    step = divergence.step
    length = ours.canvas.shape[1]
    _, full_mask = initial_canvas(model, prompt, mask, length - prompt.shape[1], model.special.mask_id)
    before = _events_before if ours.trace.events is not None else _canvas_before
    canvas = before(ours.canvas, ours.trace, step, model.special.mask_id).to(model.device)  # [B, L]
    with torch.no_grad():
        logits = model(canvas, attention_mask=full_mask).logits[divergence.row, divergence.position].double().cpu()
    probabilities = logits.softmax(-1)
    top = logits.topk(2).values
    token = lambda t: None if t is None else {"token": t, "probability": probabilities[t].item()}
    return {"step": step, "row": divergence.row, "position": divergence.position, "kind": divergence.kind,
            "target": token(divergence.token_a), "candidate": token(divergence.token_b),
            "logit_margin": (top[0] - top[1]).item(),
            "decision_margin": None if math.isnan(divergence.margin) else divergence.margin}


def _canvas_before(final: torch.Tensor, trace, step: int, mask_id: int) -> torch.Tensor:
    """The final canvas [B, L] with every commit of ``step`` and later masked again."""
    canvas = final.detach().cpu().clone()
    for record in trace.steps[step:]:
        for row, positions in enumerate(record.positions):
            canvas[row, positions] = mask_id
    return canvas


def _events_before(final: torch.Tensor, trace, step: int, mask_id: int) -> torch.Tensor:
    """The canvas [B, L] an event trace held before ``step``: the final one with every event of ``step`` and
    later undone, last first (the verification block is not part of it: a canvas position's logits are the plain
    forward's, WN2)."""
    canvas = final.detach().cpu().clone()
    for event in reversed(trace.events):
        if event.step >= step:
            canvas[event.row, event.position] = event.old
    return canvas


LOWER_IS_WORSE = ("exact_rate", "mean_token_match", "commit_order_match", "agreement_rate")
HIGHER_IS_WORSE = ("max_logit_error", "drift_p50", "drift_p99", *(f"candidate_{name}" for name in COST_FIELDS))


def _drift_quantiles(drifts: list[float]) -> dict:
    """The median and 99th percentile (linear interpolation, an infinite drift kept infinite) of the calls'
    drifts; None without any."""
    if not drifts:
        return {"drift_p50": None, "drift_p99": None}
    values = sorted(drifts)

    def quantile(q: float) -> float:
        where = q * (len(values) - 1)
        low, high, part = values[math.floor(where)], values[math.ceil(where)], where - math.floor(where)
        return low if part == 0 or low == high else low + (high - low) * part

    return {"drift_p50": quantile(0.5), "drift_p99": quantile(0.99)}


def _drift_by_call(drifts: list[list[float]]) -> dict:
    """Per call index (the decode's steps, on the user's model), the largest drift over the cases; nothing
    without drift."""
    if not drifts:
        return {}
    return {"drift_by_call": [max(d[k] for d in drifts if k < len(d)) for k in range(max(map(len, drifts)))]}


def _agreement_metrics(outcomes: list[CaseOutcome]) -> dict:
    """With vLLM's rule (spec EC10): the share of the cases it could place that agree, how many it could not
    place, and the first three disagreements; nothing without the rule."""
    found = [o for o in outcomes if o.agreement is not None]
    if not found:
        return {}
    placed = [o for o in found if o.agreement["agrees"] is not None]
    failures = [{"case": o.case, **o.agreement} for o in placed if not o.agreement["agrees"]]
    return {"agreement_rate": sum(o.agreement["agrees"] for o in placed) / len(placed) if placed else None,
            "agreement_unplaced": len(found) - len(placed), "agreement_failures": failures[:3]}


def case_metrics(outcomes: list[CaseOutcome]) -> dict:
    """Tier A's measures over the cases run (spec EC3): the share exact (or a numeric tie), the mean token match,
    the mean commit-order match (share of rows), the largest logit error of the candidate's cached calls against
    full forwards (None: it made none, or it was not measured), on the candidate's own model the median and 99th
    percentile of its calls' drift and the largest drift at each call index (spec EC9; None elsewhere), with
    vLLM's rule its agreement (EC10), with the flip budget its flips per dtype (EC13), and each side's mean
    counters (N8)."""
    mean = lambda values: sum(values) / len(values) if values else None
    orders = [o.commit_order_match for o in outcomes if o.commit_order_match is not None]
    errors = [o.candidate.logit_error for o in outcomes if o.candidate.logit_error is not None]
    metrics = {"cases": len(outcomes),
               "exact_rate": mean([o.verdict in ("exact", "tie", "official") for o in outcomes]),
               "mean_token_match": mean([o.token_match or 0.0 for o in outcomes]),
               "commit_order_match": mean(orders), "max_logit_error": max(errors, default=None),
               **_drift_quantiles([d for o in outcomes for d in (o.candidate.drift or [])]),
               **_drift_by_call([o.candidate.drift for o in outcomes if o.candidate.drift]),
               **_agreement_metrics(outcomes)}
    flips = [o.flips for o in outcomes if o.flips is not None]
    if flips:
        metrics["flips"] = flip_metrics(flips)
    for side in ("target", "candidate"):
        counters = [getattr(o, side).counters for o in outcomes if getattr(o, side).counters is not None]
        metrics.update({f"{side}_{name}": mean([getattr(c, name) for c in counters]) for name in COST_FIELDS})
    return metrics
