"""Brute-force output law of a sampled, confidence-ranked decode on an oracle model (spec/theorems.md TD1, TD3 (d)).

Written from spec/ alone (theorems.md TD1/TD3, parallel.md P1-P3/P9/P11, sequential.md SQ1.2-SQ1.4,
notation.md N3-N5, models.md M8), never from production's ``proofs_checks/laws.py``, ``rules/`` or ``reference/``.
Like the other modules of ``tests/oracles`` it imports nothing from ``veridec`` and no torch: the model is
given as a plain function ``logits_of(canvas) -> [[float] * (V + 1)] * L`` (token-aligned logits of every
position given the canvas, N3; the test file builds it from an oracle's ``__call__``).

What is enumerated, one row, no masks in the prompt:

* Canvas ``[prompt | m x gen_length]`` (SQ1.1, P11); blocks ``[s, e)`` with ``s = P + b * block_length``,
  decoded left to right (SQ1.2, P11); inside a block, one step after another while the block holds a mask
  (P11, FD1).
* One step (P1, SQ1.4): the candidates are every masked position before the block's end ``e`` (P1, P11,
  SQ1.4.6). Each candidate ``j`` draws a proposal ``x_j ~ softmax(l_j / T)`` independently of the others
  (P1.1 / SQ1.4.2: LLaDA's Gumbel-max is an exact sampler of that law; TD1, TD3 "proposals are
  independent"). Its confidence is the *untempered* probability ``c_j = softmax(l_j)[x_j]`` (P1.2, FD2, N4
  "the confidence of the sampled token p_i(x~_i)", TD3 ``c_j = p_j(x^_j)``). The candidates are ranked by
  decreasing ``c``, ties to the lowest position (P1.3, N5, SQ0.4, TD3).
* Selection (a count per step, P1.4): the first ``k`` ranked candidates take their proposals; the others stay
  masked (TD3 (d): "the others masked again").
  - ``("quota", S)``: LLaDA's schedule (SQ1.3, P9): ``M`` = masks in the block at its start, step ``i`` of
    the block (counted from 0, restarting at every block) commits ``k_i = floor(M / S) + [i' < M mod S]``,
    ``i' = min(i, S - 1)``, capped by the number of candidates.
  - ``("topk", k)``: ``min(k, N)`` (P2).
  - ``("threshold", tau)``: the top-1 and every other candidate with ``c >= tau`` (P3, FD3, TD3 (b):
    inclusive), i.e. ``min(max(1, #{c >= tau}), N)``.
* ``T = 0``: the proposal is the first maximum of the logits with probability 1 (P1.1, SQ0.4): the greedy
  decode's point mass (TD1).

The law is computed by walking EVERY proposal row of every step (``V'^m`` rows for ``m`` candidates, ``V'``
the ids of positive proposal probability), multiplying the row's probability along the path, following each
row to the end of the decode, and adding the path's probability to its final generated tuple. Exponential on
purpose: for tiny sizes only (V <= 3, gen_length <= 4). The only cache is the model's answer per canvas
(its logits' two softmaxes: a deterministic function of the canvas); no law is memoized and no branches are merged.
"""

from __future__ import annotations

import itertools
import math

MAX_ROWS_PER_STEP = 4096  # a guard against calling the brute force on sizes it is not meant for


def softmax(logits: list[float], temperature: float = 1.0) -> list[float]:
    """float64 softmax of ``logits / temperature`` (max subtracted first; -1e30 logits get weight 0, M8)."""
    scaled = [value / temperature for value in logits]
    top = max(scaled)
    weights = [math.exp(value - top) for value in scaled]
    total = sum(weights)
    return [weight / total for weight in weights]


def proposal_law(logits: list[float], temperature: float) -> list[float]:
    """The law of one position's proposal over the ids (P1.1, SQ1.4.2): softmax(l / T), or at T = 0 the point
    mass on the first maximum of ``l`` (token ties: first maximum, SQ0.4)."""
    if temperature == 0:
        first = logits.index(max(logits))
        return [1.0 if v == first else 0.0 for v in range(len(logits))]
    return softmax(logits, temperature)


def quota(masks_at_start: int, steps_per_block: int, block_step: int) -> int:
    """LLaDA's k_i (SQ1.3), the last quota repeating past the schedule (P9, FD3)."""
    i = min(block_step, steps_per_block - 1)
    return masks_at_start // steps_per_block + (1 if i < masks_at_start % steps_per_block else 0)


def commit_count(rule: tuple, ranked_confidences: list[float], masks_at_start: int, block_step: int) -> int:
    """How many of the ranked candidates commit (P1.4): P9's quota, P2's top-k or P3's inclusive threshold."""
    kind, parameter = rule
    n = len(ranked_confidences)
    if kind == "quota":
        return min(quota(masks_at_start, parameter, block_step), n)
    if kind == "topk":
        return min(parameter, n)
    if kind == "threshold":
        # READING: P3 "the top-1 and every other candidate with c >= tau" (inclusive=True, the default and
        # TD3 (b)'s "c >= tau passes"); the passing candidates are a prefix of the ranking.
        passing = sum(1 for c in ranked_confidences if c >= parameter)
        return min(max(1, passing), n)
    raise ValueError(f"unknown rule {rule!r}")


def brute_law(logits_of, prompt: list[int], gen_length: int, block_length: int, rule: tuple,
              temperature: float, mask_id: int) -> dict[tuple, float]:
    """{generated tokens: probability} of the decode described in the module docstring.

    ``logits_of(canvas tuple)`` returns the token-aligned logits ``[L][V + 1]`` (N3, M8); ``rule`` is
    ``("quota", steps_per_block)``, ``("topk", k)`` or ``("threshold", tau)``; ``mask_id`` the mask token.
    """
    if gen_length % block_length:
        raise ValueError("gen_length must be divisible by block_length (SQ1.2)")
    if mask_id in prompt:
        raise ValueError("no masks in the prompt (TD1's limit)")
    start = len(prompt)
    blocks = gen_length // block_length
    answers: dict[tuple, tuple[list[list[float]], list[list[float]]]] = {}

    def model(canvas: tuple) -> tuple[list[list[float]], list[list[float]]]:
        """Per position: the proposal law softmax(l / T) and the model's untempered probabilities softmax(l)."""
        if canvas not in answers:
            logits = [list(map(float, row)) for row in logits_of(canvas)]
            answers[canvas] = ([proposal_law(row, temperature) for row in logits], [softmax(row) for row in logits])
        return answers[canvas]

    law: dict[tuple, float] = {}

    def block_masks(canvas: tuple, block: int) -> int:
        s, e = start + block * block_length, start + (block + 1) * block_length
        return sum(1 for i in range(s, e) if canvas[i] == mask_id)

    def decode(canvas: tuple, block: int, block_step: int, masks_at_start: int, weight: float) -> None:
        """Follow one path: ``canvas`` reached with probability ``weight`` before step ``block_step`` (from 0) of
        ``block``, which held ``masks_at_start`` masks when it began."""
        if weight == 0.0:
            return
        # A finished block hands over to the next one (SQ1.2), whose step count restarts at 0 and whose M is
        # counted now (SQ1.3); a block without masks takes no step (SQ1.3, P11).
        while block < blocks and block_masks(canvas, block) == 0:
            block, block_step = block + 1, 0
            masks_at_start = block_masks(canvas, block) if block < blocks else 0
        if block == blocks:  # every block done: the decode's output
            output = tuple(canvas[start:])
            law[output] = law.get(output, 0.0) + weight
            return
        if block_step > block_length + (rule[1] if rule[0] == "quota" else 0):
            # Cannot happen with the oracles (every step but the quota's empty ones commits, the quota's sum to M);
            # a guard so that a wrong rule fails instead of recursing for ever.
            raise RuntimeError(f"stalled: block {block} still has masks after {block_step} steps")
        end = start + (block + 1) * block_length
        # READING: P1/P11/SQ1.4.6: candidates are *every* mask before the block's end; with no prompt masks
        # and earlier blocks finished these are the block's own masks.
        candidates = [j for j in range(end) if canvas[j] == mask_id]
        proposals, probabilities = model(canvas)
        # READING: the confidence is the UNtempered probability of the proposed token, softmax(l)[x^]
        # (P1.2, FD2, N4, TD3), not its probability under softmax(l / T) (which only draws the proposal).
        # READING: ids of proposal probability 0 (the mask id, M8; impossible tokens) are left out of the rows:
        # their rows have probability 0 and add nothing to any outcome.
        support = {j: [v for v, q in enumerate(proposals[j]) if q > 0.0] for j in candidates}
        rows = math.prod(len(support[j]) for j in candidates)
        if rows > MAX_ROWS_PER_STEP:
            raise ValueError(f"{rows} proposal rows in one step: too large for the brute force")
        for row in itertools.product(*(support[j] for j in candidates)):
            proposal = dict(zip(candidates, row))
            row_weight = math.prod(proposals[j][proposal[j]] for j in candidates)  # independent draws (TD1)
            confidence = {j: probabilities[j][proposal[j]] for j in candidates}
            # Decreasing confidence, ties to the lowest position (P1.3, N5, TD3).
            ranked = sorted(candidates, key=lambda j: (-confidence[j], j))
            k = commit_count(rule, [confidence[j] for j in ranked], masks_at_start, block_step)
            after = list(canvas)
            for j in ranked[:k]:
                # READING: a proposed mask id would leave the position masked (FD3); with the oracles it has
                # probability 0 and is never enumerated.
                after[j] = proposal[j]
            decode(tuple(after), block, block_step + 1, masks_at_start, weight * row_weight)

    canvas = tuple(prompt) + (mask_id,) * gen_length
    decode(canvas, 0, 0, block_masks(canvas, 0), 1.0)
    return law
