"""Compiled rows of the exactness table (``veridec exactness --compile BACKEND``, issue 26): each optimized
variant of a decoder (no cache, prefix, dual) decoded again with the model's forwards under ``torch.compile``
(``veridec.optimized.compiled``) and held to the eager decode of the same variant: the same commit order and
tokens, and the logits recorded at each commit equal to eager's (``aot_eager`` runs the eager kernels: tier E)
or within the difference reported (``inductor`` fuses operators and rounds differently: tier A).
"""

from __future__ import annotations

import torch

from veridec.compare import compare_traces
from veridec.rules.presets import PRESETS

from .workloads import row_tokens_per_step, run_variant

COMPILED = {"optimized+compiled": "optimized", "prefix+compiled": "prefix", "dual+compiled": "dual"}
BACKENDS = {"aot_eager": "E", "inductor": "A"}  # backend -> the tier its rows are held to


def compiled_row(model_name: str, name: str, variant: str, backend: str, model, prompt, mask, gen_length: int,
                 block_length: int, sequential_seconds: float, eager=None) -> dict:
    """The row (``exactness.Row``'s fields) of ``name``'s ``variant`` (a key of ``COMPILED``) under ``backend``:
    compared with the eager decode of the same variant (``eager``: the table's own, else decoded here); timed
    after a first compiled decode that captures the graphs (compile time is not decode time)."""
    base, rule = COMPILED[variant], PRESETS[name]
    if eager is None:
        eager, _ = run_variant(model, base, rule, prompt, mask, gen_length, block_length)
    run_variant(model, base, rule, prompt, mask, gen_length, block_length, compile=backend)
    out, seconds = run_variant(model, base, rule, prompt, mask, gen_length, block_length, compile=backend)
    comparison = compare_traces(eager.trace, out.trace, eager.canvas, out.canvas)
    counters = out.trace.counters
    return dict(model=model_name, decoder=name, variant=variant, tier=BACKENDS[backend], prompts=prompt.shape[0],
                commit_order_match=round(comparison.commit_order_match_rate, 4),
                token_match=round(comparison.token_match_rate, 4),
                max_logit_error=recorded_logit_difference(eager.trace, out.trace),
                full_forwards=counters.full_forwards,
                positions_per_prompt=round(counters.query_positions / prompt.shape[0], 1),
                tokens_per_step=round(row_tokens_per_step(out.trace), 3), seconds=round(seconds, 3),
                speedup_vs_sequential=round(sequential_seconds / seconds, 2))


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
