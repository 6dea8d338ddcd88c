"""``veridec check --against wino`` (spec/wino.md WN10): a WINO decoder written from the spec alone in LLaDA's
calling convention (examples/wino_sampler.py) passes at tiers E and S; four realistic bugs
(examples/wino_sampler_broken.py) are each caught with a shrunk case that names the first divergent event."""

from pathlib import Path

import pytest
import torch

from veridec.testing import check_decoder, load_candidate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WINO = dict(against="wino", model="tiny-llada")
BROKEN = {  # variant -> what the shrunk report names
    "non_strict_back_threshold": "candidate revoke",
    "revokes_prompt_tokens": "events differ from step 0",
    "revokes_same_step_drafts": "events differ from step 0",
    "no_verification_block": "counters differ",
}


def candidate(name: str):
    file = "wino_sampler.py" if name == "generate" else "wino_sampler_broken.py"
    return load_candidate(f"{EXAMPLES / file}:{name}")


def test_the_example_from_scratch_passes_with_every_knob_effective():
    """200 drawn cases (one row, 1-3 blocks of 1-8, both thresholds drawn as numbers or as confidences of the
    decode itself) agree event for event, token for token and call for call; each knob moves both sides."""
    result = check_decoder(candidate("generate"), **WINO)
    assert result.passed and result.trials == 200, result.markdown()
    assert result.knobs == dict.fromkeys(("threshold", "threshold_back", "temperature", "block_length"),
                                         "effective")


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_broken_variant_is_caught_with_a_shrunk_case(variant):
    result = check_decoder(candidate(variant), **WINO, knobs=False)  # the knob search: the test above
    assert not result.passed and result.failure is not None
    report = result.markdown()
    assert BROKEN[variant] in report, report
    settings = result.failure.case["settings"]
    assert settings["gen_length"] <= 8 and len(result.failure.case["prompt"][0]) <= 3, report


def test_the_strict_back_threshold_needs_a_threshold_drawn_at_a_verified_confidence():
    """The non-strict re-mask test differs only where a verified confidence equals threshold_back: the shrunk
    case's threshold_back is one (resolved from {"at_confidence": r}), and at the drawn numbers alone the variant
    passes (negative control of the resolution)."""
    broken = candidate("non_strict_back_threshold")
    result = check_decoder(broken, **WINO, knobs=False)
    assert not result.passed
    assert result.failure.case["settings"]["threshold_back"] not in (0.9, 0.5, 0.99, 0.2)
    numbers = check_decoder(broken, **WINO, knobs=False, max_examples=60,
                            settings={"threshold": 0.2, "threshold_back": 0.9})
    assert numbers.passed, numbers.markdown()


def test_a_padded_or_batched_case_is_not_drawn():
    """The official function takes one row and no attention mask: every drawn case is one row."""
    seen = []

    def one_row(model, prompt, **settings):
        seen.append(prompt.shape[0])
        return candidate("generate")(model, prompt, **settings)

    result = check_decoder(one_row, **WINO, max_examples=30, knobs=False)
    assert result.passed and set(seen) == {1}


@pytest.mark.parametrize("variant, passes", [("generate", True), ("revokes_same_step_drafts", False)])
def test_tier_s_holds_the_sampled_law(variant, passes):
    result = check_decoder(candidate(variant), **WINO, tier="S", max_examples=2, samples=300)
    assert result.passed is passes, result.markdown()


def test_a_cached_candidate_is_compared_by_tokens_and_counters():
    """A candidate whose calls are not full forwards of one shape has no events to compare: tokens and counters
    are (a prefix-cached WINO makes cached calls: caught by its counters, not refused)."""
    from veridec.optimized.wino import generate as optimized

    def prefix_cached(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                      threshold=0.6, threshold_back=0.9):
        return optimized(model.model, prompt, gen_length, block_length, temperature, mask_id, threshold,
                         threshold_back, cache="prefix").canvas

    result = check_decoder(prefix_cached, **WINO, max_examples=20, knobs=False)
    assert not result.passed and "counters differ" in result.markdown()
    assert torch.is_tensor(result.failure.target.canvas)


@pytest.mark.parametrize("prompt", [[5, 6], [1, 2, 3], [7]])
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_a_back_threshold_at_the_rth_verified_confidence_revokes_r_tokens(prompt, rank):
    """WN10: threshold_back = the r-th smallest verified confidence of block 0's second step, so that step
    revokes exactly the r tokens strictly below it (it drafts more than one, and r stays under the cap)."""
    from veridec.reference.wino import generate
    from veridec.testing import load_check_model
    from veridec.testing.families.wino import resolve_wino_case

    model = load_check_model("tiny-llada")
    settings = {"gen_length": 8, "block_length": 8, "temperature": 0.0, "threshold": 0.2,
                "threshold_back": {"at_confidence": rank}}
    case = {"prompt": [prompt], "attention_mask": None, "seed": 0, "settings": settings}
    resolved = resolve_wino_case(case, model, torch.tensor([prompt]), None)["settings"]
    events = generate(model, torch.tensor([prompt]), **resolved).events
    assert sum(e.step == 1 and e.kind == "revoke" for e in events) == rank
    assert sum(e.step == 1 and e.kind == "commit" for e in events) > 1
