"""FDFO replay (spec/engines.md EN2): SGLang's first-done-first-out mode (``--dllm-fdfo``,
``DllmAlgorithm._run_fdfo``). Every scheduler round is one forward and one ``step`` over the rows still decoding,
each at its own block and step: a row whose step says done emits its block and starts its next one in the next
round with a fresh state (``init_step_state`` over that round's batch, taken for the fresh rows only); the others
carry their state. The rule of each row lives as long as its block."""

from __future__ import annotations

from .engines import HARNESS_STEPS, _Diverged, _Round


def fdfo_rounds(run) -> None:
    carried, rules, seen, taken = {}, {}, {}, {}
    while True:
        rows = [r for r, canvas in enumerate(run.canvases) if run.next_block[r] < canvas.numel() // run.size]
        if not rows:
            return
        rnd = _Round(run, rows)
        fresh = [r for r in rows if r not in carried]
        for r in fresh:
            rules[r], seen[r], taken[r] = run.rule.rule(run.config, run.mask_id), set(), 0
        rnd.rules, rnd.seen = [rules[r] for r in rows], [seen[r] for r in rows]
        states = [carried.get(r) for r in rows]
        if fresh:
            initial = rnd.initial_states()
            states = [initial[i] if r not in carried else states[i] for i, r in enumerate(rows)]
        done = rnd._step(0, rnd._forward(), states)
        for i, r in enumerate(rows):
            _advance(run, r, bool(done[i]), states[i], carried, taken, getattr(rules[r], "stalled", False))
        run.round += 1


def _advance(run, row: int, done: bool, state, carried: dict, taken: dict, stalled: bool) -> None:
    """A done row emits its block (its next one starts fresh); the others carry their state, at most 4 b + 64
    steps per block (then ``stalled`` where the rule stalled, else the divergence ``step cap``: the rule agreed
    the row was not done; FDFO itself has no cap)."""
    if done:
        carried.pop(row, None)
        run.next_block[row] += 1
        return
    carried[row], taken[row] = state, taken[row] + 1
    if taken[row] >= 4 * run.size + HARNESS_STEPS:
        said = "the rule stalls (back to a block and state it had seen)" if stalled else "neither is the rule"
        raise _Diverged(run.divergence("stalled" if stalled else "step cap", taken[row], row, f"the row is not done "
                                       f"after {taken[row]} steps of its block (FDFO has no cap) and {said}"))
