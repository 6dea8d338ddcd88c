"""``veridec check --against editing`` (spec/editing.md ED7): LLaDA2.1's block sampler with edits written from the
spec alone in the official sampler's call (examples/editing_sampler.py: an additive block-causal mask over a
window that grows block by block) passes; four realistic bugs (examples/editing_sampler_broken.py) are each
caught with a shrunk case."""

from pathlib import Path

import pytest
import torch

from veridec.adapters import LLaDAConvention
from veridec.testing import check_decoder, load_candidate, load_check_model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EDITING = dict(against="editing", model="tiny-llada")
BROKEN = {  # variant -> what the shrunk report names
    "non_strict_editing_threshold": "candidate edit",
    "edits_prompt_tokens": "candidate edit",
    "edits_unchanged_tokens": "counters differ",  # same tokens rewritten: no event to see, extra forwards
    "no_post_steps": "counters differ",
}


def candidate(name: str):
    file = "editing_sampler.py" if name == "generate" else "editing_sampler_broken.py"
    return load_candidate(f"{EXAMPLES / file}:{name}")


def test_the_example_from_scratch_passes_with_every_knob_effective():
    result = check_decoder(candidate("generate"), **EDITING)
    assert result.passed and result.trials == 200, result.markdown()
    assert result.knobs == dict.fromkeys(("threshold", "editing_threshold", "max_post_steps", "num_to_transfer",
                                          "eos_early_stop", "temperature"), "effective")


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_broken_variant_is_caught_with_a_shrunk_case(variant):
    result = check_decoder(candidate(variant), **EDITING, knobs=False)
    assert not result.passed and result.failure is not None
    report = result.markdown()
    assert BROKEN[variant] in report, report
    assert result.failure.case["settings"]["max_new_tokens"] <= 4, report


def test_the_strict_edit_threshold_needs_a_threshold_drawn_at_an_edit_confidence():
    """The non-strict edit test differs only where a confidence equals editing_threshold: the shrunk case's is one
    (resolved from {"at_confidence": r}); at temperature 0 and a threshold no confidence meets, the variant passes
    (negative control; at T > 0 top-p can leave two twin tokens at exactly 0.5, which 0.5 would meet)."""
    broken = candidate("non_strict_editing_threshold")
    result = check_decoder(broken, **EDITING, knobs=False)
    assert result.failure.case["settings"]["editing_threshold"] not in (0.9, 0.5, 0.2)
    numbers = check_decoder(broken, **EDITING, knobs=False, max_examples=60,
                            settings={"editing_threshold": 0.3, "temperature": 0.0})
    assert numbers.passed, numbers.markdown()


def test_the_additive_mask_is_the_boolean_one():
    """LLaDA2's additive bfloat16 mask (0 attends, -inf not) and the same layout as booleans give one forward."""
    model = load_check_model("tiny-llada")
    sees = torch.tril(torch.ones(2, 2)).repeat_interleave(3, 0).repeat_interleave(3, 1)  # [6, 6] block-causal
    additive = sees.log().to(torch.bfloat16)[None, None]  # [1, 1, 6, 6]
    x, adapter = torch.randint(0, 90, (1, 6)), LLaDAConvention(model)
    positions = torch.arange(6)[None]  # [1, 6]
    got = adapter(x, attention_mask=additive, position_ids=positions).logits
    assert torch.equal(got, adapter(x, attention_mask=sees.bool()[None, None], position_ids=positions).logits)
    assert not torch.equal(got, adapter(x, attention_mask=torch.ones(1, 1, 6, 6, dtype=torch.bool)).logits)
