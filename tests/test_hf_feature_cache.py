"""Issue 24's example (spec/exactness.md EC9): a dLLM-Cache-style prompt-feature cache hooked into transformers'
Llama (bidirectional, loaded from a LLaDA checkpoint folder by the example's own code) is tier E exact when it
refreshes every forward, measured by its drift at tier A when it refreshes every 4th or 8th forward (the 8th
worse than a baseline of the 4th), and the variant that leaves its hooks installed fails that baseline."""

from pathlib import Path

import pytest

from veridec.testing import check_decoder, load_candidate, load_check_model
from veridec.testing.own_model import preflight

EXAMPLE = Path(__file__).parents[1] / "examples" / "hf_feature_cache.py"
OWN = f"{EXAMPLE}:load"
MEASURES = ("exact_rate", "mean_token_match", "drift_p50", "drift_p99")


def at(refresh: int, name: str = "generate"):
    cache = load_candidate(f"{EXAMPLE}:{name}")

    def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                 remasking="low_confidence", mask_id=126336):
        return cache(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id, refresh=refresh)

    return generate


@pytest.fixture(scope="module")
def folder(tiny_folders):
    return str(tiny_folders["llada"])


@pytest.fixture(scope="module")
def every_fourth(folder):
    return check_decoder(at(4), "llada", model=folder, tier="A", max_examples=20, candidate_model=OWN, knobs=False)


def test_the_transformers_twin_passes_the_preflight_within_rounding(folder):
    difference = preflight(load_candidate(OWN)(folder), load_check_model(folder), "llada")
    assert 0 < difference < 1e-5  # another implementation of the same function: rounding, not zero


def test_refreshing_every_forward_is_exact(folder):
    result = check_decoder(at(1), "llada", model=folder, max_examples=30, candidate_model=OWN)
    assert result.passed, result.markdown()
    assert set(result.knobs.values()) == {"effective"} and 0 < result.model_difference < 1e-5


def test_stale_prompt_features_are_measured_and_gated(folder, every_fourth):
    four = every_fourth.metrics
    assert four["exact_rate"] < 1 and four["drift_p99"] > 0.1, four
    eight = check_decoder(at(8), "llada", model=folder, tier="A", max_examples=20, candidate_model=OWN,
                          knobs=False, baseline=four)
    assert eight.metrics["drift_p50"] > four["drift_p50"] and not eight.passed, eight.metrics


def test_hooks_left_installed_fail_the_baseline(folder, every_fourth):
    broken = check_decoder(at(4, "left_installed"), "llada", model=folder, tier="A", max_examples=20,
                           candidate_model=OWN, knobs=False, baseline=every_fourth.metrics)
    assert not broken.passed
    assert broken.metrics["mean_token_match"] < every_fourth.metrics["mean_token_match"], broken.metrics
