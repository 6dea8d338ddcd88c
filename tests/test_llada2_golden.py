"""LLaDA2.0's block-diffusion loops (spec/block_diffusion.md BD12), recorded from ZHZisZZ/dllm by
``python -m tools.golden.llada2`` (tests/golden/llada2.json, data only), replayed against veridec's block
decoders: the modelling's ``generate`` and the sampler's ``sample`` are veridec's ``block_diffusion_generate`` with
the dynamic strategy, ``torch.topk``'s ties and ``after_schedule="leave"``, token for token and call for call;
with veridec's intent (``after_schedule="commit"``, BD6.2) exactly the cases whose blocks ran out of steps with
masks left differ; a spent step budget (``gen_length // minimal_topk == 0``) is refused by name."""

import functools
import json
from pathlib import Path

import pytest
import torch

from veridec.models import load_pretrained
from veridec.optimized.block_diffusion import block_diffusion_generate as cached_generate
from veridec.reference.block_diffusion import block_diffusion_generate as reference_generate

GOLDEN = Path(__file__).parent / "golden"
DATA = json.loads((GOLDEN / "llada2.json").read_text())
CASES = DATA["cases"]


@functools.lru_cache(maxsize=None)
def _model(name):
    return load_pretrained(GOLDEN / "checkpoints" / name, dtype=torch.float64)


def steps_of(case) -> int:
    """The loops' ``steps = min(steps, gen_length // minimal_topk)``."""
    settings = case["settings"]
    return min(settings["steps"], settings["gen_length"] // settings["minimal_topk"])


def settings_of(case, after_schedule: str) -> dict:
    """veridec's settings for the case: LLaDA2.0's threshold rule is BD5's dynamic strategy; its generate stops
    after a block holding EOS (BD5.5); the sampler never stops (``eos_early_stop`` off)."""
    s = case["settings"]
    return dict(gen_length=s["gen_length"], block_length=s["block_length"], denoising_steps=steps_of(case),
                temperature=s["temperature"], top_k=s["top_k"] or 0, top_p=s["top_p"] or 1.0,
                remasking_strategy="low_confidence_dynamic", confidence_threshold=s["threshold"],
                stopping_criteria_idx=[case["eos_id"]] if case["loop"] == "generate" else None, ties="torch",
                after_schedule=after_schedule)


def generated(case, canvas: list[int]) -> list[int]:
    """What the loop returns of a row's canvas: generate, the generation up to the first EOS (kept) within
    gen_length; the sampler, the whole canvas."""
    if case["loop"] == "sampler":
        return canvas
    gen = canvas[len(case["prompt"][0]):][:case["settings"]["gen_length"]]
    return gen[:gen.index(case["eos_id"]) + 1] if case["eos_id"] in gen else gen


def decode(fn, case, after_schedule: str):
    """Each row alone, torch's global RNG seeded as recorded -> (outputs, traces)."""
    model, outputs, traces = _model(case["checkpoint"]), [], []
    for row in case["prompt"]:
        torch.manual_seed(case["seed"])
        decoded = fn(model, torch.tensor([row]), **settings_of(case, after_schedule))
        outputs.append(generated(case, decoded.canvas[0].tolist()))
        traces.append(decoded.trace)
    return outputs, traces


def leaves_masks(case) -> bool:
    """The recorded outcome holds a mask in what the loop generated: a block's steps ran out with masks left."""
    prompt = len(case["prompt"][0]) if case["loop"] == "sampler" else 0
    return any(case["mask_id"] in row[prompt:] for row in case["official"]["output"])


RUNNABLE = [c for c in CASES if steps_of(c) > 0]


def test_the_recording_covers_both_loops_and_their_settings():
    assert len(CASES) >= 200 and {c["official"]["status"] for c in CASES} == {"ok"}
    assert {c["loop"] for c in RUNNABLE} == {"generate", "sampler"}
    assert {c["settings"]["temperature"] > 0 for c in RUNNABLE} == {True, False}
    assert any(c["settings"]["top_k"] for c in RUNNABLE) and any(c["settings"]["top_p"] for c in RUNNABLE)
    assert any(len(c["prompt"]) > 1 for c in RUNNABLE) and 0 < sum(map(leaves_masks, RUNNABLE)) < len(RUNNABLE)
    assert {len(c["prompt"][0]) % c["settings"]["block_length"] == 0 for c in RUNNABLE} == {True, False}


@pytest.mark.parametrize("case", RUNNABLE, ids=lambda c: f"{c['id']}-{c['loop']}")
def test_a_recorded_case_replays(case):
    """Reference and cached decoder, each row alone, as the loop: the same output; one row: the same model calls
    (one forward of the canvas up to the block's end per step) as the reference's steps."""
    official = case["official"]
    for fn in (reference_generate, cached_generate):
        outputs, traces = decode(fn, case, "leave")
        assert outputs == official["output"], fn.__module__
    if len(case["prompt"]) == 1:
        block = case["settings"]["block_length"]
        _, (trace,) = decode(reference_generate, case, "leave")
        assert [width for width, _ in official["calls"]] == [(step.block + 1) * block for step in trace.steps]


def test_the_intended_decode_differs_exactly_where_blocks_ran_out_of_steps():
    """BD6.2 against BD12: with veridec's default a block past its schedule takes one more step that commits its
    masks; the cases that differ are those whose recorded output kept a mask, and only those."""
    differing = [c["id"] for c in RUNNABLE if decode(reference_generate, c, "commit")[0] != c["official"]["output"]]
    assert differing == [c["id"] for c in RUNNABLE if leaves_masks(c)]


def test_a_batch_of_equal_prompts_equals_the_samplers_batch():
    """The sampler decodes its rows together (greedy here): the cached decoder's batch gives its rows."""
    batches = [c for c in RUNNABLE if len(c["prompt"]) > 1]
    assert batches
    for case in batches:
        decoded = cached_generate(_model(case["checkpoint"]), torch.tensor(case["prompt"]),
                                  **settings_of(case, "leave"))
        assert decoded.canvas.tolist() == case["official"]["output"], case["id"]


def test_a_step_budget_of_zero_is_refused_by_name():
    """``gen_length // minimal_topk == 0``: the loops run no forward and return the masks; veridec refuses it."""
    spent = [c for c in CASES if steps_of(c) == 0]
    assert spent and all(leaves_masks(c) for c in spent)
    with pytest.raises(ValueError, match="denoising_steps"):
        reference_generate(_model(spent[0]["checkpoint"]), torch.tensor(spent[0]["prompt"]),
                           **settings_of(spent[0], "leave"))


def test_after_schedule_is_refused_by_name():
    with pytest.raises(ValueError, match="after_schedule"):
        reference_generate(_model("sdar"), torch.tensor([[1, 2]]), gen_length=2, block_length=2, after_schedule="stay")
