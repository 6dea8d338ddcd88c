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
                                          "eos_early_stop", "top_k", "top_p", "temperature"), "effective")


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


@pytest.mark.parametrize("against", ["editing", "wino"])
def test_the_revocable_targets_refuse_padding(against):
    """One row, no attention mask (spec ED1, WN1): a padded case is refused by name, never decoded unpadded."""
    from veridec.testing.targets import target

    model = load_check_model("tiny-llada")
    prompt, mask = torch.tensor([[98, 5]]), torch.tensor([[0, 1]])
    length = {"editing": {"max_new_tokens": 2, "block_size": 2}, "wino": {"gen_length": 2, "block_length": 2}}
    with pytest.raises(ValueError, match="attention_mask: .* takes no padding"):
        target(against).decode(model, prompt, mask, "lowest", **length[against])


def _resolved(settings, prompt=(5, 6), seed=0):
    from veridec.testing.families.editing import resolve_editing_case

    model = load_check_model("tiny-llada")
    case = {"prompt": [list(prompt)], "attention_mask": None, "seed": seed, "settings": settings}
    return model, resolve_editing_case(case, model, torch.tensor(case["prompt"]), None)["settings"]


@pytest.mark.parametrize("rank, temperature", [(1, 0.0), (2, 0.0), (3, 0.0), (2, 0.7)])
def test_a_threshold_at_the_rth_confidence_transfers_r_masks_first(rank, temperature):
    """ED7: threshold = the r-th largest first-step confidence (0 = the largest), so the first step transfers
    exactly the r masks above it (strictly), with num_to_transfer 1 and a block of more than r masks; at T > 0
    under the case's seed, as the two sides run."""
    from veridec.reference.editing import generate

    base = {"max_new_tokens": 6, "block_size": 6, "temperature": temperature, "editing_threshold": 0.9}
    model, settings = _resolved({**base, "threshold": {"at_confidence": rank}}, seed=3)
    torch.manual_seed(3)
    first = [e for e in generate(model, torch.tensor([[5, 6]]), **settings).events if e.step == 0]
    assert len(first) == rank


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_resolution_runs_under_the_case_seed_whatever_the_rng_state(seed):
    """ED7 at T = 1.5 (draws far from the argmax): the resolving decode runs under the case's seed, so the
    r-th confidence it reads is the r-th of the decode both sides then run, even when the global RNG was left
    elsewhere before resolving (here: advanced by a draw, or seeded otherwise)."""
    from veridec.reference.editing import generate

    base = {"max_new_tokens": 6, "block_size": 6, "temperature": 1.5, "editing_threshold": 0.9}
    for rank, before in [(1, 1000 + seed), (2, 2000 + seed), (3, 3000 + seed)]:
        torch.manual_seed(before)
        torch.rand(7)
        model, settings = _resolved({**base, "threshold": {"at_confidence": rank}}, seed=seed)
        torch.manual_seed(seed)
        first = [e for e in generate(model, torch.tensor([[5, 6]]), **settings).events if e.step == 0]
        assert len(first) == rank, (rank, before)


def test_both_thresholds_resolve_together_and_a_second_step_without_edits_falls_back():
    both = {"max_new_tokens": 6, "block_size": 6, "temperature": 0.0, "threshold": {"at_confidence": 1},
            "editing_threshold": {"at_confidence": 0}, "max_post_steps": 2}
    _, settings = _resolved(both)
    assert all(isinstance(settings[name], float) for name in ("threshold", "editing_threshold"))
    one_block_step = {**both, "block_size": 1, "max_new_tokens": 2, "max_post_steps": 0}  # step 1: the next block
    _, settings = _resolved(one_block_step)
    assert settings["editing_threshold"] == 0.9


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_an_editing_threshold_at_the_rth_confidence_is_met_by_a_second_step_edit(rank):
    """ED7: editing_threshold = the r-th largest confidence among the second step's edits at editing_threshold 0
    of the case's own decode (its threshold kept): that decode edits there with exactly that confidence, and at
    the resolved value the r larger ones remain edits (strictly above it)."""
    from veridec.reference.editing import generate

    base = {"max_new_tokens": 6, "block_size": 6, "temperature": 0.0, "threshold": 0.2, "max_post_steps": 2}
    model, settings = _resolved({**base, "editing_threshold": {"at_confidence": rank}})
    assert settings["editing_threshold"] != 0.9, "the case must edit at its second step"
    at_zero = generate(model, torch.tensor([[5, 6]]), **{**settings, "editing_threshold": 0.0}).events
    second = sorted((e.confidence for e in at_zero if e.step == 1 and e.kind == "edit"), reverse=True)
    assert second[rank] == settings["editing_threshold"]
    kept = [e for e in generate(model, torch.tensor([[5, 6]]), **settings).events if e.step == 1 and e.kind == "edit"]
    assert len(kept) == rank


@pytest.mark.parametrize("against", ["editing", "wino", "llada2"])
def test_a_one_row_target_draws_one_row_cases_only(against):
    """ED1, WN1, BD12.1: the official functions take one row, so their targets never draw a batch (a batch would
    only be refused, and every case of it left unchecked)."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    from veridec.testing.strategies import cases
    from veridec.testing.targets import target

    goal = target(against)
    strategy = cases(load_check_model("tiny-llada"), goal, set(goal.settings), {}, max_batch=3)
    with pytest.raises(NoSuchExample):
        find(strategy, lambda case: len(case["prompt"]) > 1,
             settings=settings(max_examples=200, database=None, suppress_health_check=list(HealthCheck)))
