"""What a check reads and reports, on inputs worked by hand (spec/exactness.md EC1, EC2, EC6, ST7): the failure's
counters per side, the count of cases that reproduced official defects, the exact law's refusal of a quota that
is not constant; the command's --case, its tier S default and a tier A baseline that is never rewritten."""

from dataclasses import asdict
from types import SimpleNamespace

import pytest
from test_llada2_check import mask_heavy

from harness.arguments import UsageError
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
                         official_defects={"FD9.1": 3, "FD9.5": 2})
    assert "5 reproduce official defects (FD9.1 x3, FD9.5 x2)" in markdown(result)


def test_the_exact_law_needs_a_constant_quota():
    assert law_rule({"gen_length": 4, "block_length": 4, "steps": 2}).k == 2  # 2 masks per step
    with pytest.raises(ValueError, match="quota per step must be constant"):
        law_rule({"gen_length": 3, "block_length": 3, "steps": 2})  # 2 then 1


@pytest.mark.parametrize("text", ["null", "[]", "3"])
def test_a_case_that_is_not_an_object_is_refused_never_drawn(text):
    from harness.check_command import _parse_case

    with pytest.raises(UsageError, match="--case must be a dict"):
        _parse_case(text)
    assert _parse_case(None) is None  # no --case: cases are drawn


def _check_args(*flags):
    from harness.cli import build_parser

    return build_parser().parse_args(["check", "examples/llada_sampler.py:generate", "--against", "llada", *flags])


def test_tier_s_from_the_command_line_defaults_to_a_false_alarm_rate_of_0_01(monkeypatch):
    import harness.check_command as command

    seen = {}
    monkeypatch.setattr(command, "load_candidate", lambda spec: None)
    monkeypatch.setattr(command, "check_decoder", lambda *args, **kwargs: seen.update(kwargs))
    command._checked(_check_args("--tier", "S"), "default", None, None)
    assert (seen["alpha"], seen["delta"]) == (0.01, 0.05)


def test_an_existing_baseline_is_never_rewritten(tmp_path, capsys):
    """Tier A writes --baseline only when there was none: a rerun with a regression keeps the old baseline."""
    from harness.check_command import _write_verdict
    from veridec.testing.tiers import tier_named

    path = tmp_path / "base.json"
    path.write_text('{"exact_rate": 1.0}')
    result = SimpleNamespace(markdown=lambda: "report\n", to_dict=lambda: {}, metrics={"exact_rate": 0.5}, passed=False)
    args = _check_args("--tier", "A", "--baseline", str(path))
    assert _write_verdict(args, tier_named("A"), {"exact_rate": 1.0}, result) == 1
    assert path.read_text() == '{"exact_rate": 1.0}'
    assert _write_verdict(args, tier_named("A"), None, result) == 1 and '"exact_rate": 0.5' in path.read_text()
