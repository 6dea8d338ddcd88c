"""The official block-diffusion decoders' recorded runs (tests/golden/sdar.json, ``python -m tools.golden.sdar``;
spec/block_diffusion.md) replayed with veridec's reference and cached decoders on the same checkpoints.

Where the official run completes without a defect, both decoders return its canvas token for token, and the
cached decoder makes its model calls (first position, width, store, tokens fed) one for one. Where it raises or
deviates, veridec's prediction (``testing.families.sdar.sdar_defect``, BD7) names the defect, the exception type
agrees, and every denoising call before that step fed the official tokens. The logits of the official modelling
(both files) equal veridec's block-causal forward to float64 rounding.
"""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tools.golden.checkpoints import load_checkpoints
from veridec.optimized.block_diffusion import block_diffusion_generate as cached
from veridec.reference.block_diffusion import block_diffusion_generate as reference
from veridec.testing.families.sdar import sdar_defect

GOLDEN = Path(__file__).parent / "golden"
DATA = json.loads((GOLDEN / "sdar.json").read_text())
EXPECTED_ERRORS = {"BD7.1": ("RuntimeError",), "BD7.2": ("UnboundLocalError", "ValueError"),
                   "BD7.4": ("IndexError",), "BD7.5": ("RuntimeError",)}
CASES = [case for case in DATA["cases"] if case["modelling"] == case["generate"]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return load_checkpoints(DATA, GOLDEN, tmp_path_factory.mktemp("sdar"))


class CallLog:
    """The model with its ``forward_blocks`` calls logged as the recorder logs the official ones."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward_blocks(self, tokens, start, cache, block_size, **options):
        self.calls.append([start, tokens.shape[1], options["store"], tokens[0].tolist()])
        return self.model.forward_blocks(tokens, start, cache, block_size, **options)


def settings_of(case: dict) -> dict:
    return {**case["settings"], "ties": "torch"}  # the published selection calls torch.topk (BD5)


def run(decoder, model, case: dict) -> tuple[list, list]:
    """(the canvas row, the trace's steps)."""
    torch.manual_seed(case["seed"])
    decoded = decoder(model, torch.tensor(case["prompt"]), case["mask_id"], **settings_of(case))
    return decoded.canvas[0].tolist(), decoded.trace.steps


def test_the_recording_holds_enough_cases_of_every_kind():
    outcomes = [case["official"]["status"] for case in CASES]
    assert len(DATA["cases"]) >= 200 and outcomes.count("ok") >= 150
    strategies = {case["settings"]["remasking_strategy"] for case in CASES if case["official"]["status"] == "ok"}
    assert strategies == {"sequential", "low_confidence_static", "low_confidence_dynamic"}
    assert {case["generate"] for case in CASES} == {"dllm_rl", "jetastra"}


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"case{case['id']}")
def test_a_recorded_case_replays(models, case):
    model, official = models[case["checkpoint"]], case["official"]
    prompt = torch.tensor(case["prompt"])
    before = sdar_defect(case["settings"], [], prompt, case["mask_id"])
    if before is not None and before.clause in ("BD7.2", "BD7.5"):  # a batch, entropy_bounded: from the settings
        assert official["error"].split(":")[0] in EXPECTED_ERRORS[before.clause]
        assert sum(not call[2] for call in official["calls"]) <= 1  # at the latest in the first denoising step
        return
    canvas, steps = run(reference, model, case)
    log = CallLog(model)
    fast_canvas, fast_steps = run(cached, log, case)
    assert fast_canvas == canvas and [s.positions for s in fast_steps] == [s.positions for s in steps]
    found = sdar_defect(case["settings"], steps, prompt, case["mask_id"])
    denoising = [call for call in official["calls"] if not call[2]]
    ours_denoising = [call for call in log.calls if not call[2]]
    if official["status"] == "ok" and found is None:
        assert canvas == official["output"]
        assert log.calls == official["calls"]
        return
    assert found is not None, f"the official run {official['status']} ({official.get('error')}), nothing predicted"
    assert ours_denoising[:found.at_step] == denoising[:found.at_step]
    if found.kind == "raises":
        assert official["status"] == "raises" and official["error"].split(":")[0] in EXPECTED_ERRORS[found.clause]
        assert len(denoising) >= found.at_step
    else:  # after an overwrite the official run may complete otherwise, or raise later
        assert found.clause == "BD7.3" and (official["status"] == "raises" or official["output"] != canvas)


def test_jetastras_mask_on_dllm_rls_modelling_raises_at_the_first_call():
    """BD7.6: JetAstra's generate passes a 3-D mask, which dLLM-RL's modelling refuses (not a decoder defect)."""
    pairs = [case for case in DATA["cases"] if case["modelling"] != case["generate"]]
    assert pairs and all(case["official"]["error"].startswith("IndexError") and len(case["official"]["calls"]) == 1
                         for case in pairs)


@pytest.mark.parametrize("key", sorted(DATA["forward"]))
def test_the_official_modelling_equals_our_block_causal_forward(models, key):
    """BD1: both official modelling files (float64) against veridec's forward with the block-causal bias."""
    checkpoint = key.split("/")[0]
    model = models[checkpoint]
    for entry in DATA["forward"][key]:
        tokens = torch.tensor([entry["tokens"]])
        theirs = torch.from_numpy(np.frombuffer(base64.b64decode(entry["logits"]), dtype=np.float64).copy())
        ours = model(tokens, block_size=entry["block_size"]).logits[0].double()
        assert (ours.flatten() - theirs).abs().max().item() <= 1e-12


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"case{case['id']}")
def test_the_published_behaviour_replays_every_recorded_case(models, case):
    """BD10: the cached decoder with ``loop="official"`` does what the published code did on every recorded case,
    defects included: the same canvas and calls where it completed (overwrites too), an exception where it
    raised (IndexError past the schedule)."""
    log = CallLog(models[case["checkpoint"]])
    official = case["official"]
    torch.manual_seed(case["seed"])
    try:
        decoded = cached(log, torch.tensor(case["prompt"]), case["mask_id"], **settings_of(case), loop="official")
    except (IndexError, RuntimeError) as raised:
        assert official["status"] == "raises", f"the official loop raised {raised!r}; the official run completed"
        if isinstance(raised, IndexError):
            assert official["error"].startswith("IndexError") and log.calls == official["calls"]
        return
    assert official["status"] == "ok", f"the official run raised {official['error']}; the official loop completed"
    assert decoded.canvas[0].tolist() == official["output"] and log.calls == official["calls"]
