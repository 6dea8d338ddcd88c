"""The replay's comparison (spec/engines.md): after each engine step, every row's block and done flag against
the veridec rule's, fed the same block and logits; the first difference named, typed where the engine states
it (``testing.families.sglang``'s ``Difference``), and every step kept in the transcript when asked."""

from __future__ import annotations

import torch

from .engines import Divergence, Position, _Diverged


def compare_step(rnd, step: int, before: torch.Tensor, logits: torch.Tensor, done: list[bool]) -> None:
    """rnd: the ``engines._Round``; before [B*b] the blocks the step was given, logits [B*b, V], done [B]."""
    run, count = rnd.run, len(rnd.rows)
    before, logits = before.view(count, run.size), logits.view(count, run.size, -1)  # [B, b], [B, b, V]
    after = rnd.input_ids.view(count, run.size)  # [B, b]
    ruled, seen = [], []
    for i in range(count):
        key = tuple(before[i].tolist())
        seen.append(key in rnd.seen[i])
        rnd.seen[i].add(key)
        ruled.append(rnd.rules[i].step(before[i], rnd.prompt_mask[i], logits[i]))
    entry = _entry(rnd, step, before, logits, after, done, ruled)
    if run.record:
        run.transcript.append(entry)
    for i, decided in enumerate(ruled):
        if not torch.equal(after[i], decided.tokens) or done[i] != decided.done:
            raise _Diverged(_divergence(rnd, step, i, before[i], logits[i], after[i], done[i], decided, seen[i],
                                        entry))


def _entry(rnd, step, before, logits, after, done, ruled) -> dict:
    """One step of the transcript: what the step was given and what both sides decided (JSON-ready)."""
    return {"round": rnd.run.round, "step": step, "rows": list(rnd.rows), "blocks": [rnd.run.next_block[r]
                                                                                      for r in rnd.rows],
            "input_ids": before.flatten().tolist(), "prompt_mask": rnd.prompt_mask.tolist(),
            "logits": logits.flatten(0, 1).tolist(),
            "engine": {"input_ids": after.flatten().tolist(), "done": list(done)},
            "reference": {"input_ids": torch.cat([d.tokens for d in ruled]).tolist(),
                          "done": [d.done for d in ruled]}}


def _divergence(rnd, step, i, before, logits, after, done, decided, seen, entry) -> Divergence:
    run, row = rnd.run, rnd.rows[i]
    positions = [_position(run, int(j), before, logits, after, decided) for j in
                 (after != decided.tokens).nonzero()[:, 0]]
    start = run.next_block[row] * run.size
    for p in positions:
        p.position += start
    if positions:
        said = "; ".join(f"position {p.position}: the engine {_said(p.engine_kind, p.engine_token, p.before)}, the "
                         f"rule {_said(p.reference_kind, p.reference_token, p.before)} (confidence {p.confidence:.6g}"
                         f"{'' if p.threshold is None else f', threshold {p.threshold:.6g}'})" for p in positions)
        kind = "decision"
    else:
        said = ("the engine says the row may emit (done=True) where the rule has not finished its block" if done else
                "the engine keeps the row stepping (done=False) where the rule has finished its block")
        kind = "done"
    return run.divergence(kind, step, row, f"{said}; margin {decided.margin:.3g}", positions=positions,
                          engine_done=done, reference_done=decided.done, margin=decided.margin,
                          block_seen_before=seen, record=entry)


def _position(run, j: int, before, logits, after, decided) -> Position:
    probs = torch.softmax(logits[j].double(), dim=-1)  # [V]
    old = int(before[j])
    threshold = run.config.get("threshold" if old == run.mask_id else "edit_threshold")
    return Position(j, old, int(after[j]), int(decided.tokens[j]), _kind(old, int(after[j]), run.mask_id),
                    _kind(old, int(decided.tokens[j]), run.mask_id), float(probs.max()),
                    None if isinstance(threshold, dict) else threshold)


def _kind(old: int, new: int, mask_id: int) -> str:
    if new == old:
        return "kept"
    if old == mask_id:
        return "commit"
    return "revoke" if new == mask_id else "edit"


def _said(kind: str, token: int, old: int) -> str:
    return {"kept": f"kept {old}", "commit": f"committed {token}", "revoke": f"revoked {old}",
            "edit": f"edited {old} to {token}"}[kind]


def explained(divergence: Divergence, differences) -> str | None:
    """The name of the first stated difference that accounts for ``divergence``, or None; "stalled" where the
    rule itself never finishes the case (no decision to hold the engine to: counted apart, never a pass)."""
    if divergence.kind == "stalled":
        return "stalled"
    if divergence.kind == "contract":
        return None
    return next((d.name for d in differences if d.explains(divergence)), None)
