"""``veridec check --against llada2`` (spec/block_diffusion.md BD12.1): the target is LLaDA2.0's loop as recorded from
the official code (tests/golden/llada2.json), and the check holds a decoder written from the spec alone in LLaDA2's
calling convention (examples/llada2_sampler.py) against it, with four broken variants caught."""

import functools
import json
import types
from pathlib import Path

import pytest
import torch

from veridec.models import load_pretrained
from veridec.reference.block_diffusion import llada2_generate
from veridec.testing import check_decoder, load_candidate, load_check_model

GOLDEN = Path(__file__).parent / "golden"
CASES = json.loads((GOLDEN / "llada2.json").read_text())["cases"]
EXAMPLE = "examples/llada2_sampler.py:generate"
BROKEN = "examples/llada2_sampler_broken.py:"


@functools.lru_cache(maxsize=None)
def _golden_model(name):
    return load_pretrained(GOLDEN / "checkpoints" / name, dtype=torch.float64)


def _runnable(case) -> bool:
    s = case["settings"]
    return min(s["steps"], s["gen_length"] // s["minimal_topk"]) > 0 and len(case["prompt"]) == 1


def test_the_target_gives_every_recorded_one_row_output():
    """LLaDA2's names go straight in: the modelling's generate (eos_id given, its output cut after the first EOS
    within gen_length) and the sampler (no eos_id, the whole canvas), torch's RNG seeded as recorded."""
    cases = [c for c in CASES if _runnable(c)]
    assert len(cases) > 150 and {c["loop"] for c in cases} == {"generate", "sampler"}
    for case in cases:
        generate = case["loop"] == "generate"
        torch.manual_seed(case["seed"])
        canvas = llada2_generate(_golden_model(case["checkpoint"]), torch.tensor(case["prompt"]), ties="torch",
                                 eos_id=case["eos_id"] if generate else None, mask_id=case["mask_id"],
                                 **case["settings"]).canvas[0].tolist()
        if generate:
            canvas = canvas[len(case["prompt"][0]):][:case["settings"]["gen_length"]]
            canvas = canvas[:canvas.index(case["eos_id"]) + 1] if case["eos_id"] in canvas else canvas
            canvas = [canvas]
        assert (canvas if generate else [canvas]) == case["official"]["output"], case["id"]


def test_the_target_refuses_what_the_loops_do_not_take():
    model = load_check_model("tiny-llada")
    with pytest.raises(ValueError, match="attention_mask: LLaDA2.0's loops take no padding"):
        llada2_generate(model, torch.tensor([[0, 5, 6]]), torch.tensor([[0, 1, 1]]), gen_length=2, block_length=2)
    with pytest.raises(ValueError, match=r"min\(steps, gen_length // minimal_topk\) = 0"):
        llada2_generate(model, torch.tensor([[5, 6]]), gen_length=1, block_length=2, minimal_topk=2)
    with pytest.raises(ValueError, match="minimal_topk must be an integer >= 1"):
        llada2_generate(model, torch.tensor([[5, 6]]), gen_length=2, block_length=2, minimal_topk=0)


def _check(candidate, model="tiny-llada", trials=40, **options):
    return check_decoder(load_candidate(candidate) if isinstance(candidate, str) else candidate, "llada2",
                         model=model, ties="torch", max_examples=trials, **options)


def test_the_example_passes_with_every_knob_effective():
    result = _check(EXAMPLE)
    assert result.passed and result.trials == 40 and result.skipped == 0, result.markdown()  # none refused
    assert {result.knobs[name] for name in ("threshold", "steps", "minimal_topk", "block_length", "temperature",
                                             "top_k")} == {"effective"}


@pytest.mark.parametrize("variant, model", [("uncapped_steps", "tiny-llada"), ("ranks_by_position", "tiny-llada"),
                                            ("stops_at_first_eos", "default")])  # the trained model ends lines
def test_a_broken_variant_fails(variant, model):
    result = _check(BROKEN + variant, model=model)
    assert not result.passed and result.failure is not None, result.markdown()


def mask_heavy(model):
    """``model`` whose mask token takes 1 / (1 + e) of every position's mass, so that drawn mask tokens leave
    blocks masked when their steps run out (the check models ban the mask token)."""
    def raw_forward(self, *args, **kwargs):
        out = type(self).raw_forward(self, *args, **kwargs)
        others = out.logits.clone()
        others[..., self.special.mask_id] = -torch.inf
        out.logits[..., self.special.mask_id] = torch.logsumexp(others, dim=-1) - 1.0
        return out
    model.raw_forward = types.MethodType(raw_forward, model)
    return model


def test_a_block_whose_steps_run_out_keeps_its_masks():
    """BD12 against BD6.2: where drawn mask tokens outlive the schedule, the example (leave) passes and the
    variant that commits them in one more step fails on its calls and tokens."""
    model = mask_heavy(load_check_model("tiny-llada"))
    assert _check(EXAMPLE, model=model, knobs=False).passed
    result = _check(BROKEN + "commits_after_schedule", model=model, knobs=False)
    assert not result.passed and any("counters differ" in p for p in result.failure.problems)


def test_an_output_cut_at_eos_is_refused_by_its_shape():
    """The modelling's generate returns the generation cut after the first EOS; the check needs the canvas."""
    example = load_candidate(EXAMPLE)

    def cut_at_eos(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0, top_k=None,
                   top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
        x = example(model, prompt, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                    minimal_topk, eos_id)
        return x[:, prompt.shape[1]:prompt.shape[1] + gen_length - 1]  # shorter than the generation

    result = _check(cut_at_eos, trials=5, knobs=False)
    assert not result.passed and "return the whole canvas or the generation alone, uncut" in \
        " ".join(result.failure.problems)
