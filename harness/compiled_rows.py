"""Compiled rows of the exactness table (``veridec exactness --compile BACKEND``, issue 26): each optimized
variant of a decoder (no cache, prefix, dual) decoded again with the model's forwards under ``torch.compile``
(``veridec.optimized.compiled``) and held to the eager decode of the same variant (``compiled_kinds``): the same
commit order and tokens, and the logits recorded at each commit equal to eager's (``aot_eager`` runs the eager
kernels: tier E) or within the difference reported (``inductor`` fuses operators and rounds differently: tier A).
"""

from __future__ import annotations

import torch

from veridec.compare import compare_traces
from veridec.rules.presets import PRESETS

from .rows import RowKind, Sides, TableInputs, sequential_seconds
from .workloads import row_tokens_per_step

COMPILED = {"optimized+compiled": "optimized", "prefix+compiled": "prefix", "dual+compiled": "dual"}
BACKENDS = {"aot_eager": "E", "inductor": "A"}  # backend -> the tier its rows are held to


def compiled_kinds(backend: str) -> tuple[RowKind, ...]:
    """The compiled kinds under ``backend``: each of ``COMPILED``'s variants, held to its eager variant."""
    return tuple(RowKind(variant, BACKENDS[backend], compiled_sides, held_to_eager, {"eager": eager})
                 for variant, eager in COMPILED.items())


def compiled_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The eager decode of the same variant (the table's own from this run, else decoded here) and the compiled
    decode, timed after a first compiled decode that captures the graphs (compile time is not decode time)."""
    base, rule = kind.settings["eager"], PRESETS[decoder]
    eager = inputs.eager.get(decoder, {}).get(base)
    if eager is None:
        eager, _ = inputs.decode(base, rule)
    inputs.decode(base, rule, compile=inputs.compile)
    out, seconds = inputs.decode(base, rule, compile=inputs.compile)
    return Sides(eager, out, seconds)


def held_to_eager(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The compiled row: commit order and tokens against the eager decode, the recorded logits' difference."""
    eager, out = sides.expected, sides.measured
    comparison = compare_traces(eager.trace, out.trace, eager.canvas, out.canvas)
    counters, n = out.trace.counters, inputs.prompt.shape[0]
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(comparison.commit_order_match_rate, 4),
                token_match=round(comparison.token_match_rate, 4),
                max_logit_error=recorded_logit_difference(eager.trace, out.trace),
                full_forwards=counters.full_forwards, positions_per_prompt=round(counters.query_positions / n, 1),
                tokens_per_step=round(row_tokens_per_step(out.trace), 3), seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(sequential_seconds(inputs) / sides.seconds, 2))


def recorded_logit_difference(one, other) -> float:
    """Max |logit| difference between two traces' recorded logits where a step commits the same positions of a
    row (where the commit orders part, the rows' commit-order match says so)."""
    worst = 0.0
    for first, second in zip(one.steps, other.steps):
        for positions, logits, others, other_logits in zip(first.positions, first.logits, second.positions,
                                                           second.logits):
            if positions and positions == others:
                a = torch.tensor(logits, dtype=torch.float64, device="cpu")  # [n, V]
                b = torch.tensor(other_logits, dtype=torch.float64, device="cpu")  # [n, V]
                worst = max(worst, (a - b).abs().max().item())
    return worst
