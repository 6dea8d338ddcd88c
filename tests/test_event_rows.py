"""WINO's rows of the exactness table (harness/event_rows.py, spec/wino.md WN8): the reference and the batched
decoder agree event for event with zero logit error, the prefix cache is measured (not exact), and a variant
that decides differently is caught by the row (negative control)."""

import pytest
import torch

from veridec.harness import event_rows
from veridec.harness.rows import PACKING, SEQUENTIAL, TableInputs, build_row
from veridec.testing import load_check_model

@pytest.fixture(scope="module")
def model():
    return load_check_model("tiny-llada")  # confidences spread over (0, 1): thresholds decide something


PROMPT = torch.tensor([[98, 5, 6, 7], [9, 3, 4, 2]])  # row 0 left-padded by one (98: the pad id)
MASK = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])


def row(model, variant, decoder="wino", tolerance=None):
    """The table's row of ``decoder``'s ``variant`` (gen 16, block 8, a sequential time of 1 s); ``tolerance``: the
    packing tolerance a ROUNDED variant is held to, in place of the measured one."""
    inputs = TableInputs("tiny", model, PROMPT, MASK, 16, 8, measured={SEQUENTIAL: 1.0})
    if tolerance is not None:
        inputs.measured[PACKING] = tolerance
    kind = next(kind for kind in event_rows.EVENT_KINDS[decoder] if kind.label == variant)
    return build_row(inputs, decoder, kind)


def test_the_tier_e_rows_are_exact_and_the_prefix_cache_is_measured(model):
    for variant in ("reference", "optimized"):
        got = row(model, variant)
        assert (got["tier"], got["commit_order_match"], got["token_match"], got["max_logit_error"]) == \
            ("E", 1.0, 1.0, 0.0), got
        assert got["prompts"] == 2 and got["full_forwards"] > 0
    prefix = row(model, "prefix")
    assert prefix["tier"] == "A" and prefix["max_logit_error"] > 0
    assert prefix["full_forwards"] < row(model, "optimized")["full_forwards"]


def test_a_variant_that_decides_otherwise_is_not_exact(model, monkeypatch):
    """Negative control: the optimized decoder run with another draft threshold drops the row's match."""
    real = event_rows.optimized.generate
    monkeypatch.setattr(event_rows.optimized, "generate",
                        lambda *a, **kw: real(*a, **{**kw, "threshold": 0.05}))
    got = row(model, "optimized")
    assert got["commit_order_match"] < 1


def test_the_logit_error_stops_at_the_divergent_call():
    """Calls after the first divergent step saw other canvases: their differences are not rounding."""
    same, other = torch.zeros(3, 4), torch.ones(3, 4)
    ours = [(torch.arange(3), same)] * 3
    theirs = [(torch.arange(3), same), (torch.arange(1, 3), same[1:] + 0.5), (torch.arange(3), other)]
    assert event_rows._logit_error(ours, theirs, divergent=1) == 0.5
    assert event_rows._logit_error(ours, theirs, divergent=2) == 1.0
    assert event_rows._logit_error(ours, theirs, divergent=0) == 0.0
    banned = same.clone()
    banned[:, 0] = -torch.inf  # a banned token on both sides is no error; on one side an infinite one
    assert event_rows._logit_error([(torch.arange(3), banned)], [(torch.arange(3), banned)], 0) == 0.0
    assert event_rows._logit_error([(torch.arange(3), banned)], [(torch.arange(3), same)], 0) == float("inf")


def test_the_editing_rows_are_exact_and_the_block_cache_cheaper(model):
    """ED8: the uncached and block-cached editing samplers agree with the reference event for event; the block
    cache's logit error is rounding (not zero: other matmul shapes), with fewer positions computed."""
    reference, optimized, block = (row(model, v, "editing") for v in ("reference", "optimized", "block"))
    for got in (reference, optimized):
        assert (got["tier"], got["commit_order_match"], got["token_match"], got["max_logit_error"]) == \
            ("E", 1.0, 1.0, 0.0), got
    assert (block["tier"], block["commit_order_match"], block["token_match"]) == ("E", 1.0, 1.0), block
    assert 0 < block["max_logit_error"] < 1e-4
    assert block["positions_per_prompt"] < optimized["positions_per_prompt"]
    assert block["decoder"] == "editing" and block["prompts"] == 2


def test_an_editing_variant_that_edits_otherwise_is_not_exact(model, monkeypatch):
    """Negative control: the block-cached sampler run with another editing threshold drops the row's match."""
    real = event_rows.optimized_editing.generate
    monkeypatch.setattr(event_rows.optimized_editing, "generate",
                        lambda *a, **kw: real(*a, **{**kw, "editing_threshold": 0.05, "threshold": 0.3}))
    assert row(model, "block", "editing")["commit_order_match"] < 1


def test_a_tie_within_the_block_rows_tolerance_is_excused(model, monkeypatch):
    """E2: the block row's divergence at a decision margin within its tolerance counts as a match (a tie), the
    same divergence past the measured tolerance does not; here the candidate differs from the first step on."""
    real = event_rows.optimized_editing.generate
    monkeypatch.setattr(event_rows.optimized_editing, "generate",
                        lambda *a, **kw: real(*a, **{**kw, "threshold": 0.3}))
    assert row(model, "block", "editing")["commit_order_match"] < 1
    excused = row(model, "block", "editing", tolerance=1.0)  # every decision margin (a probability gap) is within 1
    assert excused["commit_order_match"] == 1.0 and excused["logit_tolerance"] == 1.0
