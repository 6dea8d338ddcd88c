"""Verify a decoder written elsewhere (issue: veridec check): ``check_decoder``, ``assert_decoder_matches``,
the check models, strategies (``veridec.testing.strategies``) and a pytest plugin (``veridec.testing.plugin``,
registered as a ``pytest11`` entry point)."""

from .candidates import CandidateError, load_candidate
from .check import CheckResult, check_decoder, run_case
from .models import check_model
from .stochastic import check_law, goodness_of_fit
from .targets import AGAINST, CACHES, target

__all__ = ["AGAINST", "CACHES", "CandidateError", "CheckResult", "assert_decoder_matches", "check_decoder",
           "check_law", "check_model", "goodness_of_fit", "load_candidate", "run_case", "target"]


def assert_decoder_matches(candidate, against="fastdllm", **options) -> CheckResult:
    """``check_decoder`` that raises AssertionError with the markdown report (the shrunk case, the first
    divergence and a reproducer) when the candidate does not match."""
    result = check_decoder(candidate, against, **options)
    assert result.passed, result.markdown()
    return result
