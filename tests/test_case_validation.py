"""testing.validation's edges (spec/exactness.md EC2), each at the boundary where one side is accepted and the
next value refused by name: the seed's range, max_batch in rows, steps >= 1, an at_confidence rank >= 1, a
baseline's counts >= 0."""

import pytest

from testing.validation import SEED_LIMIT, checked_baseline, checked_case

SETTINGS = ("gen_length", "steps", "threshold")


def _case(**change):
    case = {"prompt": [[1, 2, 3]], "attention_mask": None, "seed": 0, "settings": {"gen_length": 4, "steps": 4}}
    return {**case, **change}


def test_the_seed_lies_in_0_to_2_to_the_63():
    assert checked_case(_case(seed=SEED_LIMIT - 1), SETTINGS, (), 10)
    for seed in (SEED_LIMIT, -1):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*63\)"):
            checked_case(_case(seed=seed), SETTINGS, (), 10)


def test_max_batch_counts_rows_not_positions():
    assert checked_case(_case(prompt=[[1, 2, 3, 4, 5]]), SETTINGS, (), 10, max_batch=1)
    with pytest.raises(ValueError, match="prompt has 2 rows, more than max_batch 1"):
        checked_case(_case(prompt=[[1], [2]]), SETTINGS, (), 10, max_batch=1)


def test_steps_are_at_least_one():
    assert checked_case(_case(settings={"gen_length": 4, "steps": 1}), SETTINGS, (), 10)
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, 64\]"):
        checked_case(_case(settings={"gen_length": 4, "steps": 0}), SETTINGS, (), 10)


def test_an_at_confidence_rank_is_at_least_one():
    assert checked_case(_case(settings={"gen_length": 4, "threshold": {"at_confidence": 1}}), SETTINGS, (), 10)
    with pytest.raises(ValueError, match="needs an integer r >= 1"):
        checked_case(_case(settings={"gen_length": 4, "threshold": {"at_confidence": 0}}), SETTINGS, (), 10)


def test_a_baselines_counts_are_not_negative():
    assert checked_baseline({"exact_rate": 1.0, "target_model_calls": 0})
    with pytest.raises(ValueError, match=r"target_model_calls must lie in \[0, inf\), got -1"):
        checked_baseline({"exact_rate": 1.0, "target_model_calls": -1})
    with pytest.raises(ValueError, match=r"exact_rate must lie in \[0, 1\]"):
        checked_baseline({"exact_rate": 1.5})

