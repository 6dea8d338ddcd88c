"""Verify a decoder written elsewhere: ``check_decoder`` (tiers E, A, S: ``tiers.TIERS``), an engine's dLLM
algorithm by logit replay (``check_engine``, spec/engines.md),
``assert_decoder_matches``, the check models (``load_check_model``) and strategies (``veridec.testing.strategies``).
The pytest plugin that serves them as fixtures is ``veridec.harness.pytest_plugin`` (a ``pytest11`` entry point
that imports nothing heavy)."""

from .candidates import CandidateError, load_candidate
from .check import CheckResult, check_decoder
from .engine_check import EngineResult, check_engine
from .exact import run_case
from .models import load_check_model
from .running import CheckSetup
from .stochastic import check_law, goodness_of_fit
from .targets import AGAINST, CACHES, target
from .tiers import TIERS, Tier

__all__ = ["AGAINST", "CACHES", "TIERS", "CandidateError", "CheckResult", "CheckSetup", "EngineResult", "Tier",
           "assert_decoder_matches", "check_decoder", "check_engine", "check_law", "goodness_of_fit", "load_candidate",
           "load_check_model", "run_case", "target"]


def assert_decoder_matches(candidate, against="fastdllm", **options) -> CheckResult:
    """``check_decoder`` that raises AssertionError with the markdown report (the shrunk case, the first
    divergence and a reproducer) when the candidate does not match."""
    result = check_decoder(candidate, against, **options)
    assert result.passed, result.markdown()
    return result
