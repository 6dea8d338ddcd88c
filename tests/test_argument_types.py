"""harness.arguments' types at their edges (spec/exactness.md EC2: bad input exits 2 with the flag named): the seed's
range, finite numbers only, probabilities strictly inside (0, 1), a CUDA index that exists."""

import argparse
from types import SimpleNamespace
from unittest import mock

import pytest

from harness.arguments import SEED_LIMIT, UsageError, check_device, number, probability, seed


def test_the_seed_lies_in_0_to_2_to_the_63():
    assert seed(str(SEED_LIMIT - 1)) == SEED_LIMIT - 1
    with pytest.raises(argparse.ArgumentTypeError, match="must lie in"):
        seed(str(SEED_LIMIT))


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_numbers_are_finite(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number"):
        number(0.0)(text)
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number"):
        number(-1e9, 1e9)(text)


def test_a_probability_lies_strictly_between_0_and_1():
    assert probability("0.5") == 0.5
    for text in ("0", "1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a number in \(0, 1\)"):
            probability(text)


def test_a_cuda_index_must_exist():
    with mock.patch("torch.cuda.is_available", return_value=True), mock.patch("torch.cuda.device_count",
                                                                              return_value=2):
        assert str(check_device("cuda:1")) == "cuda:1"
        with pytest.raises(UsageError, match="no such CUDA device"):
            check_device("cuda:2")


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
