"""The exactness table's rows of speculative decoding (spec/speculative.md SP3 tier E, SP4 tier A): each prompt
decoded alone by the base decoder R (policy none: the reference; dual: the dual cache) and by its speculative
form with a draft tree; logits compared at the steps both took, within the measured rounding of R's forward
(``rows.packing_tolerance``).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from veridec.compare import compare_traces
from veridec.optimized.parallel import decode as optimized_decode
from veridec.optimized.speculative import decode as speculative_decode
from veridec.reference.parallel import decode as reference_decode
from veridec.rules.presets import PRESETS

from .rows import RowKind, Sides, TableInputs, packing_tolerance, sequential_seconds


class DraftTree(NamedTuple):
    """A speculative row's base decoder, its cache policy, the draft tree (width, depth, lookahead blocks), tier."""

    decoder: str
    cache: str
    width: int
    depth: int
    lookahead: int
    tier: str


SPECULATIVE = [DraftTree("sequential", "none", 3, 3, 0, "E"), DraftTree("sequential", "dual", 3, 3, 0, "E"),
               DraftTree("fastdllm", "none", 2, 2, 0, "E"), DraftTree("fastdllm", "dual", 2, 2, 0, "E"),
               DraftTree("fastdllm", "dual", 2, 2, 1, "A")]


def speculative_variant(tree: DraftTree) -> str:
    """A speculative row's label: its cache policy and tree."""
    _, cache, width, depth, lookahead, _ = tree
    return f"spec-{cache} W{width}D{depth}" + (f" inter{lookahead}" if lookahead else "")


def alone_sides(inputs: TableInputs, decoder: str, kind: RowKind) -> Sides:
    """Each prompt decoded alone by the base decoder and by its speculative form (timed)."""
    tree = kind.settings["tree"]
    kw = dict(rule=PRESETS[decoder], gen_length=inputs.gen_length, block_length=inputs.block_length,
              record_logits=True)
    bases, drafted, seconds = [], [], 0.0
    for single in inputs.singles():
        bases.append(reference_decode(inputs.model, single, **kw) if tree.cache == "none" else
                     optimized_decode(inputs.model, single, cache="dual", **kw))
        start = time.perf_counter()
        drafted.append(speculative_decode(inputs.model, single, cache=tree.cache, width=tree.width,
                                          depth=tree.depth, lookahead=tree.lookahead, **kw))
        seconds += time.perf_counter() - start
    return Sides(bases, drafted, seconds)


def within_rounding(inputs: TableInputs, decoder: str, kind: RowKind, sides: Sides) -> dict:
    """The speculative row: per prompt, the same commit order up to a tie within the measured rounding."""
    tol = packing_tolerance(inputs)
    matches, tokens, per_call, error, full, positions = [], [], [], 0.0, 0, 0
    for base, spec in zip(sides.expected, sides.measured):
        comparison = compare_traces(base.trace, spec.trace, base.canvas, spec.canvas, numeric_error=tol)
        matches.append(comparison.equivalent)  # the same commit order, or the first difference a tie within tol
        tokens.append(comparison.token_match_rate)
        error = max(error, comparison.max_logit_error or 0.0)
        counters = spec.trace.counters
        full, positions = full + counters.full_forwards, positions + counters.query_positions
        per_call.append(spec.trace.tokens_committed() / counters.model_calls)
    n = len(sides.measured)
    return dict(model=inputs.model_name, decoder=decoder, variant=kind.label, tier=kind.tier, prompts=n,
                commit_order_match=round(sum(matches) / n, 4), token_match=round(sum(tokens) / n, 4),
                max_logit_error=error, full_forwards=full, positions_per_prompt=round(positions / n, 1),
                tokens_per_step=round(sum(per_call) / n, 3), seconds=round(sides.seconds, 3),
                speedup_vs_sequential=round(sequential_seconds(inputs) / sides.seconds, 2), hmm_nll_per_token=None,
                logit_tolerance=tol)


SPECULATIVE_KINDS = tuple(RowKind(speculative_variant(tree), tree.tier, alone_sides, within_rounding, {"tree": tree})
                          for tree in SPECULATIVE)
