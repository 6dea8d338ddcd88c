"""The parallel rules on hand-made steps (spec/parallel.md P2-P10), and their argument checks."""

import math

import pytest
import torch

from veridec.rules.parallel import DAPD, KLASS, EntropyBounded, Factor, LocalLeap, Threshold, TopK, new_state
from veridec.rules.presets import PRESETS, preset
from veridec.rules.common import stable_ranking
from veridec.rules.step import parallel_step
from veridec.rules.view import StepView


def committed(rule, confidences, **view_fields):
    """Commit order of one step whose argmax probabilities are ``confidences`` > 0.1 (one row, vocabulary 10:
    token 0 has probability c, the nine others (1 - c) / 9)."""
    probs = torch.tensor([[c] + [(1 - c) / 9] * 9 for c in confidences], dtype=torch.float64)
    x = torch.full((1, len(confidences)), 10)  # mask id 10: every position is a candidate
    return parallel_step(rule, probs.log()[None], x, x == 10, **view_fields).order[0]


def count(rule, confidences) -> int:
    """A count rule's count for exactly these confidences (no softmax rounding on the way)."""
    conf = torch.tensor([confidences], dtype=torch.float64)
    ranking, rank = stable_ranking(conf)
    return int(rule.counts(StepView(conf, torch.ones_like(conf, dtype=torch.bool), None, ranking, rank))[0])


def test_topk_and_threshold():
    assert committed(TopK(2), [0.6, 0.9, 0.7]) == [1, 2]
    assert committed(TopK(8), [0.6, 0.9]) == [1, 0]  # k beyond the candidates: all of them
    assert committed(TopK(2), [0.7, 0.7, 0.7]) == [0, 1]  # ties: lowest position first
    assert committed(Threshold(0.9), [0.6, 0.95, 0.91, 0.7]) == [1, 2]
    assert committed(Threshold(0.99), [0.6, 0.7]) == [1]  # nothing passes: the top-1


def test_factor_rule_and_its_last_rank_edge_case():
    # f = 1: rank n >= 2 passes when c >= 1 - 1/(n+1): 0.667, 0.75, 0.8, ...
    assert committed(Factor(1.0), [0.99, 0.6, 0.5, 0.4]) == [0]  # fails at rank 2
    assert committed(Factor(1.0), [0.99, 0.9, 0.7, 0.9, 0.95]) == [0, 4, 1, 3, 2]  # fails at rank 5 of 5 ...
    assert committed(Factor(1.0), [0.99, 0.9, 0.7, 0.9, 0.95, 0.15]) == [0, 4, 1, 3]  # ... here at 5 of 6
    assert committed(Factor(1.0), [0.99, 0.9, 0.15]) == [0, 1, 2]  # only the last rank fails: official commits all
    assert committed(Factor(1.0, last_rank="reject"), [0.99, 0.9, 0.15]) == [0, 1]
    boundary = [0.9, 0.8, 0.75, 0.15]  # rank 3 sits exactly on 1 - 1/4 (exact in binary)
    assert count(Factor(1.0), boundary) == 4  # passes (>=), then the last-rank edge
    assert count(Factor(1.0, inclusive=False), boundary) == 2  # the paper's strict (n+1)(1-c) < f
    assert count(Threshold(0.75), boundary) == 3 and count(Threshold(0.75, inclusive=False), boundary) == 2


def test_localleap_anchors_neighbours_and_fallback():
    conf = [0.95, 0.8, 0.5, 0.8, 0.8, 0.8, 0.8, 0.8]
    assert committed(LocalLeap(0.9, 4, 0.75), conf) == [0, 1, 3, 4]  # neighbours within 4 of the anchor
    assert committed(LocalLeap(0.9, 0, 0.75), conf) == [0]  # W = 0: anchors only
    assert committed(LocalLeap(0.9, 4, 0.75), [0.8, 0.85, 0.8]) == [1]  # no anchor: sequential
    assert committed(LocalLeap(0.9, 1, 0.75), [0.8, 0.95, 0.3, 0.3, 0.92, 0.76]) == [1, 4, 0, 5]


def test_localleap_distance_counts_committed_positions():
    probs = torch.tensor([[0.95, 0.05], [0.5, 0.5], [0.5, 0.5], [0.8, 0.2]], dtype=torch.float64)
    x = torch.tensor([[2, 0, 0, 2]])  # mask id 2; positions 1-2 committed: position 3 is 3 from the anchor
    step = lambda radius: parallel_step(LocalLeap(0.9, radius, 0.75), probs.log()[None], x, x == 2).order[0]  # noqa
    assert step(2) == [0] and step(3) == [0, 3]


def entropy_row(entropies_wanted):
    """Confidences whose distributions (c, then nine times (1 - c) / 9) have the given entropies (nats)."""
    rows = []
    for h in entropies_wanted:
        lo, hi = 0.5, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            entropy = -(mid * math.log(mid) + (1 - mid) * math.log((1 - mid) / 9))
            lo, hi = (mid, hi) if entropy > h else (lo, mid)
        rows.append(lo)
    return rows


def test_entropy_bounded_prefix():
    conf = entropy_row([0.5, 0.1, 0.6, 0.2])  # sorted by entropy: 1, 3, 0, 2
    assert committed(EntropyBounded(0.0), conf) == [1]
    assert committed(EntropyBounded(0.35), conf) == [1, 3, 0]  # 0.1 + 0.2 <= 0.35 before the third
    assert committed(EntropyBounded(0.75), conf) == [1, 3, 0]  # 0.8 before the fourth
    assert committed(EntropyBounded(0.85), conf) == [1, 3, 0, 2]


def test_klass_needs_stable_history():
    rule = KLASS(confidence=0.6, kl_threshold=0.01, history=1)
    state = new_state(rule, 1, 3, "cpu")
    run = lambda conf: committed(rule, conf, state=state)  # noqa: E731
    assert run([0.9, 0.7, 0.5]) == [0]  # no history yet: the top-1 fallback
    assert run([0.9, 0.7, 0.5]) == [0, 1]  # unchanged predictions, c > 0.6
    assert run([0.9, 0.99, 0.5]) == [0]  # position 1 moved (KL > 0.01): not stable
    two = KLASS(confidence=0.6, kl_threshold=0.01, history=2)
    state2 = new_state(two, 1, 2, "cpu")
    assert [committed(two, [0.9, 0.8], state=state2) for _ in range(3)] == [[0], [0], [0, 1]]


def test_dapd_independent_set_and_late_rule():
    conf = [0.9, 0.8, 0.7, 0.95]
    dependency = torch.zeros(1, 4, 4, dtype=torch.float64)
    dependency[0, 0, 1] = dependency[0, 1, 0] = 0.2  # 0 - 1 depend; 3 - 2 depend
    dependency[0, 3, 2] = dependency[0, 2, 3] = 0.2
    early = dict(block_masks=torch.tensor([4]), block_length=4, dependency=dependency)
    assert committed(DAPD(scale=1.0), conf, **early) == [3, 0]  # greedy by confidence: 3, 0 (1 and 2 blocked)
    assert committed(DAPD(scale=50.0), conf, **early) == [3, 0, 1, 2]  # tau 50 * 0.005 > 0.2: no edges
    late = dict(block_masks=torch.tensor([1]), block_length=4, dependency=dependency)  # 3/4 decoded
    assert committed(DAPD(scale=1.0, late_confidence=0.85), conf, **late) == [3, 0]  # tau 0.039: edges stay
    assert committed(DAPD(scale=1.0, late_confidence=0.75), conf, **late) == [3, 0, 1]  # late: c > 0.75 too


def test_presets_are_seed_000_table_2():
    assert preset("conf-hq") == TopK(4) and preset("conf-ht") == TopK(8)
    assert preset("fastdllm-hq") == Threshold(0.8) and preset("fastdllm-ht") == Threshold(0.6)
    assert preset("klass-hq") == KLASS(0.4, 1.5, 1) and preset("klass-ht") == KLASS(0.25, 1.0, 1)
    assert preset("eb-hq") == EntropyBounded(4) and preset("eb-ht") == EntropyBounded(16)
    assert preset("dapd-hq") == DAPD(scale=4) and preset("dapd-ht") == DAPD(scale=16)
    assert preset("localleap") == LocalLeap(0.9, 4, 0.75) and preset("localleap-dream").tau == 0.8
    with pytest.raises(ValueError, match="decoder preset must be one of"):
        preset("nope")
    assert len(PRESETS) == 18 and preset("localleap-certified").certified


@pytest.mark.parametrize("make, message", [
    (lambda: TopK(0), r"k must lie in \[1, inf\)"),
    (lambda: TopK(2.5), "k must be an integer"),
    (lambda: Threshold(0.0), r"threshold must lie in \(0, 1\]"),
    (lambda: Threshold(1.1), r"threshold must lie in \(0, 1\]"),
    (lambda: Factor(0.0), r"factor must lie in \(0, inf\)"),
    (lambda: Factor(1.0, last_rank="x"), "last_rank must be one of"),
    (lambda: LocalLeap(kappa=0.7, tau=0.8), "kappa must be >= tau"),
    (lambda: LocalLeap(kappa=1.2), r"kappa must lie in \(0, 1\]"),
    (lambda: LocalLeap(tau=0.0), r"tau must lie in \(0, 1\]"),
    (lambda: LocalLeap(radius=-1), r"radius must lie in \[0, inf\)"),
    (lambda: EntropyBounded(-0.1), r"gamma must lie in \[0, inf\)"),
    (lambda: KLASS(confidence=1.0), r"confidence must lie in \[0, 1\)"),
    (lambda: KLASS(kl_threshold=-1), r"kl_threshold must lie in \[0, inf\)"),
    (lambda: KLASS(history=0), r"history must lie in \[1, inf\)"),
    (lambda: DAPD(scale=0), r"scale must lie in \(0, inf\)"),
    (lambda: DAPD(tau_min=0.1, tau_max=0.05), r"tau_max must lie in \[0.1, inf\)"),
    (lambda: DAPD(top_layers=0), r"top_layers must lie in \(0, 1\]"),
    (lambda: DAPD(late_confidence=2), r"late_confidence must lie in \[0, 1\]"),
])
def test_bad_hyperparameters_name_the_allowed_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_certified_rules_keep_the_prefix_the_general_certificate_allows():
    """TC1: errors in confidence order; a prefix of k commits while sum(e) + max(e) < 1."""
    conf = [0.9, 0.8, 0.7, 0.6]  # errors 0.1, 0.2, 0.3, 0.4: prefixes 0.2, 0.5, 0.9, 1.4
    assert committed(Threshold(0.5), conf) == [0, 1, 2, 3]
    assert committed(Threshold(0.5, certified=True), conf) == [0, 1, 2]
    assert committed(Threshold(0.5, certified=True), [0.3, 0.2]) == [0]  # the top-1 always
    assert committed(LocalLeap(0.85, 4, 0.55, certified=True), conf) == [0, 1, 2]
    assert committed(LocalLeap(0.85, 4, 0.55), conf) == [0, 1, 2, 3]
