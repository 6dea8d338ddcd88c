"""Per-forward costs on the default model: a full forward of the canvas vs a cached forward of one block.

    pytest benchmarks/ --benchmark-only

The deterministic counters (query positions per call) go to ``extra_info``; wall times are only compared as
ratios within one run.
"""

import pytest
import torch

from veridec.models.shipped import load_model

PROMPT, GEN, BLOCK = 64, 256, 32


@pytest.fixture(scope="module")
def setup():
    model = load_model("default")
    x = torch.randint(0, model.special.mask_id, (1, PROMPT + GEN), generator=torch.Generator().manual_seed(0))
    _, cache = model.prefill(x)
    block = torch.arange(PROMPT, PROMPT + BLOCK)[None]
    return model, x, cache, block


@torch.no_grad()
def test_full_forward(benchmark, setup):
    model, x, _, _ = setup
    benchmark.extra_info["query_positions"] = x.numel()
    benchmark(lambda: model(x))


@torch.no_grad()
def test_cached_block_forward(benchmark, setup):
    model, x, cache, block = setup
    benchmark.extra_info["query_positions"] = block.numel()
    benchmark(lambda: model.forward_cached(x.gather(1, block), block, cache))
