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


@pytest.fixture(scope="module")
def fastguide_canvas():
    """Seed 000's scale: a 256-token prompt and 128 generated positions; windows of radius 2 (10 positions)."""
    model = load_model("default")
    x = torch.randint(0, model.special.mask_id, (1, 256 + 128), generator=torch.Generator().manual_seed(1))
    _, cache = model.prefill(x)
    window = torch.cat([torch.arange(298, 303), torch.arange(310, 315)])[None]  # last commit and next candidate
    return model, x, cache, window


@torch.no_grad()
def test_full_forward_fastguide_canvas(benchmark, fastguide_canvas):
    model, x, _, _ = fastguide_canvas
    benchmark.extra_info["query_positions"] = x.numel()
    benchmark(lambda: model(x))


@torch.no_grad()
def test_sparse_recomputation(benchmark, fastguide_canvas):
    """One FastGuide sparse recomputation (spec/guidance.md F3); the issue's target: <= 15% of a full forward."""
    model, x, cache, window = fastguide_canvas
    benchmark.extra_info["query_positions"] = window.numel()
    benchmark(lambda: model.forward_cached(x.gather(1, window), window, cache))
