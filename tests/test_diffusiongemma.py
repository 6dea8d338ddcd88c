"""DiffusionGemma (spec/diffusiongemma.md): both decoders held to transformers' own ``generate`` live on tiny random
models (DG8.1), the rule's parts against the spec's arithmetic, and the refusals (DG1.4, DG7.2)."""

from __future__ import annotations

import pytest
import torch

from veridec.models.diffusiongemma import random_diffusiongemma
from veridec.optimized import diffusiongemma as optimized
from veridec.reference import diffusiongemma as reference

PROMPT = [[2, 5, 6, 7, 8], [0, 0, 2, 9, 10]]
MASK = [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]


@pytest.fixture(scope="module")
def model64():
    torch.set_num_threads(1)
    return random_diffusiongemma(seed=0, dtype=torch.float64)


def _official(model, seed, **settings):
    torch.manual_seed(seed)
    ids, mask = torch.tensor(PROMPT), torch.tensor(MASK)
    return model.hf.generate(ids, attention_mask=mask, **settings).sequences


@pytest.mark.parametrize("settings", [
    dict(max_new_tokens=32, max_denoising_steps=6),
    dict(max_new_tokens=48, max_denoising_steps=4, eos_token_id=1, pad_token_id=0, entropy_bound=2.0,
         confidence_threshold=3.0, stability_threshold=0),
])
def test_both_decoders_equal_the_official_generate_live(model64, settings):
    """DG8.1: same seed, same sequences, padded batch of two, one and several canvases."""
    expected = _official(model64, 7, **settings)
    for decode in (reference.generate, optimized.generate):
        torch.manual_seed(7)
        got = decode(model64, torch.tensor(PROMPT), torch.tensor(MASK), **settings).canvas
        assert torch.equal(got, expected), decode.__module__
