"""veridec.rules.sdar's selections by hand (spec/block_diffusion.md BD5, BD6, BD10): the cases where a one-line slip
in a comparison or a range shows, worked out from the clauses."""

import pytest
import torch

from veridec.rules.sdar import SDARParams, official_overwrites, official_select, select

MASKED = torch.tensor([True, False, True, True])  # position 1 committed (a drawn mask token left 0 masked)
CONFIDENCE = torch.tensor([0.2, 0.9, 0.7, 0.5], dtype=torch.float64)
PROBS = torch.full((4, 3), 1 / 3, dtype=torch.float64)


def params(strategy: str, **more) -> SDARParams:
    return SDARParams(gen_length=8, block_length=4, denoising_steps=2, remasking_strategy=strategy, **more)


def chosen(mask: torch.Tensor) -> list[int]:
    return mask.nonzero().flatten().tolist()


def test_sequential_takes_the_first_masks_not_a_range():
    """BD6.3: the first n masked positions (0 and 2), not the range [0, 2) that holds a committed position."""
    assert chosen(select(params("sequential"), MASKED, CONFIDENCE, PROBS, 2)) == [0, 2]
    assert chosen(official_select(params("sequential"), MASKED, CONFIDENCE, 0)) == [0, 1]  # BD10: the range
    assert official_overwrites(params("sequential"), MASKED, 0)


def test_the_dynamic_threshold_is_strict():
    """BD5.2: confidences equal to the threshold are not above it: with every confidence 1 (top_k = 1) and the
    threshold 1, the quota's top-n commits, not every mask."""
    ones = torch.ones(4, dtype=torch.float64)
    rule = params("low_confidence_dynamic", confidence_threshold=1.0)
    assert chosen(select(rule, MASKED, ones, PROBS, 1)) == [0]  # lowest position first among equals
    above = lambda threshold: chosen(select(params("low_confidence_dynamic", confidence_threshold=threshold), MASKED,
                                            CONFIDENCE, PROBS, 1))  # noqa: E731
    assert above(0.6) == [2]  # one mask above 0.6 (0.7; the committed 0.9 does not count): the quota's worth
    assert above(0.4) == [2, 3]  # two above 0.4, more than the quota: all of them


def test_the_published_static_selection_overwrites_past_the_masks():
    """BD10: a quota of 4 over 3 masks picks the committed position too (torch.topk over -inf off the masks)."""
    rule = SDARParams(gen_length=8, block_length=4, denoising_steps=1, remasking_strategy="low_confidence_static")
    assert chosen(official_select(rule, MASKED, CONFIDENCE, 0)) == [0, 1, 2, 3]
    assert chosen(select(rule, MASKED, CONFIDENCE, PROBS, 4)) == [0, 2, 3]  # BD6.3: capped at the masks
    assert official_overwrites(rule, MASKED, 0) and not official_overwrites(rule, torch.ones(4, dtype=torch.bool), 0)


def test_a_row_records_selection_gap_against_the_strongest_mask_left_by_hand():
    """SQ0.5 / BD9: the selection gap is the weakest commit's confidence minus the strongest mask left's: committing
    position 0 (0.9) of four masks whose others hold 0.5, 0.7 and 0.2 gives 0.9 - 0.7; a position that drew the
    mask token stays masked (BD6.2) and counts among the masks left; nothing left gives +inf."""
    from veridec.rules.sdar import row_record

    mask_id, masked = 9, torch.tensor([True, True, True, True])
    x0, x0_p = torch.tensor([1, 2, 3, 4]), torch.tensor([0.9, 0.5, 0.7, 0.2])
    logits = torch.zeros(4, 10)
    one = row_record(masked, torch.tensor([True, False, False, False]), x0, x0_p, logits, 10, mask_id)
    assert one.positions == [10] and one.selection_gap == pytest.approx(0.9 - 0.7)
    drew_mask = row_record(masked, torch.tensor([True, False, True, False]), torch.tensor([1, 2, mask_id, 4]), x0_p,
                           logits, 0, mask_id)
    assert drew_mask.positions == [0] and drew_mask.selection_gap == pytest.approx(0.9 - 0.7)
    every = row_record(masked, masked, x0, x0_p, logits, 0, mask_id)
    assert every.positions == [0, 2, 1, 3] and every.selection_gap == float("inf")
