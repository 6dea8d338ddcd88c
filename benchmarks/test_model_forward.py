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
def model():
    return load_model("default")


def cached_canvas(model, length: int, subset: torch.Tensor, seed: int):
    """A random canvas [1, length], its K/V cache, and the positions [1, S] a cached forward recomputes."""
    x = torch.randint(0, model.special.mask_id, (1, length), generator=torch.Generator().manual_seed(seed))
    _, cache = model.prefill(x)
    return model, x, cache, subset[None]


@pytest.fixture(scope="module")
def setup(model):
    return cached_canvas(model, PROMPT + GEN, torch.arange(PROMPT, PROMPT + BLOCK), seed=0)


@pytest.fixture(scope="module")
def fastguide_canvas(model):
    """Seed 000's scale: a 256-token prompt and 128 generated positions; windows of radius 2 (10 positions)
    around the last commit and the next candidate."""
    return cached_canvas(model, 256 + 128, torch.cat([torch.arange(298, 303), torch.arange(310, 315)]), seed=1)


@torch.no_grad()
def time_full_forward(benchmark, setup):
    model, x, _, _ = setup
    benchmark.extra_info["query_positions"] = x.numel()
    benchmark(lambda: model(x))


@torch.no_grad()
def time_cached_forward(benchmark, setup):
    model, x, cache, subset = setup
    benchmark.extra_info["query_positions"] = subset.numel()
    benchmark(lambda: model.forward_cached(x.gather(1, subset), subset, cache))


def test_full_forward(benchmark, setup):
    time_full_forward(benchmark, setup)


def test_cached_block_forward(benchmark, setup):
    time_cached_forward(benchmark, setup)


def test_full_forward_fastguide_canvas(benchmark, fastguide_canvas):
    time_full_forward(benchmark, fastguide_canvas)


def test_sparse_recomputation(benchmark, fastguide_canvas):
    """One FastGuide sparse recomputation (spec/guidance.md GF3), to compare with a full forward of the same
    canvas (``test_full_forward_fastguide_canvas``)."""
    time_cached_forward(benchmark, fastguide_canvas)
