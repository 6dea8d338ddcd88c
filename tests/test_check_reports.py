"""What a check reports, on results worked by hand (spec/exactness.md EC1, EC6, ST7): the failure's counters per
side, the count of cases that reproduced official defects, and the exact law's refusal of a quota that is not
constant."""

from dataclasses import asdict

import pytest
from test_llada2_check import mask_heavy

from testing.check import CheckResult
from testing.exact_law import law_rule
from testing.report import markdown
from veridec.testing import check_decoder, load_candidate, load_check_model


def test_a_failures_counters_are_each_sides_own():
    result = check_decoder(load_candidate("examples/llada2_sampler_broken.py:commits_after_schedule"), "llada2",
                           model=mask_heavy(load_check_model("tiny-llada")), ties="torch", max_examples=20,
                           knobs=False)
    failure, data = result.failure, result.to_dict()["failure"]
    assert data["target_counters"] == asdict(failure.target.counters)
    assert data["candidate_counters"] == asdict(failure.candidate.counters)
    assert data["target_counters"]["model_calls"] < data["candidate_counters"]["model_calls"]


def test_the_official_defects_are_counted_by_case():
    result = CheckResult("c", "fastdllm", "llada", "default", "E", 0, trials=9,
                         upstream_defects={"FD9.1": 3, "FD9.5": 2})
    assert "5 reproduce official defects (FD9.1 x3, FD9.5 x2)" in markdown(result)


def test_the_exact_law_needs_a_constant_quota():
    assert law_rule({"gen_length": 4, "block_length": 4, "steps": 2}).k == 2  # 2 masks per step
    with pytest.raises(ValueError, match="quota per step must be constant"):
        law_rule({"gen_length": 3, "block_length": 3, "steps": 2})  # 2 then 1
