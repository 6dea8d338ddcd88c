"""The production parallel rules held against the independent spec oracle ``tests/oracles/parallel.py``
(spec/parallel.md P1-P12, spec/fastdllm.md FD3, spec/theorems.md TC1).

What is compared:
- one step (P1) of TopK, Threshold (certified too), Factor, Quota, LocalLeap (certified too) and EB-Sampler on
  generated logits (float64 and float32, V from 2, -inf entries, saturated rows, exact copies for ties), canvases
  and candidates (all, one, some, none), T = 0 and T > 0, both remasking modes. The uniforms are regenerated
  from the seeded generator production draws from (float64 Gumbel [B, W, V], then float32 remask [B, W]) and
  given to the oracle. Hyperparameters are drawn at the realized confidences (exactly equal, one ulp either
  side) and at generic values. Compared per row: the proposal, the confidences, p(x̂), the ranking, the committed
  positions in commit order, their tokens, the recorded ranking score, the choice logit, the canvas and the
  trace's record of the step (positions, tokens, scores, selection gap);
- KLASS over several steps sharing one state (windows at offsets, kept, nudged and new predictions, KL
  thresholds between the forward and the reverse KL, confidence levels at realized confidences), counters too;
- DAPD steps on symmetric dependencies with entries at the edge threshold and an ulp either side, and its
  dependency matrix from attention tensors (layers, averaging, symmetrization, query/key positions);
- EB-Sampler's prefix rule on dyadic entropies and the certified prefix (TC1) on dyadic probabilities in an
  order not by p, so that the sums hit gamma and 1 exactly;
- whole decodes: ``veridec.reference.parallel.decode`` and the optimized decoder without cache against the
  oracle's ``decode_reference`` for every preset and Quota, on random float64 transformers (LLaDA and Dream
  layouts, sharpened or not) and HMM oracles, left padding, masks inside the prompt, T = 0 and 0.7, both
  remasking modes; DAPD decodes with edges that come and go; decodes with mask-token proposals (Quota's longer
  budget); each row of a left-padded batch against the oracle decoding it alone;
- every worked example of the oracle, replayed against production;
- presets (P10), FastDLLMParams' rule choice (FD3) and the hyperparameter checks.

Float evaluation: the oracle sums with math.fsum, production with torch reductions, so values are compared to
1e-12 and exact boundaries are only drawn where both agree bit for bit. Where the two evaluations alone order two
candidates differently (a near-tie within an ulp, spec N5) the example is discarded: in a step test by comparing
the order relations, in a decode by re-running the oracle with production's rounding (``production_rounding``).

The disagreements these tests found were fixed in production (Factor's level was evaluated in float32, EB's
prefix sum as a total minus the entry, DAPD read a padded Dream row's first real token at the padding) or made
precise in spec/parallel.md (P6: entropy ties are ties of the computed values; P11: the stall budget).
"""

from __future__ import annotations

import itertools
import math
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import pytest
import torch
import veridec.reference.parallel as reference_module
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from oracles import parallel as O
from oracles.bridge import Draws, ListPredictor, close, examples, oracle_callable, production_rule, t64
from veridec.optimized.parallel import decode as optimized_decode
from veridec.reference.parallel import decode as reference_decode

from veridec.models import random_model
from veridec.models.interface import PredictorOutput
from veridec.models.tiny import never_predicts_mask
from veridec.oracles import HMMOracle
from veridec.rules.common import propose, stable_ranking
from veridec.rules.fastdllm import FastDLLMParams
from veridec.rules.parallel import (
    DAPD,
    KLASS,
    EntropyBounded,
    Factor,
    LocalLeap,
    Quota,
    Threshold,
    TopK,
    certified,
    new_state,
    symmetrized_dependency,
)
from veridec.rules.presets import PRESETS
from veridec.rules.step import parallel_step
from veridec.rules.view import StepView
from veridec.trace import Trace, record_step

INF = math.inf
NEG_INF = -math.inf


# ------------------------------------------------------------------------------------------------ helpers
# The oracle sums with math.fsum (correctly rounded), production with torch's float64 reductions: the same value up
# to a few ulps of the largest term. 1e-12 relative (about 4500 float64 ulps) with 1e-14 absolute (for values that
# round to 0) is a fixed multiple of float64's eps at the values' scale (probabilities, entropies, logits <= ~40).
FSUM = dict(rel=1e-12, abs_tol=1e-14)


def uniforms(seed: int, batch: int, width: int, vocab: int, temperature: float, remasking: str):
    """The draws production makes from ``torch.Generator().manual_seed(seed)`` in one step (P1, SQ1.4): float64
    Gumbel uniforms [B, W, V] when T > 0, then float32 remasking uniforms [B, W] for "random"."""
    gen = torch.Generator().manual_seed(seed)
    gumbel = torch.rand((batch, width, vocab), dtype=torch.float64, generator=gen).tolist() if temperature > 0 else None
    remask = torch.rand((batch, width), generator=gen).tolist() if remasking == "random" else None
    return gumbel, remask


def oracle_draw(seed: int):
    """The oracle decoder's ``draw``: the same generator stream production consumes, step after step."""
    gen = torch.Generator().manual_seed(seed)

    def draw(kind, shape):
        if kind == "gumbel":
            return torch.rand(shape, dtype=torch.float64, generator=gen).tolist()
        return torch.rand(shape, generator=gen).tolist()

    return draw


def up(x: float) -> float:
    return math.nextafter(x, INF)


def down(x: float) -> float:
    return math.nextafter(x, NEG_INF)


@dataclass
class Case:
    """One generated step: oracle-ready lists and the production tensors of the same values."""

    logits: list  # [B][W][V] floats (float32 values widened when the tensor is float32)
    logits_t: torch.Tensor
    canvas: list  # [B][W] ints
    candidates: list  # [B][W] bools
    temperature: float
    remasking: str
    seed: int
    mask_id: int

    @property
    def shape(self):
        return len(self.logits), len(self.logits[0]), len(self.logits[0][0])

    def draws(self):
        return uniforms(self.seed, *self.shape, self.temperature, self.remasking)

    def generator(self):
        return torch.Generator().manual_seed(self.seed)


ROW_KINDS = ["random", "random", "random", "copy", "flat", "saturated"]
LOGIT = st.one_of(st.floats(-4, 4, allow_nan=False), st.floats(-4, 4, allow_nan=False), st.just(NEG_INF))


@st.composite
def logit_rows(draw, batch: int, width: int, vocab: int) -> list:
    """[B][W][V] logits: random rows (with -inf entries), exact copies of earlier rows (exact confidence and
    entropy ties), flat rows (k equal logits, the rest -inf: p = 1/k exactly) and saturated rows (p = 1.0)."""
    rows, pool = [], []
    for _ in range(batch):
        row = []
        for _ in range(width):
            kind = draw(st.sampled_from(ROW_KINDS))
            if kind == "copy" and pool:
                r = list(draw(st.sampled_from(pool)))
            elif kind == "flat":
                k = draw(st.integers(1, vocab))
                r = draw(st.permutations([draw(st.sampled_from([0.0, 1.5, -2.0]))] * k + [NEG_INF] * (vocab - k)))
            elif kind == "saturated":
                r = draw(st.permutations([40.0] + [0.0] * (vocab - 1)))
            else:
                r = [draw(LOGIT) for _ in range(vocab)]
                if all(v == NEG_INF for v in r):
                    r[draw(st.integers(0, vocab - 1))] = draw(st.floats(-4, 4))
            pool.append(r)
            row.append(list(r))
        rows.append(row)
    return rows


@st.composite
def step_cases(draw, max_batch=3, max_width=8, vocabs=(2, 2, 3, 5), temperatures=(0.0, 0.0, 0.5, 1.0, 2.0)):
    batch, width = draw(st.integers(1, max_batch)), draw(st.integers(1, max_width))
    vocab = draw(st.sampled_from(vocabs))
    dtype = draw(st.sampled_from([torch.float64, torch.float64, torch.float32]))
    logits_t = torch.tensor(draw(logit_rows(batch, width, vocab)), dtype=dtype)
    mask = vocab  # outside the logits: a proposal is never the mask token
    canvas, candidates = [], []
    for _ in range(batch):
        mode = draw(st.sampled_from(["all", "all", "some", "some", "one", "none"]))
        if mode == "all":
            cand = [True] * width
        elif mode == "one":
            one = draw(st.integers(0, width - 1))
            cand = [i == one for i in range(width)]
        elif mode == "none":
            cand = [False] * width
        else:
            cand = [draw(st.booleans()) for _ in range(width)]
        # non-candidates: committed tokens or masks the step may not commit (after the block's end)
        canvas.append([mask if c else draw(st.sampled_from([0, 1, mask])) for c in cand])
        candidates.append(cand)
    return Case(logits_t.double().tolist(), logits_t, canvas, candidates, draw(st.sampled_from(temperatures)),
                draw(st.sampled_from(["low_confidence", "low_confidence", "random"])),
                draw(st.integers(0, 2**31 - 1)), mask)


def production_step(rule, case: Case, **fields) -> object:
    """parallel_step on the case; ``fields`` in the oracle's form (lists), converted to the StepView's."""
    view = dict(fields)
    for key in ("block_masks_at_start", "block_masks"):
        if key in view:
            view[key] = torch.tensor(view[key], dtype=torch.long)
    if "dependency" in view:
        view["dependency"] = torch.tensor(view["dependency"], dtype=torch.float64)
    return parallel_step(rule, case.logits_t, torch.tensor(case.canvas), torch.tensor(case.candidates),
                         temperature=case.temperature, remasking=case.remasking, generator=case.generator(), **view)


def oracle_step(rule: dict, case: Case, **fields) -> dict:
    gumbel, remask = case.draws()
    return O.step_details(rule, case.logits, case.canvas, case.candidates, temperature=case.temperature,
                          remasking=case.remasking, gumbel_uniforms=gumbel, remask_uniforms=remask, **fields)


def oracle_view(case: Case) -> dict:
    gumbel, remask = case.draws()
    return O.proposal_and_confidence(case.logits, case.canvas, case.candidates, temperature=case.temperature,
                                     remasking=case.remasking, gumbel_uniforms=gumbel, remask_uniforms=remask)


def same_order_relation(a: list, b: list, positions: list) -> bool:
    """Whether two score vectors order every pair of ``positions`` alike (ties included)."""
    sign = lambda x, y: (x > y) - (x < y)  # noqa: E731
    return all(sign(a[i], a[j]) == sign(b[i], b[j]) for i in positions for j in positions)


def agreed_scores(case: Case, production_scores: torch.Tensor, oracle_scores: list) -> list[float]:
    """Candidate scores on which production and oracle agree bit for bit (usable as exact boundaries). Also
    asserts that they agree up to rounding everywhere, and discards the example when rounding alone reorders
    two candidates (a near-tie within an ulp: spec N5 treats it as a tie the numerics decide)."""
    out = []
    for b, row in enumerate(case.candidates):
        positions = [i for i, c in enumerate(row) if c]
        prod = production_scores[b].tolist()
        for i in positions:
            assert close(prod[i], oracle_scores[b][i], **FSUM), (b, i, prod[i], oracle_scores[b][i])
            if prod[i] == oracle_scores[b][i]:
                out.append(prod[i])
        assume(same_order_relation(prod, oracle_scores[b], positions))
    return sorted(set(out))


def assert_step_agrees(res, det: dict, case: Case, offset: int = 0, rows: list[int] | None = None) -> None:
    """Production's StepResult against the oracle's step_details, row by row (oracle row j is production row
    ``rows[j]`` when the oracle ran on those rows only)."""
    batch, width, _ = case.shape
    tokens = propose(case.logits_t, case.temperature, case.generator()).tokens  # the step's first draw
    trace = Trace("oracle-check", {}, 0, batch)
    canvas_t = torch.tensor(case.canvas)
    record_step(trace, 0, canvas_t, res.x, case.mask_id, res.confidence, res.choice_logits, res.order, offset=offset)
    recorded = trace.steps[0]
    for j, b in enumerate(range(batch) if rows is None else rows):
        cands = [i for i in range(width) if case.candidates[b][i]]
        for i in cands:  # P1.1-2: proposal, confidence, choice logit, p(x̂)
            tok = det["proposal"][j][i]
            assert int(tokens[b, i]) == tok, ("proposal", b, i)
            assert close(float(res.view.confidence[b, i]), det["confidence"][j][i], **FSUM), ("confidence", b, i)
            assert close(float(res.view.token_probs[b, i]), det["p"][j][i][tok], **FSUM), ("p(x̂)", b, i)
            assert close(float(res.choice_logits[b, i, tok]), det["choice_logits"][j][i], **FSUM), \
                ("choice logit", b, i)
            assert close(float(res.confidence[b, i]), det["order_scores"][j][i], **FSUM), ("ranking score", b, i)
        assert res.view.ranking[b, :len(cands)].tolist() == det["ranking"][j], ("ranking", b)  # P1.3
        assert res.order[b] == det["selected"][j], ("commit order", b)  # P1.4-5
        assert res.x[b].tolist() == det["canvas"][j], ("canvas", b)
        commits = det["commits"][j]
        assert recorded.positions[b] == [p for p, _, _ in commits], ("trace positions", b)
        assert recorded.tokens[b] == [t for _, t, _ in commits], ("trace tokens", b)
        assert all(close(c, s, **FSUM) for c, (_, _, s) in zip(recorded.confidences[b], commits)), \
            ("trace scores", b)
        if det["gap"][j] is not None:  # SQ0.1 selection gap (the oracle leaves an empty step's gap open)
            assert close(recorded.selection_gaps[b], det["gap"][j], **FSUM), ("gap", b, recorded.selection_gaps[b],
                                                                      det["gap"][j])


def levels(values: list[float], low: float = 0.0, high: float = 1.0, low_open: bool = True,
           high_open: bool = False) -> list[float]:
    """Levels at the realized scores (exact), one ulp either side, and generic ones, inside the range."""
    generic = [0.05, 0.25, 0.5, 0.6, 0.75, 0.8, 0.9, 0.99, 1.0]
    near = [v for x in values for v in (up(x), down(x))]
    inside = lambda v: (v > low if low_open else v >= low) and (v < high if high_open else v <= high)  # noqa: E731
    return sorted({v for v in [*values, *near, *generic] if math.isfinite(v) and inside(v)})


def draw_level(data, values, **kw) -> float:
    choices = levels(values, **kw)
    exact = [v for v in values if v in choices]
    return data.draw(st.one_of(st.sampled_from(exact), st.sampled_from(choices)) if exact else st.sampled_from(choices))


def sorted_confidences(view: dict, candidates: list) -> list[list[float]]:
    return [sorted((view["confidence"][b][i] for i, c in enumerate(row) if c), reverse=True)
            for b, row in enumerate(candidates)]


# ----------------------------------------------------------------------------------- one step, count rules
def draw_rule(data, name: str, case: Case, view: dict, scores: list[float], eb_scores=None) -> tuple[dict, dict]:
    """A rule dict for ``name`` with hyperparameters at and around the realized scores, and the StepView
    fields it needs (oracle form)."""
    batch, width, _ = case.shape
    if name == "topk":
        return {"rule": "topk", "k": data.draw(st.integers(1, width + 1))}, {}
    if name == "threshold":
        return {"rule": "threshold", "threshold": draw_level(data, scores), "inclusive": data.draw(st.booleans()),
                "certified": data.draw(st.booleans())}, {}
    if name == "factor":
        inclusive, last_rank = data.draw(st.booleans()), data.draw(st.sampled_from(["commit", "reject"]))
        ranked = sorted_confidences(view, case.candidates)
        options = [0.25, 0.5, 1.0, 2.0, 3.5]
        agreed = set(scores)  # a boundary only where both sides hold c_n bit for bit (rounding decides elsewhere)
        for row in ranked:  # f with tau_n = c_n exactly, and a level one ulp either side of c_n
            for n in (n for n in range(2, len(row) + 1) if row[n - 1] in agreed):
                for c in (row[n - 1], up(row[n - 1]), down(row[n - 1])):
                    f = (1.0 - c) * (n + 1)
                    if 0 < f and 1.0 - f / (n + 1) == c:
                        options.append(f)
        factor = data.draw(st.sampled_from(sorted(set(options))))
        return {"rule": "factor", "factor": factor, "inclusive": inclusive, "last_rank": last_rank}, {}
    if name == "quota":
        steps = data.draw(st.integers(1, 5))
        at_start = [data.draw(st.integers(0, width + 2)) for _ in range(batch)]
        return {"rule": "quota", "steps_per_block": steps}, {
            "block_step": data.draw(st.integers(0, steps + 1)), "block_masks_at_start": at_start,
            "block_masks": [data.draw(st.integers(0, m)) for m in at_start], "block_length": width + 2}
    if name == "localleap":
        a, b = draw_level(data, scores), draw_level(data, scores)
        return {"rule": "localleap", "kappa": max(a, b), "tau": min(a, b),
                "radius": data.draw(st.sampled_from([0, 1, 1, 2, 3, width])), "inclusive": data.draw(st.booleans()),
                "certified": data.draw(st.booleans())}, {"offset": data.draw(st.sampled_from([0, 0, 5]))}
    if name == "eb":
        # prefix sums of every row (entropies as the oracle computes them, production's differ in the last ulps
        # of the vocabulary sum): keep gamma out of that band unless the sum is an exact zero
        prefix = []
        for b, row in enumerate(case.candidates):
            ent = sorted(-eb_scores[b][i] for i in range(width) if row[i])
            total = sum(ent)
            prefix += [(sum(ent[:j]), 2e-15 * (1 + total)) for j in range(1, len(ent))]
        options = [0.0, 0.1, 0.5, 1.0, 4.0, 16.0, *(s * f for s, tol in prefix for f in (1 - 1e-9, 1 + 1e-9)
                                                    if s * 1e-9 > 4 * tol)]
        gamma = data.draw(st.sampled_from(sorted(set(options))))
        assume(all(gamma == s == 0 or abs(gamma - s) > tol for s, tol in prefix))
        return {"rule": "eb", "gamma": gamma}, {}
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["topk", "threshold", "factor", "quota", "localleap", "eb"])
@settings(max_examples=examples(60))
@given(case=step_cases(), data=st.data())
def test_one_step_matches_the_oracle(name, case, data):
    """P1-P6, P9, TC1: one step of a rule, hyperparameters at the realized confidences."""
    view = oracle_view(case)
    probe_rule = EntropyBounded(0.0) if name == "eb" else TopK(1)
    probe = production_step(probe_rule, case)
    eb_scores = None
    if name == "eb":
        eb_scores = oracle_step({"rule": "eb", "gamma": 0.0}, case)["order_scores"]
        scores = agreed_scores(case, probe.confidence, eb_scores)
    else:
        scores = agreed_scores(case, probe.view.confidence, view["confidence"])
    rule, fields = draw_rule(data, name, case, view, scores, eb_scores)
    res = production_step(production_rule(rule), case, **fields)
    det = oracle_step(rule, case, **fields)
    assert_step_agrees(res, det, case, offset=fields.get("offset", 0))


# -------------------------------------------------------------------------------------------- EB prefix
class FixedEntropy(EntropyBounded):
    """EB-Sampler whose entropies are given (to hold the prefix rule at exact sums); production's own
    entropies are compared in test_one_step_matches_the_oracle."""

    def __init__(self, gamma, entropies):
        super().__init__(gamma)
        object.__setattr__(self, "entropies", entropies)

    def score(self, view):
        return torch.where(view.candidates, -torch.tensor(self.entropies, dtype=torch.float64), NEG_INF)


@settings(max_examples=examples(80))
@given(data=st.data(), entropies=st.lists(st.lists(st.integers(0, 24), min_size=1, max_size=7), min_size=1,
                                          max_size=3))
def test_eb_prefix_rule_at_exact_sums(data, entropies):
    """P6: the j-th commits when H_(1) + ... + H_(j-1) <= gamma, on dyadic entropies (every sum exact), gamma
    at a prefix sum, one ulp or 1/8 either side."""
    width = max(map(len, entropies))
    rows = [[h / 8 for h in row] + [0.0] * (width - len(row)) for row in entropies]
    candidates = [[i < len(row) for i in range(width)] for row in entropies]
    sums = {sum(sorted(row)[:j]) / 8 for row in entropies for j in range(len(row))}
    gamma = data.draw(st.sampled_from(sorted({v for s in sums for v in (s, up(s), down(s), s + 0.125, s - 0.125)
                                              if v >= 0})))
    conf = torch.where(torch.tensor(candidates), 0.5, NEG_INF).double()
    ranking, rank = stable_ranking(conf)
    view = StepView(conf, torch.tensor(candidates), None, ranking, rank)
    selected = FixedEntropy(gamma, rows).select(view)
    for b, row in enumerate(rows):
        order = sorted((i for i in range(width) if candidates[b][i]), key=lambda i: (row[i], i))
        want = order[:O.eb_count([row[i] for i in order], gamma)]
        assert sorted(want) == selected[b].nonzero().flatten().tolist()


@settings(max_examples=examples(80))
@given(data=st.data(), probs=st.lists(st.lists(st.integers(0, 16), min_size=1, max_size=7), min_size=1, max_size=3))
def test_certified_prefix_at_exact_errors(data, probs):
    """TC1: of the selected positions in ranking order, the longest prefix with sum(e) + max(e) < 1 (strict), at
    least the first; on dyadic p (every sum exact, so sum + max hits 1 exactly), in an order that is not by p
    (remasking="random" ranks by random scores while e = 1 - p(x̂))."""
    width = max(map(len, probs))
    rows = [[p / 16 for p in row] + [1.0] * (width - len(row)) for row in probs]
    order = [data.draw(st.permutations(range(width))) for _ in rows]  # the ranking, best first
    score = [[0.0] * width for _ in rows]
    for b, ranked in enumerate(order):
        for r, i in enumerate(ranked):
            score[b][i] = float(width - r)
    selected = [[i < len(row) and data.draw(st.booleans()) for i in range(width)] for row in probs]
    conf = torch.tensor(score, dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    view = StepView(conf, torch.ones_like(conf, dtype=torch.bool), None, ranking, rank,
                    token_probs=torch.tensor(rows, dtype=torch.float64))
    kept = certified(view, torch.tensor(selected))
    for b, ranked in enumerate(order):
        chosen = [i for i in ranked if selected[b][i]]
        want = chosen[:O.certified_prefix_length([rows[b][i] for i in chosen])]
        assert sorted(want) == kept[b].nonzero().flatten().tolist(), (b, chosen, want)


def test_eb_prefix_sum_is_the_plain_sum_of_the_preceding_entropies():
    # entropies 0 (a point mass), 1.3e-18 (softmax([45, 0]) = (1.0, 2.9e-20)) and 0.38: with gamma = 0 the third
    # is preceded by a positive sum and stays masked (P6); production's (0 + 1.3e-18 + 0.38) - 0.38 rounds to 0
    logits = [[[NEG_INF, 0.0], [45.0, 0.0], [0.0, 2.0]]]
    want = O.step({"rule": "eb", "gamma": 0.0}, logits, [[2, 2, 2]], [[True] * 3])
    assert [p for p, _, _ in want[0]] == [0, 1]
    res = parallel_step(EntropyBounded(0.0), torch.tensor(logits, dtype=torch.float64), torch.full((1, 3), 2),
                        torch.ones(1, 3, dtype=torch.bool))
    assert res.order[0] == [0, 1]


# ---------------------------------------------------------------------------------------------- KLASS
@st.composite
def klass_runs(draw):
    batch, length, vocab = draw(st.integers(1, 2)), draw(st.integers(2, 7)), draw(st.sampled_from([2, 3, 4]))
    n_steps = draw(st.integers(2, 5))
    current = draw(logit_rows(batch, length, vocab))
    steps = []
    for t in range(n_steps):
        if t:
            nxt = []
            for b in range(batch):
                row = []
                for i in range(length):
                    what = draw(st.sampled_from(["keep", "keep", "keep", "nudge", "new"]))
                    r = list(current[b][i])
                    if what == "nudge":
                        v = draw(st.integers(0, vocab - 1))
                        if math.isfinite(r[v]):
                            r[v] += draw(st.sampled_from([0.05, -0.2, 0.5]))
                    elif what == "new":
                        r = draw(logit_rows(1, 1, vocab))[0][0]
                    row.append(r)
                nxt.append(row)
            current = nxt
        full = draw(st.booleans())
        offset = 0 if full else draw(st.integers(0, length - 1))
        width = length - offset if full else draw(st.integers(1, length - offset))
        steps.append({"offset": offset,
                      "logits": [[r for r in row[offset:offset + width]] for row in current],
                      "temperature": draw(st.sampled_from([0.0, 0.0, 0.0, 1.0])),
                      "remasking": draw(st.sampled_from(["low_confidence", "low_confidence", "low_confidence",
                                                         "random"])),
                      "seed": draw(st.integers(0, 2**31 - 1))})
    return batch, length, vocab, steps


@settings(max_examples=examples(60))
@given(run=klass_runs(), data=st.data())
def test_klass_runs_sharing_one_state_match_the_oracle(run, data):
    """P7: several steps (windows at offsets, as the cached decoders' steps) sharing KLASS's state: the KL
    direction, the strict comparisons, the counters, the fallback, rows without a candidate (not updated); the
    counters and the remembered distributions themselves are compared too."""
    batch, length, vocab, steps = run
    mask = vocab
    # KLs depend on the logits alone: a dry run of the oracle's history gives epsilons between forward and reverse
    dry = O.klass_new_state(batch, length)
    forward, between = [], []
    for s in steps:
        for b in range(batch):
            for i, row in enumerate(s["logits"][b]):
                p = O.softmax64(row)
                prev = dry["prev"][b][s["offset"] + i]
                kl = O.klass_update(dry, b, s["offset"] + i, p, 1.0)
                if kl is not None and kl > 1e-6:  # away from rounding (fsum vs torch.sum)
                    back = O.kl_divergence(prev, p)
                    forward.append(kl)
                    if math.isfinite(back) and abs(back - kl) > 1e-6 * kl:
                        between.append(math.sqrt(kl * back))
    eps_options = [0.0, 0.01, 0.3, 1.0, *(k * f for k in forward for f in (0.9, 1.1))]
    epsilon = data.draw(st.one_of(st.sampled_from(sorted(set(between))) if between else st.nothing(),
                                  st.sampled_from(sorted(set(eps_options)))))

    def case_of(s, window):
        return Case(s["logits"], torch.tensor(s["logits"], dtype=torch.float64), window,
                    [[tok == mask for tok in row] for row in window], s["temperature"], s["remasking"], s["seed"], mask)

    scores = []  # each step's confidences (all window positions as candidates), where both agree exactly
    for s in steps:
        width = len(s["logits"][0])
        case = case_of(s, [[mask] * width for _ in range(batch)])
        scores.append(agreed_scores(case, production_step(TopK(1), case).view.confidence,
                                    oracle_view(case)["confidence"]))
    history = data.draw(st.sampled_from([1, 1, 2, 3]))

    def oracle_klass_step(rule, case, state, offset):
        """The oracle's step on the rows with a candidate (P7 since 17c543b: a row without one takes no step and
        KLASS records nothing for it; the oracle, older, would update it), sharing ``state``'s row lists; the
        uniforms are the whole batch's. -> (step_details, those rows)."""
        rows = [b for b, row in enumerate(case.candidates) if any(row)]
        gumbel, remask = case.draws()
        pick = lambda x: None if x is None else [x[b] for b in rows]  # noqa: E731
        sub_state = {key: [state[key][b] for b in rows] for key in ("prev", "counter", "seen")}
        det = O.step_details(rule, pick(case.logits), pick(case.canvas), pick(case.candidates),
                             temperature=case.temperature, remasking=case.remasking, gumbel_uniforms=pick(gumbel),
                             remask_uniforms=pick(remask), state=sub_state, offset=offset)
        return det, rows

    def window_of(s, canvas):
        """The step's case, or None when no row has a candidate in its window (no decoder takes that step)."""
        offset, width = s["offset"], len(s["logits"][0])
        case = case_of(s, [row[offset:offset + width] for row in canvas])
        return case if any(any(row) for row in case.candidates) else None

    def oracle_commits(confidence: float) -> list:
        """The oracle's whole run with confidence level ``confidence``."""
        rule = {"rule": "klass", "kl_threshold": epsilon, "history": history, "confidence": confidence}
        state, canvas, out = O.klass_new_state(batch, length), [[mask] * length for _ in range(batch)], []
        for s in steps:
            if (case := window_of(s, canvas)) is None:
                continue
            det, rows = oracle_klass_step(rule, case, state, s["offset"])
            for j, b in enumerate(rows):
                canvas[b][s["offset"]:s["offset"] + len(det["canvas"][j])] = det["canvas"][j]
            out.append((rows, det["commits"]))
        return out

    # c0 at a realized confidence (exactly, an ulp either side, generic), preferring the levels where the strict
    # c > c0 decides: the run differs from the one with the next lower level (which is what c >= c0 would do)
    exact = sorted({c for step in scores for c in step if 0 <= c < 1})
    deciding = [c for c in exact if c > 0 and oracle_commits(c) != oracle_commits(down(c))]
    options = st.sampled_from(levels(exact, low_open=False, high_open=True))
    confidence = data.draw(st.one_of(st.sampled_from(deciding), options) if deciding else options)
    rule = {"rule": "klass", "kl_threshold": epsilon, "history": history, "confidence": confidence}
    prod_rule = production_rule(rule)
    state_p, state_o = new_state(prod_rule, batch, length, "cpu"), O.klass_new_state(batch, length)
    canvas = [[mask] * length for _ in range(batch)]
    for t, s in enumerate(steps):
        if (case := window_of(s, canvas)) is None:
            continue
        width = len(s["logits"][0])
        res = production_step(prod_rule, case, state=state_p, offset=s["offset"])
        det, rows = oracle_klass_step(rule, case, state_o, s["offset"])
        assert_step_agrees(res, det, case, offset=s["offset"], rows=rows)
        for b in set(range(batch)) - set(rows):  # a row without a candidate: nothing committed
            assert res.order[b] == [] and res.x[b].tolist() == case.canvas[b], ("row without candidates", b)
        assert state_p["stable"].tolist() == state_o["counter"], ("counters", t)
        assert state_p["seen"].tolist() == state_o["seen"], ("seen", t)
        for b in range(batch):  # p_{t-1}, the distribution each position's next KL compares with
            for i in range(length):
                if state_o["seen"][b][i]:
                    assert close(state_p["probs"][b, i].tolist(), state_o["prev"][b][i], **FSUM), \
                        ("previous distribution", t, b, i)
            canvas[b][s["offset"]:s["offset"] + width] = res.x[b].tolist()


# ----------------------------------------------------------------------------------------------- DAPD
@settings(max_examples=examples(60))
@given(case=step_cases(max_width=7), data=st.data())
def test_dapd_step_matches_the_oracle(case, data):
    """P8: the threshold schedule, the strict edge test (entries exactly at tau_b and an ulp either side), the
    greedy independent set in confidence order and the late rule (strict, once 2 * masks < block length)."""
    batch, width, _ = case.shape
    view = oracle_view(case)
    scores = agreed_scores(case, production_step(TopK(1), case).view.confidence, view["confidence"])
    block_length = data.draw(st.integers(1, 8))
    block_masks = [data.draw(st.integers(0, block_length)) for _ in range(batch)]
    tau_min = data.draw(st.sampled_from([0.0, 0.005, 0.01]))
    rule = {"rule": "dapd", "scale": data.draw(st.sampled_from([0.5, 1.0, 4.0, 16.0])), "tau_min": tau_min,
            "tau_max": data.draw(st.sampled_from([tau_min, 0.05, 0.1])), "top_layers": 0.3,
            "late_confidence": draw_level(data, scores, low_open=False)}
    dependency = []
    for b in range(batch):
        tau = O.dapd_threshold(rule["scale"], rule["tau_min"], rule["tau_max"], block_masks[b], block_length)
        entries = st.one_of(st.sampled_from([tau, up(tau), down(tau), 0.0]), st.floats(0, 2 * tau + 0.01))
        d = [[0.0] * width for _ in range(width)]
        for i in range(width):
            for j in range(i, width):
                d[i][j] = d[j][i] = abs(data.draw(entries))
        dependency.append(d)
    fields = {"block_masks": block_masks, "block_length": block_length, "dependency": dependency}
    res = production_step(production_rule(rule), case, **fields)
    det = oracle_step(rule, case, **fields)
    assert_step_agrees(res, det, case)


@settings(max_examples=examples(60))
@given(data=st.data(), batch=st.integers(1, 2), heads=st.integers(1, 3), length=st.integers(1, 5),
       num_layers=st.sampled_from([1, 2, 3, 4, 7, 10, 25]),
       top_layers=st.sampled_from([0.01, 0.1, 0.28, 0.3, 0.5, 0.99, 1.0]), shift=st.sampled_from([0, 1]))
def test_dapd_dependency_matches_the_oracle(data, batch, heads, length, num_layers, top_layers, shift):
    """P8: the deepest max(1, ceil(top_layers * layers)) layers, averaged over layers and heads, read at each
    token's query position (Dream: i - 1, the first token its own), symmetrized; and with keys elsewhere
    (cached windows)."""
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    # layers that differ: layer l has weights around l + 1, so reading the wrong layers shows
    attentions = [(torch.rand(batch, heads, length, length, dtype=torch.float64, generator=gen) + layer)
                  for layer in range(num_layers)]
    rows = [max(i - shift, 0) for i in range(length)]
    keys = data.draw(st.one_of(st.just(rows), st.lists(st.integers(0, length - 1), min_size=length,
                                                        max_size=length)))
    rule = DAPD(top_layers=top_layers)
    got = symmetrized_dependency(attentions, rule, torch.tensor(rows), torch.tensor(keys)).tolist()
    want = O.dapd_dependency([a.tolist() for a in attentions], num_layers, top_layers, rows, keys)
    assert len(rule.layers_used(num_layers)) == O.dapd_num_layers(num_layers, top_layers)
    for b in range(batch):
        for i in range(length):
            for k in range(length):
                assert close(got[b][i][k], want[b][i][k], **FSUM), (b, i, k, got[b][i][k], want[b][i][k])


# ----------------------------------------------------------------------------------- the factor level
def test_factor_level_is_evaluated_in_float64():
    confidences = [0.9, 0.9, 0.85, 0.8, 0.1, 0.05]  # c_4 = 0.8 = 1 - 1/5 exactly in float64
    conf = torch.tensor([confidences], dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    view = StepView(conf, torch.ones_like(conf, dtype=torch.bool), None, ranking, rank)
    want = O.factor_count(confidences, 1.0)
    assert want == 4
    assert int(Factor(1.0).counts(view)[0]) == want


def test_factor_levels_are_rounded_once_as_pythons_floats():
    """The case the test order once drew (issue: a rounding edge of 1 - f/(n + 1)): at f = 2.4999999999999996 the
    level of rank 4 is 1 - f/5 = 0.50000000000000008 exactly, 0.5000000000000001 in float64 (P4), so c_4 = 0.5
    fails. torch's number / tensor is reciprocal() * number, two roundings, and gave 0.5: rank 4 passed and the
    last-rank edge committed all five."""
    factor = 2.4999999999999996
    confidences = [0.9, 0.8, 0.7, 0.5, 0.1]
    conf = torch.tensor([confidences], dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    view = StepView(conf, torch.ones_like(conf, dtype=torch.bool), None, ranking, rank)
    assert O.factor_count(confidences, factor) == 3
    assert int(Factor(factor).counts(view)[0]) == 3


def factor_level_edges(max_rank: int = 5) -> list[float]:
    """Factors f at which 1 - f/(n + 1) (one correctly rounded division, P4, Python's floats) and 1 - f * fl(1/(n + 1))
    (torch's float / tensor: a reciprocal, then a product) differ for some rank n <= ``max_rank``: f = (1 - c)(n + 1)
    and its two neighbours either side, for two-decimal levels c."""
    edges = set()
    for n in range(2, max_rank + 1):
        for c in (0.5, 0.55, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99, 1 / 3, 2 / 3):
            f0 = (1 - c) * (n + 1)
            for f in (f0, up(f0), down(f0), up(up(f0)), down(down(f0))):
                if 1 - f / (n + 1) != 1 - f * (1.0 / (n + 1)):
                    edges.add(f)
    return sorted(edges)


def factor_grid_rows(factor: float, width: int) -> list[tuple[int, list[float]]]:
    """(N, confidences [width]) rows: N = 0..width candidates (-inf past them); for each rank m in 2..N, ranks before
    it certain (1.0), rank m at its level tau_m = 1 - f/(m + 1) exactly and one ulp either side, the ranks after it
    equal to it or at 0; and N candidates all at 0 (rank 1 forced, rank 2 fails)."""
    rows = []
    for count in range(width + 1):
        pad = [-INF] * (width - count)
        rows.append((count, [0.0] * count + pad))
        for m in range(2, count + 1):
            level = 1.0 - factor / (m + 1)
            for c in (down(level), level, up(level)):
                if 0.0 <= c <= 1.0:
                    for after in (c, 0.0):
                        rows.append((count, [1.0] * (m - 1) + [c] + [after] * (count - m) + pad))
    return rows


def test_factor_rule_matches_the_oracle_on_a_grid_of_level_edges():
    """P4 on purpose, not by draw: every rank m <= 5 with c_m at its level exactly (inclusive commits, strict stops)
    and one ulp either side, the first failure at the last rank (last_rank commit / reject), no failure, rank 1
    forced at c = 0, no candidate, for generic factors and every rounding edge of 1 - f/(n + 1) (f = 2.4999999999999996
    among them: torch's f / tensor is a reciprocal and a product, two roundings, and moves the level there)."""
    width = 5
    edges = factor_level_edges(width)
    assert 2.4999999999999996 in edges and len(edges) >= 10
    reached = {"equality commits": 0, "equality stops (strict)": 0, "last rank fails": 0, "none fails": 0,
               "rank 1 forced": 0, "no candidate": 0}
    for factor in sorted({0.25, 0.5, 1.0, 2.0, 2.5, 3.5, *edges}):
        rows = factor_grid_rows(factor, width)
        conf = torch.tensor([r for _, r in rows], dtype=torch.float64)
        candidates = torch.tensor([[i < n for i in range(width)] for n, _ in rows])
        ranking, rank = stable_ranking(conf)
        view = StepView(conf, candidates, None, ranking, rank)
        for inclusive in (True, False):
            for last_rank in ("commit", "reject"):
                got = Factor(factor, inclusive, last_rank).counts(view).tolist()
                for (n, row), k in zip(rows, got):
                    want = O.factor_count(row[:n], factor, inclusive, last_rank)
                    assert k == want, (factor, inclusive, last_rank, row[:n], k, want)
                    levels = [1.0 - factor / (m + 1) for m in range(2, n + 1)]
                    tie = any(c == t for c, t in zip(row[1:n], levels))
                    reached["equality commits"] += tie and inclusive and k == n
                    reached["equality stops (strict)"] += tie and not inclusive and k < n
                    fails = [m for m, (c, t) in enumerate(zip(row[1:n], levels), 2) if not (c >= t if inclusive
                                                                                            else c > t)]
                    reached["last rank fails"] += bool(fails) and fails[0] == n >= 2
                    reached["none fails"] += n >= 2 and not fails
                    reached["rank 1 forced"] += n >= 1 and row[0] == 0.0
                    reached["no candidate"] += n == 0
    assert all(reached.values()), reached


def grid_view(rows: list[list[float]], candidates: list[list[bool]], **fields) -> StepView:
    """A StepView of confidence rows (-inf off the candidates), p(x̂) = the confidence (low_confidence remasking)."""
    conf = torch.tensor([[c if m else -INF for c, m in zip(r, cand)] for r, cand in zip(rows, candidates)],
                        dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    return StepView(conf, torch.tensor(candidates), None, ranking, rank, token_probs=conf.clamp(min=0.0), **fields)


def test_threshold_and_topk_match_the_oracle_on_a_grid_of_bounds():
    """P2, P3, TC1 on purpose: every non-increasing row of up to 4 candidates over {tau, one ulp either side, 1.0,
    0.25}, inclusive and strict, certified or not (the certificate's strict sum + max < 1: 1.0 and 0.75 pass,
    two errors of 1/4 and 1/2 do not), no candidate, a top-1 below tau committed alone; top-k with k below,
    at and above N."""
    rows = [list(r) for n in range(5) for r in itertools.combinations_with_replacement(
        [1.0, up(0.75), 0.75, down(0.75), 0.25], n)]
    for tau in (0.75, 0.5, 1.0):
        rows_t = [[(tau if c == 0.75 else up(tau) if c == up(0.75) else down(tau) if c == down(0.75) else c)
                   for c in r] for r in rows]
        width = 4
        padded = [r + [0.0] * (width - len(r)) for r in rows_t]
        view = grid_view(padded, [[i < len(r) for i in range(width)] for r in rows_t])
        for inclusive in (True, False):
            for certify in (False, True):
                got = Threshold(tau, inclusive=inclusive, certified=certify).counts(view).tolist()
                for r, k in zip(rows_t, got):
                    want = O.threshold_count(r, tau, inclusive)
                    if certify:
                        want = O.certified_prefix_length(r[:want])
                    assert k == want, (tau, inclusive, certify, r, k, want)
        for k in range(1, 6):
            assert TopK(k).counts(view).tolist() == [O.topk_count(len(r), k) for r in rows_t]


def test_quota_matches_the_oracle_on_a_grid():
    """P9 / SQ1.3 on purpose: M = 0..6 masks at the block's start, S = 1..4 steps, every step i = 0..S + 1 (past
    the schedule the last quota repeats), N = 0..6 candidates (the quota capped by them)."""
    for steps in range(1, 5):
        for block_step in range(steps + 2):
            cases = [(m, n) for m in range(7) for n in range(7)]
            view = grid_view([[0.5] * 6 for _ in cases], [[i < n for i in range(6)] for _, n in cases],
                             block_step=block_step, block_masks_at_start=torch.tensor([m for m, _ in cases]))
            got = Quota(steps).counts(view).tolist()
            assert got == [O.quota_count(m, steps, block_step, n) for m, n in cases], (steps, block_step)


def test_localleap_matches_the_oracle_on_a_grid_of_bounds():
    """P5 on purpose: every row of 4 positions over {kappa, tau, one ulp under each, 0.1}, a candidate or a committed
    position in between, radius 0, 1 and 2 (a neighbour exactly at the radius, one past it), inclusive and strict,
    certified or not."""
    kappa, tau = 0.875, 0.625
    values = [kappa, down(kappa), tau, down(tau), 0.1]
    rows = [list(r) for r in itertools.product(values, repeat=4)]
    for gap in (None, 1):
        cands = [[i != gap for i in range(4)] for _ in rows]
        view = grid_view(rows, cands)
        ranking = view.ranking.tolist()
        for radius in (0, 1, 2):
            for inclusive in (True, False):
                for certify in (False, True):
                    got = LocalLeap(kappa, radius, tau, inclusive=inclusive, certified=certify).select(view).tolist()
                    for b, row in enumerate(rows):
                        order = ranking[b][:sum(cands[b])]
                        want = O.localleap_select(order, row, kappa, radius, tau, inclusive)
                        if certify:
                            want = want[:O.certified_prefix_length([row[i] for i in want])]
                        assert sorted(i for i, x in enumerate(got[b]) if x) == sorted(want), (row, gap, radius,
                                                                                             inclusive, certify)


# ------------------------------------------------------------------------------------- whole decodes
class Sharpened:
    """A model whose logits are scaled by ``factor`` (confident predictions from a random transformer)."""

    def __init__(self, model, factor: float):
        self.model, self.factor = model, factor
        self.special, self.logit_shift = model.special, model.logit_shift
        self.vocab_size, self.max_length = model.vocab_size, model.max_length

    @property
    def device(self):
        return self.model.device

    def forward(self, x, attention_mask=None, output_attentions: bool = False):
        out = self.model(x, attention_mask, output_attentions=output_attentions)
        return PredictorOutput(out.logits * self.factor, out.attentions)

    __call__ = forward


def production_trace(trace) -> list:
    return [[[(p, t, c) for p, t, c in zip(s.positions[b], s.tokens[b], s.confidences[b])]
             for b in range(trace.batch_size)] for s in trace.steps]


def assert_same_decode(decoded, canvas, trace, counters) -> None:
    got = production_trace(decoded.trace)
    assert len(got) == len(trace), (len(got), len(trace))
    for t, (a, b) in enumerate(zip(got, trace)):
        for row, (ra, rb) in enumerate(zip(a, b)):
            assert [(p, k) for p, k, _ in ra] == [(p, k) for p, k, _ in rb], ("step", t, "row", row, ra, rb)
            assert all(close(x, y, **FSUM) for (_, _, x), (_, _, y) in zip(ra, rb)), ("scores", t, row, ra, rb)
    assert decoded.canvas.tolist() == canvas
    assert decoded.trace.counters.full_forwards == counters["full_forwards"]
    assert decoded.trace.counters.query_positions == counters["query_positions"]


@contextmanager
def production_rounding():
    """The oracle evaluating softmax, entropy and KL as production does (torch's float64 reductions instead of
    correctly rounded sums); the rules' logic is the oracle's own."""

    def softmax(row):
        return torch.softmax(torch.tensor(row, dtype=torch.float64), -1).tolist()

    def entropy(p):
        t = torch.tensor(p, dtype=torch.float64)
        return float(-(t * t.clamp_min(1e-300).log()).sum())

    def kl(now, prev, clamp=1e-300):
        a, b = torch.tensor(now, dtype=torch.float64), torch.tensor(prev, dtype=torch.float64)
        return float((a * (a.clamp_min(clamp).log() - b.clamp_min(clamp).log())).sum())

    with mock.patch.object(O, "softmax64", softmax), mock.patch.object(O, "entropy_nats", entropy), \
            mock.patch.object(O, "kl_divergence", kl):
        yield


def assert_decode_matches(decoded, run_oracle, compare=None) -> None:
    """A production decode against ``run_oracle()``. When they differ, the oracle runs again with production's
    rounding (``production_rounding``): if that removes the difference, two candidates were within an ulp and the
    two float evaluations ordered them differently (spec N5: a close call the numerics decide), and the example
    is discarded; otherwise the difference is the rules' and the test fails."""
    compare = compare or (lambda out: assert_same_decode(decoded, *out))
    try:
        compare(run_oracle())
    except AssertionError:
        with production_rounding():
            again = run_oracle()
        compare(again)
        assume(False)


def decode_setup(model_kind: str, seed: int, lengths: list[int], sharpen: float, prompt_mask: int | None):
    """(model, prompt [B, P], attention mask or None, mask id, symbols for prompts)."""
    if model_kind == "hmm":
        model = HMMOracle.random(3, 4, seed=seed)
        symbols = 4
    else:
        model = never_predicts_mask(random_model(model_kind, seed % 4, dtype=torch.float64, num_layers=2,
                                                 hidden_size=32, num_heads=4, num_kv_heads=2,
                                                 intermediate_size=48))
        model = Sharpened(model, sharpen) if sharpen != 1 else model
        symbols = 90
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    prompt = torch.zeros(len(lengths), width, dtype=torch.long)
    attention = torch.zeros(len(lengths), width, dtype=torch.long)
    for b, n in enumerate(lengths):
        prompt[b, width - n:] = torch.randint(0, symbols, (n,), generator=gen)
        attention[b, width - n:] = 1
    mask_id = model.special.mask_id
    if prompt_mask is not None and width > 1:  # a mask inside the (first) longest prompt (P11: it competes with
        # the blocks' masks); never a whole prompt (the decoders refuse a row made only of masks: nothing conditions
        # its decode)
        prompt[lengths.index(width), prompt_mask % width] = mask_id
    padded = len(set(lengths)) > 1
    return model, prompt, attention if padded else None, mask_id


def optimized_without_cache(*args, **kw):
    return optimized_decode(*args, cache="none", **kw)


DECODERS = (reference_decode, optimized_without_cache)  # the reference and its Tier E twin (P12)
DECODE_RULES = sorted(PRESETS) + ["quota", "quota"]  # Quota also stands for its block bookkeeping


@settings(max_examples=examples(150))
# Quota's schedule counts the block's masks at its start, not a prompt mask competing with them (P9, P11)
@example(name="quota", model_kind="llada", seed=3, lengths=[4], blocks=2, block_length=3, temperature=0.0,
         remasking="low_confidence", prompt_mask=1, sharpen=1.0, steps_per_block=2)
@given(name=st.sampled_from(DECODE_RULES), model_kind=st.sampled_from(["llada", "dream", "hmm"]),
       seed=st.integers(0, 999), lengths=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       blocks=st.integers(1, 3), block_length=st.sampled_from([1, 2, 3, 4]),
       temperature=st.sampled_from([0.0, 0.0, 0.7]), remasking=st.sampled_from(["low_confidence", "random"]),
       prompt_mask=st.one_of(st.none(), st.integers(0, 3)), sharpen=st.sampled_from([1.0, 8.0]),
       steps_per_block=st.integers(1, 5))
def test_reference_decode_matches_the_oracle_decoder(name, model_kind, seed, lengths, blocks, block_length,
                                                     temperature, remasking, prompt_mask, sharpen, steps_per_block):
    """P11: the reference decoder (and the optimized one without cache, P12 Tier E) against the oracle's naive
    decoder: trace (positions, tokens, scores per step and row), canvas and counters; every preset and Quota,
    LLaDA and Dream layouts, left padding, masks inside the prompt, T = 0 and > 0, both remasking modes."""
    if name.startswith("dapd") and model_kind == "hmm":
        model_kind = "llada"  # DAPD needs attention weights
    model, prompt, attention, mask_id = decode_setup(model_kind, seed, lengths, sharpen, prompt_mask)
    rule = {"rule": "quota", "steps_per_block": steps_per_block} if name == "quota" else O.preset(name)
    kw = dict(gen_length=blocks * block_length, block_length=block_length, temperature=temperature,
              remasking=remasking)

    def run_oracle():
        return O.decode_reference(
            oracle_callable(model, attention is not None, name.startswith("dapd")), prompt.tolist(), rule=rule,
            mask_id=mask_id, attention_mask=None if attention is None else attention.tolist(), draw=oracle_draw(seed),
            logit_shift=model.logit_shift, **kw)

    try:
        run_oracle()
    except RuntimeError:  # a stall (Quota's empty steps outliving a block): production must stall too
        with pytest.raises(RuntimeError, match="stalled"):
            reference_decode(model, prompt, attention, rule=production_rule(rule), **kw,
                             generator=torch.Generator().manual_seed(seed))
        return
    for decode in DECODERS:
        decoded = decode(model, prompt, attention, rule=production_rule(rule),
                         generator=torch.Generator().manual_seed(seed), **kw)
        assert_decode_matches(decoded, run_oracle)


@settings(max_examples=examples(30))
@given(layout=st.sampled_from(["llada", "dream"]), seed=st.integers(0, 999),
       lengths=st.lists(st.integers(1, 4), min_size=1, max_size=2), blocks=st.integers(1, 2),
       block_length=st.sampled_from([2, 3, 4]), num_layers=st.sampled_from([1, 2, 3]),
       scale=st.sampled_from([0.5, 1.0, 4.0, 16.0]), top_layers=st.sampled_from([0.3, 0.5, 1.0]),
       late_confidence=st.sampled_from([0.05, 0.9]), sharpen=st.sampled_from([1.0, 4.0]))
def test_dapd_decodes_match_the_oracle_decoder(layout, seed, lengths, blocks, block_length, num_layers, scale,
                                               top_layers, late_confidence, sharpen):
    """P8/P11: DAPD through the reference decoder, its dependency from the forward's attention (the deepest
    layers, Dream's shifted queries) at thresholds where edges come and go."""
    model = never_predicts_mask(random_model(layout, seed % 4, dtype=torch.float64, num_layers=num_layers,
                                             hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48))
    model = Sharpened(model, sharpen) if sharpen != 1 else model
    _, prompt, attention, mask_id = decode_setup("llada", seed, lengths, 1.0, None)
    rule = {"rule": "dapd", "scale": scale, "top_layers": top_layers, "late_confidence": late_confidence}
    kw = dict(gen_length=blocks * block_length, block_length=block_length)
    assert_decode_matches(
        reference_decode(model, prompt, attention, rule=production_rule(rule), **kw),
        lambda: O.decode_reference(oracle_callable(model, attention is not None, True), prompt.tolist(), rule=rule,
                                   mask_id=mask_id, attention_mask=None if attention is None else attention.tolist(),
                                   logit_shift=model.logit_shift, **kw))


def test_dapd_dream_query_of_the_first_real_token():
    """P8/M3: a mask at a left-padded Dream row's first real position is scored, and its dependency read, at its
    own position f_b, not at the padding before it."""
    model, prompt, attention, mask_id = decode_setup("dream", 0, [2, 4], 1.0, None)
    prompt[0, 2] = mask_id  # the first real token of the padded row is a mask, a candidate of the first step
    assert attention[0].tolist() == [0, 0, 1, 1]
    rule, kw = O.preset("dapd-hq"), dict(gen_length=4, block_length=2)
    canvas, trace, counters = O.decode_reference(oracle_callable(model, True, True), prompt.tolist(), rule=rule,
                                                 mask_id=mask_id, attention_mask=attention.tolist(), logit_shift=1,
                                                 **kw)
    assert_same_decode(reference_decode(model, prompt, attention, rule=production_rule(rule), **kw), canvas, trace,
                       counters)


@settings(max_examples=examples(20))
@given(name=st.sampled_from(DECODE_RULES),
       model_kind=st.sampled_from(["llada", "dream", "hmm"]), seed=st.integers(0, 999),
       lengths=st.lists(st.integers(1, 4), min_size=2, max_size=3), blocks=st.integers(1, 2),
       block_length=st.sampled_from([1, 2, 3]), steps_per_block=st.integers(1, 3))
def test_left_padded_batch_rows_equal_the_oracle_decoding_each_row_alone(name, model_kind, seed, lengths, blocks,
                                                                         block_length, steps_per_block):
    """P12: each row of a left-padded production batch is the oracle's decode of that row alone, at temperature 0
    (KLASS included: a row whose block is done takes no step, P11)."""
    if name.startswith("dapd") and model_kind == "hmm":
        model_kind = "llada"
    model, prompt, attention, mask_id = decode_setup(model_kind, seed, lengths, 1.0, None)
    rule = {"rule": "quota", "steps_per_block": steps_per_block} if name == "quota" else O.preset(name)
    kw = dict(gen_length=blocks * block_length, block_length=block_length)
    decode = DECODERS[seed % 2]
    batch = decode(model, prompt, attention, rule=production_rule(rule), **kw)
    for b, n in enumerate(lengths):
        pad = prompt.shape[1] - n
        alone = prompt[b:b + 1, pad:]

        def compare(out, b=b, pad=pad):
            canvas, trace, _ = out
            assert batch.canvas[b, pad:].tolist() == canvas[0]
            got = [[(p - pad, t) for p, t in zip(s.positions[b], s.tokens[b])] for s in batch.trace.steps]
            want = [[(p, t) for p, t, _ in s[0]] for s in trace]
            assert [s for s in got if s] == [s for s in want if s]

        assert_decode_matches(batch, lambda alone=alone: O.decode_reference(
            oracle_callable(model, False, name.startswith("dapd")), alone.tolist(), rule=rule, mask_id=mask_id,
            logit_shift=model.logit_shift, **kw), compare)


def mask_first_model(wasted: int, vocab: int = 3):
    """An oracle-style toy model (tokens 0, 1; mask 2) that proposes the mask token at every position for its
    first ``wasted`` calls, then token 0 with position-dependent confidences (no ties)."""
    calls = [0]

    def model(canvas, attention_mask):
        calls[0] += 1
        if calls[0] <= wasted:
            return [[[0.0, -1.0, 3.0] for _ in row] for row in canvas]
        return [[[1.0 + 0.5 * i + 0.25 * b, 0.0, -1e9] for i in range(len(row))] for b, row in enumerate(canvas)]

    return model


def block_budgets_used_up(decoded, prompt, mask_id: int, block_length: int, steps_per_block: int) -> list[bool]:
    """Per block of a production decode: whether it took exactly one step more than its stall budget (masks before
    the block's end at its start, + steps_per_block for Quota), the one step more the oracle does not allow."""
    x = torch.cat([prompt, torch.full((prompt.shape[0], decoded.canvas.shape[1] - prompt.shape[1]), mask_id)], 1)
    out = []
    for block in sorted({s.block for s in decoded.trace.steps}):
        end = prompt.shape[1] + (block + 1) * block_length
        budget = int((x[:, :end] == mask_id).sum(dim=1).max()) + steps_per_block
        steps = [s for s in decoded.trace.steps if s.block == block]
        out.append(len(steps) == budget + 1)
        for s in steps:
            for b in range(x.shape[0]):
                x[b, s.positions[b]] = torch.tensor(s.tokens[b], dtype=torch.long)
    return out


@settings(max_examples=examples(40))
@given(wasted=st.integers(0, 5), rule=st.sampled_from([{"rule": "quota", "steps_per_block": 1},
                                                       {"rule": "quota", "steps_per_block": 2},
                                                       {"rule": "quota", "steps_per_block": 3},
                                                       {"rule": "topk", "k": 1}, {"rule": "topk", "k": 2},
                                                       {"rule": "threshold", "threshold": 0.9}]),
       batch=st.integers(1, 2), blocks=st.integers(1, 2), block_length=st.integers(1, 4))
def test_mask_proposals_stay_masked_and_the_block_goes_on(wasted, rule, batch, blocks, block_length):
    """P11/SQ0.1: a position whose proposal is the mask token stays masked and is not recorded; the block takes
    more steps (Quota's budget adds steps_per_block); a block that cannot finish raises."""
    prompt, kw = torch.zeros(batch, 2, dtype=torch.long), dict(gen_length=blocks * block_length,
                                                              block_length=block_length)
    try:
        canvas, trace, counters = O.decode_reference(mask_first_model(wasted), prompt.tolist(), rule=rule, mask_id=2,
                                                     **kw)
    except RuntimeError:
        canvas = None
    try:
        decoded = reference_decode(ListPredictor(mask_first_model(wasted), 3, 2), prompt, rule=production_rule(rule),
                                   **kw)
    except RuntimeError as error:
        assert canvas is None, error
        return
    if canvas is None:  # the oracle stalls one step earlier (test_stall_budget_allows_the_step_that_finishes)
        spb = rule.get("steps_per_block", 0)
        assert any(block_budgets_used_up(decoded, prompt, 2, block_length, spb))
        return
    assert_same_decode(decoded, canvas, trace, counters)


@pytest.mark.parametrize("wasted, stalls", [(1, False), (2, True)])
def test_stall_budget_allows_the_step_that_finishes(wasted, stalls):
    """P11: one mask gives a budget of 1 step; a block finishing on forward budget + 1 = 2 completes, one that
    needs a third forward raises, in the oracle and in production alike."""
    prompt, kw = [[0, 0]], dict(gen_length=1, block_length=1)
    outcomes = []
    for run in (lambda: O.decode_reference(mask_first_model(wasted), prompt, rule={"rule": "topk", "k": 1},
                                           mask_id=2, **kw),
                lambda: reference_decode(ListPredictor(mask_first_model(wasted), 3, 2), torch.tensor(prompt),
                                         rule=TopK(1), **kw)):
        try:
            run()
            outcomes.append(False)
        except RuntimeError as error:
            assert "stalled" in str(error)
            outcomes.append(True)
    assert outcomes == [stalls, stalls]


def test_batch_row_with_a_prompt_mask_equals_the_row_alone():
    """P12: a row whose block is done takes no step while the batch decodes the others' blocks, so its
    prompt mask is filled as it would be alone (it was not: the known batch bug, fixed in reference/ and
    optimized/parallel.py)."""
    prompts, rule = [[2, 1], [0, 0]], {"rule": "threshold", "threshold": 0.9}
    model = ListPredictor(O._TOY_MODELS["prompt_mask"], 3, 2)
    alone, _, _ = O.decode_reference(O._TOY_MODELS["prompt_mask"], prompts[:1], rule=rule, gen_length=2,
                                     block_length=2, mask_id=2)
    for decode in DECODERS:
        batch = decode(model, torch.tensor(prompts), rule=production_rule(rule), gen_length=2, block_length=2)
        assert batch.canvas[0].tolist() == alone[0]


def test_batch_row_klass_history_equals_the_row_alone():
    """P12: a row whose block is done takes no step, so KLASS's history gets no observation from the
    forwards the batch takes for other rows (it did: the known batch bug, fixed in KLASS._update)."""
    prompts = [[1, 1], [2, 0]]
    rule = {"rule": "klass", "confidence": 0.5, "kl_threshold": 0.1, "history": 3}
    model = ListPredictor(O._TOY_MODELS["klass_history"], 3, 2)
    _, alone, _ = O.decode_reference(O._TOY_MODELS["klass_history"], prompts[:1], rule=rule, gen_length=4,
                                     block_length=2, mask_id=2)
    for decode in DECODERS:
        batch = decode(model, torch.tensor(prompts), rule=production_rule(rule), gen_length=4, block_length=2)
        got = [[(p, t) for p, t in zip(s.positions[0], s.tokens[0])] for s in batch.trace.steps]
        assert [s for s in got if s] == [[(p, t) for p, t, _ in s[0]] for s in alone if s[0]]


# ------------------------------------------------------------------------------ the oracle's worked examples
NOT_PRODUCTION = {  # examples production is not held to
    "factor_float_tau_vs_exact_exact": "the oracle's exact=True (Fraction) reading; production compares floats",
    "dapd_layer_count_decimal": "the oracle's reading='decimal'; production (and the oracle's default) is float",
}
EXAMPLES = {e["name"]: e for e in O.worked_examples()}


def commits_of(res, offset=0, mask_id=None) -> list:
    return [[[p + offset, int(res.x[b, p]), float(res.confidence[b, p])] for p in order
             if mask_id is None or int(res.x[b, p]) != mask_id] for b, order in enumerate(res.order)]


def run_example_step(args: dict, state=None) -> list:
    args = dict(args)
    rule = production_rule(args.pop("rule"))
    logits = t64(args.pop("logits"))
    canvas, candidates = torch.tensor(args.pop("canvas")), torch.tensor(args.pop("candidates"))
    # the example's uniforms stand in for torch.rand inside the step, in production's order and dtypes (float64
    # Gumbel [B, W, V], then float32 remasking [B, W]); every one must be drawn
    gumbel, remask = args.pop("gumbel_uniforms", None), args.pop("remask_uniforms", None)
    script = [t64(gumbel)] if gumbel is not None else []
    script += [torch.tensor(remask, dtype=torch.float32)] if remask is not None else []
    fields = {k: args.pop(k) for k in ("temperature", "remasking") if k in args}
    view = {}
    for key, value in args.items():
        if key in ("block_masks", "block_masks_at_start"):
            value = torch.tensor(value)
        elif key == "dependency":
            value = t64(value)
        view[key] = value
    mask_id = view.pop("mask_id", None)
    if state is not None:
        view["state"] = state
    with Draws(script).active():
        res = parallel_step(rule, logits, canvas, candidates, **fields, **view)
    return commits_of(res, view.get("offset", 0), mask_id)


def count_view(confidences: list[float], **fields) -> StepView:
    conf = torch.tensor([confidences], dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    return StepView(conf, torch.ones_like(conf, dtype=torch.bool), None, ranking, rank, **fields)


def dapd_has_edge(rule: DAPD, value: float, block_masks: int, block_length: int) -> bool:
    """Whether production's DAPD puts an edge between two candidates whose dependency is ``value``."""
    view = count_view([0.5, 0.25], block_masks=torch.tensor([block_masks]), block_length=block_length,
                      dependency=torch.tensor([[[1.0, value], [value, 1.0]]], dtype=torch.float64))
    return not bool(rule.select(view).all())


def replay_on_production(example: dict, monkeypatch):
    fn, args = example["fn"], example["args"]
    if fn == "threshold_count":
        rule = Threshold(args["threshold"], inclusive=args.get("inclusive", True))
        return int(rule.counts(count_view(args["sorted_conf"]))[0])
    if fn == "factor_count":
        assert not args.get("exact", False)
        rule = Factor(args["factor"], inclusive=args.get("inclusive", True), last_rank=args.get("last_rank", "commit"))
        return int(rule.counts(count_view(args["sorted_conf"]))[0])
    if fn == "eb_count":
        h = args["sorted_entropies"]
        return int(FixedEntropy(args["gamma"], [h]).select(count_view([0.5] * len(h))).sum())
    if fn == "step":
        return run_example_step(args)
    if fn == "run_steps":
        rule = production_rule(args["rule"])
        state = new_state(rule, args["batch"], args["length"], "cpu")
        return [run_example_step({"rule": args["rule"], **s}, state) for s in args["steps"]]
    if fn == "dapd_dependency":
        attentions = [torch.tensor(layer, dtype=torch.float64) for layer in args["attentions"]]
        rows = torch.tensor(args["query_of_token"])
        keys = rows if args.get("key_of_token") is None else torch.tensor(args["key_of_token"])
        return symmetrized_dependency(attentions, DAPD(top_layers=args["top_layers"]), rows, keys).tolist()
    if fn == "dapd_num_layers":
        assert args.get("reading", "float") == "float"
        return len(DAPD(top_layers=args["top_layers"]).layers_used(args["num_layers"]))
    if fn == "dapd_threshold":  # tau == value exactly iff value is not an edge and the next float is
        rule = DAPD(scale=args["scale"], tau_min=args["tau_min"], tau_max=args["tau_max"], late_confidence=1.0)
        value = example["expected"]
        at = dapd_has_edge(rule, value, args["block_masks"], args["block_length"])
        above = dapd_has_edge(rule, up(value), args["block_masks"], args["block_length"])
        return value if (not at and above) else ("tau differs", at, above)
    if fn == "certified_prefix_length":
        probs = args["probs_in_order"]
        n = len(probs)
        view = count_view([float(n - i) for i in range(n)], token_probs=torch.tensor([probs], dtype=torch.float64))
        return int(certified(view, torch.ones(1, n, dtype=torch.bool)).sum())
    if fn == "quota_sequence":
        rule, n = Quota(args["steps_per_block"]), args["n_candidates"]
        return [int(rule.counts(count_view([0.5] * n, block_step=i,
                                           block_masks_at_start=torch.tensor([args["masks_at_block_start"]])))[0])
                for i in range(args["n_steps"])]
    if fn == "fastdllm_rule_names":
        out = []
        for threshold, factor, spb in args["cases"]:
            try:
                out.append(FastDLLMParams(steps=spb, gen_length=spb, block_length=spb, threshold=threshold,
                                          factor=factor).rule.name)
            except ValueError:
                out.append("ValueError")
        return out
    if fn == "toy_decode":
        model = ListPredictor(O._TOY_MODELS[args["model_name"]], 3, args["mask_id"])
        decoded = reference_decode(model, torch.tensor(args["prompts"]), rule=production_rule(args["rule"]),
                                   gen_length=args["gen_length"], block_length=args["block_length"])
        trace = [[[[p, t] for p, t in zip(s.positions[b], s.tokens[b])] for b in range(len(args["prompts"]))]
                 for s in decoded.trace.steps]
        return [decoded.canvas.tolist(), trace]
    if fn == "decoder_candidates":  # the candidates of the reference decoder's first step in block [e - 1, e)
        canvas, mask_id, end = args["canvas"], args["mask_id"], args["block_end"]
        prompt_len = end - 1
        assert all(tok == mask_id for row in canvas for tok in row[prompt_len:])
        attention = torch.tensor(args["attention_mask"])[:, :prompt_len]
        vocab = mask_id + 1
        model = ListPredictor(lambda x, am: [[[0.0] * (vocab - 1) + [-1e9] for _ in row] for row in x], vocab, mask_id)
        seen = []

        def spy(rule, logits, x, candidates, **kw):
            seen.append(candidates.tolist())
            return parallel_step(rule, logits, x, candidates, **kw)

        with monkeypatch.context() as m:
            m.setattr(reference_module, "parallel_step", spy)
            reference_decode(model, torch.tensor(canvas)[:, :prompt_len], attention, rule=TopK(1),
                             gen_length=len(canvas[0]) - prompt_len, block_length=1)
        return seen[0]
    raise AssertionError(f"no production counterpart for {fn}")




@pytest.mark.parametrize("name", [n for n in EXAMPLES
                                  if n not in NOT_PRODUCTION])
def test_worked_example_on_production(name, monkeypatch):
    example = EXAMPLES[name]
    assert O.same(O.replay(example), example["expected"])  # the oracle itself
    got = O._plain(replay_on_production(example, monkeypatch))
    assert O.same(got, example["expected"]), (name, got, example["expected"], example["why"])


# ---------------------------------------------------------------------------------- presets and checks
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_the_oracle_presets(name):
    """P10."""
    assert production_rule(O.preset(name)) == PRESETS[name]


def accepts(make) -> tuple[bool, str]:
    try:
        make()
    except ValueError as error:
        return False, str(error)
    return True, ""


VALIDATION = [
    ("topk", "k", [0, 1, 2, 2.5, True]),
    ("threshold", "threshold", [-0.5, 0.0, 5e-324, 0.5, 1.0, up(1.0)]),
    ("factor", "factor", [-1.0, 0.0, 5e-324, 1.0, 1e300]),
    ("factor", "last_rank", ["commit", "reject", "other"]),
    ("quota", "steps_per_block", [0, 1, 3, 2.0]),
    ("localleap", "kappa", [0.0, 0.74, 0.75, 0.9, 1.0, up(1.0)]),
    ("localleap", "tau", [0.0, 5e-324, 0.5, 0.9, up(0.9)]),
    ("localleap", "radius", [-1, 0, 4, 1.5]),
    ("eb", "gamma", [-5e-324, 0.0, 4.0, 1e300]),
    ("klass", "confidence", [-5e-324, 0.0, 0.5, down(1.0), 1.0]),
    ("klass", "kl_threshold", [-1e-9, 0.0, 1.5]),
    ("klass", "history", [0, 1, 3, 1.5]),
    ("dapd", "scale", [0.0, 5e-324, 4.0]),
    ("dapd", "tau_min", [-1e-9, 0.0, 0.005, 0.05, up(0.05)]),
    ("dapd", "tau_max", [0.0, down(0.005), 0.005, 0.05]),
    ("dapd", "top_layers", [0.0, 5e-324, 0.3, 1.0, up(1.0)]),
    ("dapd", "late_confidence", [-1e-9, 0.0, 0.9, 1.0, up(1.0)]),
]
BASE = {"topk": {"k": 1}, "threshold": {"threshold": 0.9}, "factor": {"factor": 1.0},
        "quota": {"steps_per_block": 1}, "localleap": {}, "eb": {"gamma": 1.0},
        "klass": {"confidence": 0.5, "kl_threshold": 0.1, "history": 1}, "dapd": {"scale": 1.0}}


def validation_cases(table):
    return [(rule, param, value) for rule, param, values in table for value in values]


def assert_same_validation(rule, param, value):
    spec = {"rule": rule, **BASE[rule], param: value}
    oracle_ok, oracle_message = accepts(lambda: O.make_rule(spec))
    production_ok, message = accepts(lambda: _production_rule_raw(spec))
    assert production_ok == oracle_ok, (rule, param, value, message or oracle_message)
    if not production_ok:  # the message names the offending parameter (kappa vs tau: "kappa")
        assert message.split()[0] == oracle_message.split()[0], (message, oracle_message)


def _production_rule_raw(spec: dict):
    """The production rule built directly from a rule dict (no oracle validation on the way)."""
    r = {k: v for k, v in spec.items() if k != "rule"}
    cls = {"topk": TopK, "threshold": Threshold, "factor": Factor, "quota": Quota, "localleap": LocalLeap,
           "eb": EntropyBounded, "klass": KLASS, "dapd": DAPD}[spec["rule"]]
    return cls(**r)


@pytest.mark.parametrize("rule, param, value", validation_cases(VALIDATION))
def test_hyperparameter_checks_match_the_oracle(rule, param, value):
    """The checks table: production accepts and refuses what the spec's ranges do, naming the parameter."""
    assert_same_validation(rule, param, value)


def test_nan_hyperparameters_are_refused():
    """The checks table: NaN lies in no range (check_range refuses it; every comparison with NaN is false)."""
    for rule, param in [("threshold", "threshold"), ("factor", "factor"), ("localleap", "kappa"), ("eb", "gamma"),
                        ("klass", "confidence"), ("klass", "kl_threshold"), ("dapd", "scale"),
                        ("dapd", "top_layers"), ("dapd", "late_confidence")]:
        assert_same_validation(rule, param, math.nan)


def test_infinite_hyperparameters_are_refused():
    """The checks table's open upper ends (factor in (0, inf), gamma, kl_threshold in [0, inf), ...) refuse
    infinity."""
    for rule, param in [("factor", "factor"), ("eb", "gamma"), ("klass", "kl_threshold"), ("dapd", "scale"),
                        ("dapd", "tau_max")]:
        assert_same_validation(rule, param, INF)
