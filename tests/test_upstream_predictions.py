"""The official loops' defect predictions on inputs worked by hand (spec/exactness.md EC6; spec/sequential.md
SQ1.10): the hard-coded EOS ids raise exactly where they lie past the vocabulary, and the canvas before each step
holds the earlier steps' commits only."""

import math
from types import SimpleNamespace

import torch

from testing.families.block import llada_defect
from testing.official import canvases_before
from veridec.testing import load_check_model
from veridec.trace import StepRecord


def _model(vocab_size):
    return SimpleNamespace(special=SimpleNamespace(eos_id=1, eot_id=2), vocab_size=vocab_size)


def test_the_hard_coded_eos_id_raises_from_the_vocabulary_size_on():
    settings = {"logits_eos_inf": True}  # LLaDA-8B's EOS id 126081 alone
    assert llada_defect(settings, None, _model(126081), None, None).kind == "raises"  # ids 0 .. 126080
    assert llada_defect(settings, None, _model(126082), None, None).kind == "deviates"  # 126081 is another token
    assert llada_defect({}, None, _model(10), None, None) is None


def test_each_canvas_holds_the_earlier_steps_only():
    model = load_check_model("tiny-llada")
    mask = model.special.mask_id
    steps = [StepRecord(0, [[3]], [[7]], [[1.0]], [[1.0]], [math.inf]),
             StepRecord(0, [[2, 4]], [[5, 6]], [[1.0, 1.0]], [[1.0, 1.0]], [math.inf])]
    first, second = canvases_before(steps, model, torch.tensor([[11, 12]]), None, 3)
    assert first.tolist() == [[11, 12, mask, mask, mask]]
    assert second.tolist() == [[11, 12, mask, 7, mask]]
