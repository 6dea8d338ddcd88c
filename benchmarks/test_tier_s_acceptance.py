"""Tier S acceptance runs too slow for the suite (about 20 s; the suite keeps the sampler's pass and two
caught variants, tests/test_stochastic.py): a decoder of the same law on another random stream passes tier S
and fails tier E, the correct Fast-dLLM dual-cache example passes tier S, and block diffusion's example passes
while a variant of another law fails.

    pytest benchmarks/test_tier_s_acceptance.py
"""

from pathlib import Path

from veridec.testing import check_decoder, load_candidate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DREAM = dict(against="dream", model="tiny-dream", tier="S")


def test_the_same_law_on_another_stream_passes_tier_s_and_fails_tier_e():
    gumbel = load_candidate(f"{EXAMPLES}/dream_sampler_variants.py:gumbel_max_draws")
    assert not check_decoder(gumbel, against="dream", model="tiny-dream", max_examples=20).passed
    assert check_decoder(gumbel, **DREAM, max_examples=2, samples=300).passed


def test_the_correct_fastdllm_dual_cache_example_passes_tier_s():
    dual = dict(against="fastdllm", cache="dual", model="tiny-llada", tier="S", max_examples=2, samples=200)
    assert check_decoder(load_candidate(f"{EXAMPLES}/fastdllm_dual.py:generate"), **dual).passed


def test_block_diffusion_tier_s_passes_the_example_and_catches_a_changed_law():
    """spec/block_diffusion.md BD9 at tier S (about 60 s): the example from the spec passes, a variant whose
    dynamic threshold also counts committed positions (a different output law) fails."""
    sdar = dict(against="sdar", model="tiny-sdar", tier="S", max_batch=1, padding=False)
    assert check_decoder(load_candidate(f"{EXAMPLES}/sdar_sampler.py:generate"), **sdar, max_examples=2,
                         samples=200).passed
    broken = load_candidate(f"{EXAMPLES}/sdar_sampler_broken.py:dynamic_threshold_on_committed")
    assert not check_decoder(broken, **sdar, max_examples=3, samples=300).passed
