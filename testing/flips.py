"""Tier A's decision-flip budget (spec/exactness.md EC13): where a port on its own lower-precision model may take
another decision than the reference. Per case, the port's numeric error ``eps`` (its calls' largest logit
difference from the reference's model, EC9's drift) is propagated to the quantity each decision compared; a
decision that differs is *within the budget* only where the reference's margin is at most that bound, and the
two trajectories must rejoin (equal canvases again) within ``k`` steps.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from veridec.canvas import initial_canvas

# A score's largest move under logits moved by max-norm eps, V the vocabulary size: a probability's gradient
# p (e_k - p) meets a move of max-norm eps in at most 2 eps p (1 - p) <= eps / 2; a margin of two probabilities
# twice that; an entropy, from |d log p| <= 2 eps, at most 2 eps + (e^(2 eps) - 1) H with H <= log V.
SCORE_BOUNDS = {
    "probability": lambda eps, vocab: eps / 2,
    "probability margin": lambda eps, vocab: eps,
    "entropy": lambda eps, vocab: 2 * eps + math.expm1(2 * eps) * math.log(vocab),
}


def logit_gap_bound(eps: float) -> float:
    """A top-1 minus top-2 logit gap moves by at most twice the logits' max-norm error."""
    return 2 * eps


@dataclass(frozen=True)
class FlipScore:
    """What a case's rule ranks and compares (``Family.flip_score``): its score's name (a key of SCORE_BOUNDS)
    and the threshold it compares the score with (None: a rank rule only)."""

    score: str
    threshold: float | None = None


@dataclass
class Flip:
    """One decision that differs from a joined state: where, what kind (token, position, end), the reference's
    margin and the quantity it is, the bound it is held to, whether it is within the budget, how its wake ended
    ("rejoined": equal canvases again; "forked": a position both committed holds other tokens; "ended apart":
    both ended, apart only at prompt masks one side filled; "open": none of these) and after how many steps
    (``rejoin``; None when open)."""

    row: int
    step: int  # the reference's step index
    position: int
    kind: str  # "token" | "position" | "end"
    quantity: str
    margin: float
    bound: float
    error: float
    within: bool
    rejoin: int | None = None
    wake: str = "open"

    def describe(self) -> str:
        rejoin = "its wake never closed" if self.rejoin is None else f"{self.wake} after {self.rejoin} step(s)"
        return (f"{self.kind} flip at step {self.step} (row {self.row}, position {self.position}): the reference's "
                f"{self.quantity} {self.margin:.6g} against the bound {self.bound:.6g} (eps {self.error:.6g}), "
                f"{'within' if self.within else 'outside'} the budget; {rejoin}")


@dataclass
class CaseFlips:
    """A case's flips: judged or why not, the port's dtype, its numeric error, the flips and the forks."""

    dtype: str
    error: float | None
    judged: bool
    why_unjudged: str | None = None
    flips: list[Flip] = field(default_factory=list)
    forks: int = 0  # rows whose text forked or ended apart after a flip (their later steps not compared)
    case: dict | None = None
    rejoin_within: int | None = None  # the k its position flips must rejoin within (None: before the end)

    def failures(self) -> list[Flip]:
        """Flips outside the budget, and flips whose wake did not close (rejoined, forked, ended apart) within
        ``rejoin_within`` steps (before a side ended, where None)."""
        k = self.rejoin_within
        late = lambda f: f.rejoin is None or (k is not None and f.rejoin > k)
        return [f for f in self.flips if not f.within or late(f)]


def committing(trace, row: int) -> list[tuple[int, dict]]:
    """(step index, {position: token}) of the steps in which ``row`` committed something (SQ0.5)."""
    return [(i, dict(zip(s.positions[row], s.tokens[row]))) for i, s in enumerate(trace.steps) if s.positions[row]]


def wake_end(ours: list, theirs: list, i: int, j: int, before: dict) -> tuple[int, int, str] | None:
    """The first (i', j') from the flip step (i, j) where the canvases after each side's step are equal
    ("rejoined") or hold other tokens at a position both committed ("forked": an absorbing canvas keeps them), the
    side with fewer committed positions advanced (both when equal; the other where one has ended); None when both
    end first."""
    a, b = {**before, **ours[i][1]}, {**before, **theirs[j][1]}
    while a != b:
        if any(a[p] != b[p] for p in a.keys() & b.keys()):
            return i, j, "forked"
        grow_a = len(a) <= len(b) and i + 1 < len(ours) or j + 1 >= len(theirs)
        grow_b = len(b) <= len(a) and j + 1 < len(theirs) or i + 1 >= len(ours)
        if (grow_a and i + 1 >= len(ours)) or (grow_b and j + 1 >= len(theirs)):
            return None
        i, j = i + grow_a, j + grow_b
        a.update(ours[i][1] if grow_a else {})
        b.update(theirs[j][1] if grow_b else {})
    return i, j, "rejoined"


def ended_apart(ours: list, theirs: list, i: int, j: int, before: dict, prompt_length: int):
    """Where both sides ended after the flip step (i, j) on canvases that differ only at prompt masks one side
    filled and the other left (infilling: the rule fills them by rank, never by obligation): (the last steps,
    "ended apart"); else None."""
    a, b = dict(before), dict(before)
    for _, commits in ours[i:]:
        a.update(commits)
    for _, commits in theirs[j:]:
        b.update(commits)
    apart = a.keys() ^ b.keys()
    if all(a[p] == b[p] for p in a.keys() & b.keys()) and all(p < prompt_length for p in apart):
        return len(ours) - 1, len(theirs) - 1, "ended apart"
    return None


def row_flips(ours_trace, theirs_trace, row: int, judge, prompt_length: int = 0) -> tuple[list[Flip], bool]:
    """Row ``row``'s flips (``judge(step, joined, a, b)`` -> the flips of one flip step) and whether its texts
    differ for good after a flip (forked, or ended apart at prompt masks; ``prompt_length`` the canvas's)."""
    ours, theirs = committing(ours_trace, row), committing(theirs_trace, row)
    flips, joined, i, j = [], {}, 0, 0
    while i < len(ours) and j < len(theirs):
        if ours[i][1] == theirs[j][1]:
            joined.update(ours[i][1])
            i, j = i + 1, j + 1
            continue
        found = judge(ours[i][0], joined, ours[i][1], theirs[j][1])
        flips += found
        meet = wake_end(ours, theirs, i, j, joined) or ended_apart(ours, theirs, i, j, joined, prompt_length)
        for flip in found:
            flip.rejoin, flip.wake = (None, "open") if meet is None else (max(meet[0] - i, meet[1] - j), meet[2])
        if meet is None or meet[2] != "rejoined":  # the texts differ for good: later steps are not compared
            return flips, meet is not None
        for k in range(i, meet[0] + 1):
            joined.update(ours[k][1])
        i, j = meet[0] + 1, meet[1] + 1
    if i < len(ours) or j < len(theirs):  # one side commits more: it ends on another canvas
        step, extra = ours[i] if i < len(ours) else theirs[j]
        flips.append(Flip(row, step, min(extra), "end", "commits one side alone made", math.inf, 0.0, 0.0, False))
    return flips, False


@dataclass
class FlipContext:
    """What judging one case's flips needs: veridec's model and the case's tensors (for the replayed scores of
    positions only the port committed), the reference's decode, the score, ``eps`` and the vocabulary size."""

    model: object
    prompt: torch.Tensor  # [B, P]
    mask: torch.Tensor | None  # [B, P]
    trace: object  # the reference's
    length: int  # the canvas's
    score: FlipScore
    error: float

    @property
    def score_bound(self) -> float:
        return SCORE_BOUNDS[self.score.score](self.error, self.model.vocab_size)


def replayed_score(context: FlipContext, joined: dict, row: int, position: int) -> float:
    """The reference's score at ``position`` on the canvas it held before the flip step (the initial canvas with
    the joined commits): one full forward of veridec's model, float64 softmax."""
    model = context.model
    canvas, full_mask = initial_canvas(model, context.prompt, context.mask, context.length - context.prompt.shape[1],
                                       model.special.mask_id)  # [B, L]
    for where, token in joined.items():
        canvas[row, where] = token
    with torch.no_grad():
        logits = model(canvas, attention_mask=full_mask).logits[row, position].double()  # [V]
    probs = logits.softmax(-1)
    top = probs.topk(2).values
    return {"probability": top[0], "probability margin": top[0] - top[1],
            "entropy": (probs * torch.log(probs + 1e-10)).sum()}[context.score.score].item()


def position_margin(context: FlipContext, record, row: int, score: float, ours: bool) -> tuple[str, float, float]:
    """(quantity, margin, bound) of a position flip at a position of ``score`` that the reference committed
    (``ours``) or left: its distance to the threshold (bound once the score's), and, where a rank decided (no
    threshold, or the one commit a threshold rule forces), to the boundary of the reference's ranking (the
    strongest candidate it left, or its weakest commit; bound twice the score's); the closest to its bound."""
    delta, threshold = context.score_bound, context.score.threshold
    weak, gap = min(record.confidences[row]), record.selection_gaps[row]
    options = []
    if threshold is not None:
        options.append(("score - threshold", abs(score - threshold), delta))
    if threshold is None or weak < threshold:
        if not ours:
            options.append(("weakest commit - score", abs(weak - score), 2 * delta))
        elif math.isfinite(gap):
            options.append(("score - strongest candidate left", abs(score - (weak - gap)), 2 * delta))
    return min(options, key=lambda o: o[1] - o[2], default=("no margin recorded", math.inf, 2 * delta))


def step_flips(context: FlipContext, row: int, step: int, joined: dict, ours: dict, theirs: dict) -> list[Flip]:
    """The decision flips of one flip step: each position whose commit differs from the joined state's."""
    record, flips = context.trace.steps[step], []
    for position in sorted(p for p in ours.keys() | theirs.keys() if ours.get(p) != theirs.get(p)):
        if position in ours and position in theirs:
            margin = record.margins[row][record.positions[row].index(position)]
            quantity, bound, kind = "logit gap", logit_gap_bound(context.error), "token"
        else:
            score = record.confidences[row][record.positions[row].index(position)] if position in ours else \
                replayed_score(context, joined, row, position)
            quantity, margin, bound = position_margin(context, record, row, score, position in ours)
            kind = "position"
        flips.append(Flip(row, step, position, kind, quantity, margin, bound, context.error, margin <= bound))
    return flips


def case_flips(context: FlipContext | None, theirs_trace, dtype: str, why_unjudged: str | None = None) -> CaseFlips:
    """A case's flips, every row walked (``row_flips``); unjudged (with why) without a context."""
    if context is None:
        return CaseFlips(dtype, None, False, why_unjudged)
    found = CaseFlips(dtype, context.error, True)
    for row in range(context.trace.batch_size):
        flips, forked = row_flips(context.trace, theirs_trace, row,
                                  lambda step, joined, a, b, row=row: step_flips(context, row, step, joined, a, b),
                                  context.prompt.shape[1])
        found.flips += flips
        found.forks += forked
    return found


def flip_metrics(cases: list[CaseFlips]) -> dict:
    """Per dtype: cases judged and unjudged (with why, counted), flips (token, position, end), within the budget,
    forks, the largest eps and rejoin distance (k measured), and the first three failing flips with their case."""
    by_dtype = {}
    for case in cases:
        entry = by_dtype.setdefault(case.dtype, {"cases_judged": 0, "cases_unjudged": 0, "flips": 0,
                                                 "token_flips": 0, "position_flips": 0, "end_flips": 0,
                                                 "within_budget": 0, "forks": 0, "max_error": None,
                                                 "k_measured": None, "unjudged_why": {}, "failures": []})
        entry["cases_judged" if case.judged else "cases_unjudged"] += 1
        if not case.judged:
            entry["unjudged_why"][case.why_unjudged] = entry["unjudged_why"].get(case.why_unjudged, 0) + 1
            continue
        entry["max_error"] = max(entry["max_error"] or 0.0, case.error)
        entry["flips"] += len(case.flips)
        entry["forks"] += case.forks
        for flip in case.flips:
            entry[f"{flip.kind}_flips"] += 1
            entry["within_budget"] += flip.within
            if flip.rejoin is not None:
                entry["k_measured"] = max(entry["k_measured"] or 0, flip.rejoin)
        entry["failures"] += [{"case": case.case, **asdict(f)} for f in case.failures()]
    for entry in by_dtype.values():
        entry["failing"], entry["failures"] = len(entry["failures"]), entry["failures"][:3]
    return {"rejoin_within": cases[0].rejoin_within if cases else None, "by_dtype": by_dtype}


def judged_flips(setup, case: dict, ours, theirs, prompt: torch.Tensor, mask) -> CaseFlips:
    """One case's flips under ``setup`` (a CheckSetup with a candidate model): unjudged, with why, where the
    family's score says so, a side has no commit order, or the port's calls measured no error."""
    dtype = f"{_dtype_name(setup.candidate_model)} vs {str(setup.model.dtype).removeprefix('torch.')}"
    score = setup.goal.family.flip_score(case["settings"])
    why = score if isinstance(score, str) else None
    if why is None and (ours.trace is None or theirs.trace is None or theirs.error is not None):
        why = "no commit order on one side (it failed, or its calls show none)"
    if why is None and (ours.trace.events is not None or ours.stalled):
        why = "revocable commits or a stalled reference: its commits are not final"
    if why is None and not theirs.drift:
        why = "no call of the port measured against the reference's model"
    if why is None and case.get("attention_mask") is not None:
        why = "a padded case: the port's drift is measured without its attention mask (EC9)"
    if why is not None:
        return CaseFlips(dtype, None, False, why, case=case, rejoin_within=setup.flip_rejoin)
    context = FlipContext(setup.model, prompt, mask, ours.trace, ours.canvas.shape[1], score, max(theirs.drift))
    found = case_flips(context, theirs.trace, dtype)
    found.case, found.rejoin_within = case, setup.flip_rejoin
    return found


def _dtype_name(module) -> str:
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), None)
    return "no floating parameters" if dtype is None else str(dtype).removeprefix("torch.")
