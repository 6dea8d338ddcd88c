"""Why the two sides of a failing case differ (spec/exactness.md EC11): at the first divergence, the decision each
side took (the positions it committed at that step, with the target's confidences and selection gap from its
trace) and, where the candidate's whole decode equals a documented alternative reading of the rule, that
reading by name ("the candidate follows the published entropy score, BD7.2, not BD6.4").

A reading is the target decoded another way: another tie order (every family), or settings a family's file
names (``Family.readings``: a strict threshold, the official code's score); the candidate follows it when that
decode and the candidate agree in tokens, commit order and counters, as a case's comparison requires.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .families.common import Reading
from .running import CheckSetup, Side, run_target


def tie_reading(ties: str) -> Reading:
    """The other tie order of the check's ``ties`` (spec SQ0.4): torch.topk's where the check ranks by lowest
    position, and the other way round."""
    if ties == "lowest":
        return Reading("torch.topk's order among equal scores (--ties torch)", "SQ0.4",
                       "equal scores by lowest position", ties="torch")
    return Reading("equal scores by lowest position (--ties lowest)", "SQ0.4", "torch.topk's order", ties="lowest")


def explanation(setup: CheckSetup, outcome) -> list[str]:
    """The lines that explain ``outcome``'s first divergence (none without one)."""
    divergence = outcome.divergence
    if divergence is None or outcome.target.trace is None:
        return []
    lines = decision_lines(outcome.target, outcome.candidate, divergence.step, divergence.row)
    family = setup.goal.family
    if family.details is not None:
        lines += family.details(setup, outcome)
    for reading in (tie_reading(setup.ties), *family.readings):
        if reading.applies(outcome.case["settings"]) and follows(setup, outcome, reading):
            lines.append(f"the candidate follows {reading.name} ({reading.clause}), not {reading.instead}: its "
                         "decode equals the target's read that way")
    return lines


def decision_lines(ours: Side, theirs: Side, step: int, row: int) -> list[str]:
    """What each side committed at ``step`` in ``row``: the target with its confidences (in the order its rule
    ranked them) and its selection gap, the candidate (from its calls) in position order."""
    lines = []
    if step < len(ours.trace.steps):
        record = ours.trace.steps[step]
        pairs = ", ".join(f"{p} (token {t}, confidence {c:.6g})"
                          for p, t, c in zip(record.positions[row], record.tokens[row], record.confidences[row]))
        lines.append(f"target at step {step}, row {row}: committed {pairs or 'nothing'}; selection gap "
                     f"{record.selection_gaps[row]:.6g} (its weakest commit minus its strongest mask left)")
    trace = theirs.trace
    if trace is not None and step < len(trace.steps):
        record = trace.steps[step]
        pairs = ", ".join(f"{p} (token {t})" for p, t in sorted(zip(record.positions[row], record.tokens[row])))
        lines.append(f"candidate at step {step}, row {row}: committed {pairs or 'nothing'}")
    return lines


def follows(setup: CheckSetup, outcome, reading: Reading) -> bool:
    """Whether the candidate's decode equals the target's under ``reading`` (tokens, commit order, counters)."""
    from .exact import CaseOutcome, compare_sides  # exact imports this module's caller: imported when needed

    case = {**outcome.case, "settings": {**outcome.case["settings"], **reading.settings}}
    prompt = torch.tensor(case["prompt"], dtype=torch.long, device=setup.model.device)
    mask = None if case["attention_mask"] is None else torch.tensor(case["attention_mask"], device=prompt.device)
    goal = replace(setup.goal, decode=reading.decode or setup.goal.decode,
                   settings=(*setup.goal.settings, *reading.settings))
    read = CheckSetup(setup.candidate, setup.fit, goal, setup.model, setup.convention, reading.ties or setup.ties)
    side = run_target(read, prompt, mask, case)
    if side.error is not None:
        return False
    other = CaseOutcome(outcome.case, "exact", target=side, candidate=_copy(outcome.candidate))
    compare_sides(other, setup.model, prompt, mask)
    return other.verdict == "exact"


def _copy(side: Side) -> Side:
    return Side(side.canvas, side.trace, side.counters, side.nfe, side.error, hook_calls=side.hook_calls)
