"""The exactness table's rows of the parallel presets (spec/exactness.md E2): each variant (the reference, the
optimized decoder without cache, with the prefix and the dual cache) decodes the table's batch and is held to the
reference's decode of the same batch: commit order, tokens, and the logits at each commit against a full forward
of the canvas that step saw.
"""

from __future__ import annotations

import torch

from veridec.canvas import initial_canvas
from veridec.compare import compare_traces
from veridec.rules.presets import PRESETS

from .rows import RowKind, Sides, TableInputs, sequential_seconds
from .workloads import hmm_nll, row_tokens_per_step

VARIANTS = {"reference": "E", "optimized": "E", "prefix": "A", "dual": "A"}


def batch_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """The variant's decode of the batch (timed) and the reference's, each kept as this run's eager decode (the
    reference decoded once per decoder; the compiled rows reuse the others)."""
    decoded = inputs.eager.setdefault(decoder, {})
    out, seconds = inputs.decode(kind.label, PRESETS[decoder])
    decoded[kind.label] = out
    if "reference" not in decoded:
        decoded["reference"] = inputs.decode("reference", PRESETS[decoder])[0]
    return Sides(decoded["reference"], out, seconds)


def replayed(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The batch row: commit order and tokens against the reference, the logits replayed on full forwards."""
    reference, out, (prompt, mask) = sides.expected, sides.measured, (inputs.prompt, inputs.mask)
    comparison = compare_traces(reference.trace, out.trace, reference.canvas, out.canvas)
    attention = getattr(PRESETS[decoder], "needs_attention", False)
    error = 0.0 if kind.label == "reference" else \
        replay_logit_error(inputs.model, prompt, mask, out, inputs.gen_length, attention)
    nll = hmm_nll(out.canvas, mask, prompt.shape[1], inputs.gen_length) if inputs.model_name == "hmm" else None
    counters, n = out.trace.counters, prompt.shape[0]
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(comparison.commit_order_match_rate, 4),
                token_match=round(comparison.token_match_rate, 4), max_logit_error=error,
                full_forwards=counters.full_forwards, positions_per_prompt=round(counters.query_positions / n, 1),
                tokens_per_step=round(row_tokens_per_step(out.trace), 3), seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(sequential_seconds(inputs) / sides.seconds, 2), hmm_nll_per_token=nll,
                logit_tolerance=None)


def replay_logit_error(model, prompt, mask, decoded, gen_length: int, attention: bool) -> float:
    """Max |logit| difference between the decode's recorded logits at each step's committed positions and a
    full forward of the canvas that step saw (``attention``: the forward that also returns attention weights,
    whose explicit softmax rounds differently from SDPA, as the decode used)."""
    x, attention_mask = initial_canvas(model, prompt, mask, gen_length, model.special.mask_id)
    worst = 0.0
    for step in decoded.trace.steps:
        if not any(step.positions):
            continue
        logits = model(x, attention_mask=attention_mask, output_attentions=attention).logits  # [B, L, V]
        for row, (positions, recorded) in enumerate(zip(step.positions, step.logits)):
            if positions:
                full = logits[row, positions].double()
                recorded = torch.tensor(recorded, dtype=torch.float64, device=full.device)
                worst = max(worst, (recorded - full).abs().max().item())
                x[row, positions] = torch.tensor(step.tokens[row], dtype=torch.long, device=x.device)
    return worst


PARALLEL = tuple(RowKind(variant, tier, batch_sides, replayed) for variant, tier in VARIANTS.items())
