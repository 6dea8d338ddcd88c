"""``veridec check --against diffusiongemma`` (spec/diffusiongemma.md DG11): the example written from scratch in the
official calling convention passes, and so does transformers' own ``generate`` behind its thin wrapper; each
broken variant (examples/diffusiongemma_sampler_broken.py) fails, on a drawn search and on its shrunk case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from veridec.testing import check_decoder, load_candidate, load_check_model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BASE = {"max_new_tokens": 16, "entropy_bound": 0.1, "t_min": 0.4, "t_max": 0.8, "stability_threshold": 1,
        "confidence_threshold": 0.005, "eos_token_id": 1, "pad_token_id": 0, "cache_implementation": "dynamic"}
SHRUNK = {  # the shrunk case each variant's search found (seed 0, 200 cases)
    "stability_off_by_one": ([[2]], 0, {"max_denoising_steps": 2, "confidence_threshold": 0.4}),
    "temperature_one_step_late": ([[2, 4], [2, 4]], 0, {"max_denoising_steps": 3}),
    "renoises_accepted_positions": ([[2]], 0, {"max_denoising_steps": 2}),
    "strict_entropy_bound": ([[2]], 0, {"max_denoising_steps": 2, "entropy_bound": 0.0004147837753407657}),
    "stale_self_conditioning": ([[2]], 0, {"max_denoising_steps": 3}),
    "stop_test_on_row_0": ([[2], [2]], 1, {"max_denoising_steps": 2, "stability_threshold": 0,
                                           "confidence_threshold": 0.4}),
}


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    sys.path.insert(0, str(EXAMPLES))  # the broken variants import the example as a neighbour
    return load_check_model("diffusiongemma")


def candidate(file: str, name: str):
    return load_candidate(f"{EXAMPLES / file}:{name}")


@pytest.mark.parametrize("file", ["diffusiongemma_sampler.py", "diffusiongemma_official.py"])
def test_the_example_and_the_official_generate_pass(model, file):
    """DG11.2: both pass tier E on drawn cases (200 each in the changelog's run; 4 here)."""
    result = check_decoder(candidate(file, "generate"), "diffusiongemma", model=model, max_examples=4)
    assert result.passed, result.markdown()
    assert result.trials == 4
    assert set(result.knobs.values()) == {"effective"} and len(result.knobs) == 5, result.knobs


@pytest.mark.parametrize("name", sorted(SHRUNK))
def test_each_broken_variant_fails_on_its_shrunk_case(model, name):
    """DG11.3: the shrunk case of each variant fails it, and passes the example (the negative control's control)."""
    prompt, seed, settings = SHRUNK[name]
    case = {"prompt": prompt, "attention_mask": None, "seed": seed, "settings": {**BASE, **settings}}
    broken = check_decoder(candidate("diffusiongemma_sampler_broken.py", name), "diffusiongemma", model=model,
                           case=case)
    assert not broken.passed and broken.failure.problems
    fine = check_decoder(candidate("diffusiongemma_sampler.py", "generate"), "diffusiongemma", model=model, case=case)
    assert fine.passed, fine.markdown()


def test_a_search_finds_and_shrinks_the_bug(model):
    """DG11.3: the drawn search finds the strict bound (drawn at an exact entropy sum) within a few cases and
    shrinks it to one row, BOS alone (the other variants' searches: the changelog's run)."""
    result = check_decoder(candidate("diffusiongemma_sampler_broken.py", "strict_entropy_bound"), "diffusiongemma",
                           model=model, max_examples=10)
    assert not result.passed
    assert result.failure.case["prompt"] == [[2]]


def test_tier_a_and_a_mask_model_are_refused(model):
    """DG11.1: the family offers tiers E and S; the convention needs a uniform-state model."""
    decoder = candidate("diffusiongemma_sampler.py", "generate")
    with pytest.raises(ValueError, match="offers tier E, S only"):
        check_decoder(decoder, "diffusiongemma", model=model, tier="A")
    with pytest.raises(ValueError, match="needs a uniform-state model"):
        check_decoder(decoder, "diffusiongemma", model="tiny-llada", max_examples=1)


HOT = {"prompt": [[2, 5, 6]], "attention_mask": None, "seed": 0,
       "settings": {**BASE, "max_new_tokens": 8, "max_denoising_steps": 2, "t_min": 0.9, "t_max": 1.5}}


def test_tier_s_holds_the_example_and_finds_renoised_acceptances(model):
    """DG11.4: at a hot schedule, 60 independent decodes per side: the example has the target's output law
    (smallest corrected p 1.0 on this case), renoising accepted positions does not (p = 0.0034 < 0.01)."""
    fine = check_decoder(candidate("diffusiongemma_sampler.py", "generate"), "diffusiongemma", model=model, tier="S",
                         case=HOT, samples=60)
    assert fine.passed, fine.markdown()
    broken = check_decoder(candidate("diffusiongemma_sampler_broken.py", "renoises_accepted_positions"),
                           "diffusiongemma", model=model, tier="S", case=HOT, samples=60)
    assert not broken.passed and "the output laws differ" in broken.failure.problems[0]


def test_a_candidate_that_ignores_a_knob_is_named(model):
    """DG11.5 (spec EC7): a sampler that always stops at k = 1 whatever ``stability_threshold`` says fails, and the
    knob search names that knob as without effect (its signature names two settings: only those are searched)."""
    sampler = candidate("diffusiongemma_sampler.py", "generate")

    def ignores_stability(model, input_ids, attention_mask=None, max_new_tokens=16, stability_threshold=1):
        return sampler(model, input_ids, attention_mask, max_new_tokens=max_new_tokens, max_denoising_steps=16,
                       eos_token_id=1, pad_token_id=0, stability_threshold=1)

    result = check_decoder(ignores_stability, "diffusiongemma", model=model, max_examples=2)
    assert not result.passed
    assert result.knobs == {"stability_threshold": "no effect"}, result.knobs
