"""Compiled decoding (veridec.optimized.compiled, issue 26): ``compile=`` on the optimized Fast-dLLM decoders
captures the refresh and the cached block step once per shape and decodes exactly as eager mode (tier E: the
same trace, tokens and counters) where the backend runs the eager kernels (``aot_eager``, as
tests/test_device_readiness.py compiles the block step)."""

import pytest
import torch

from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.optimized.compiled import CompiledModel, compile_options, compiled
from veridec.optimized.fastdllm import generate, generate_with_dual_cache

AOT_EAGER = {"backend": "aot_eager"}


@pytest.fixture(scope="module")
def model():
    return never_predicts_mask(random_model("llada", 0, dtype=torch.float32))


@pytest.mark.parametrize("decoder, graphs", [(generate_with_dual_cache, 2), (generate, 1)],
                         ids=["dual", "none"])
def test_compiled_decoding_equals_eager(model, decoder, graphs):
    """Two prompts, one left-padded: the compiled decode's trace (commit order, tokens, confidences, margins,
    gaps, counters) and canvas are eager's; the dual cache compiles two graphs (refresh [B, L], block step
    [B, block]) and a second decode compiles none."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    prompt = torch.randint(0, 90, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(prompt)
    mask[0, :2] = 0
    settings = dict(steps=12, gen_length=12, block_length=4, threshold=0.5)
    eager = decoder(model, prompt, mask, **settings)
    for _ in range(2):
        got = decoder(model, prompt, mask, compile=AOT_EAGER, **settings)
        assert torch.equal(got.canvas, eager.canvas)
        assert got.trace.to_dict() == eager.trace.to_dict()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


def test_the_wrapper_is_the_model_outside_its_core(model):
    wrapped = compiled(model, AOT_EAGER)
    assert isinstance(wrapped, CompiledModel) and compiled(model, AOT_EAGER) is wrapped  # one per model, reused
    assert compiled(wrapped, AOT_EAGER) is wrapped and compiled(model, False) is model
    assert wrapped.special == model.special and wrapped.logit_shift == model.logit_shift
    assert wrapped.static_cache(2, 10) is wrapped.static_cache(2, 10)


def test_compile_options():
    assert compile_options(True) == {"backend": "inductor", "mode": "reduce-overhead"}
    assert compile_options({"mode": "default"}) == {"backend": "inductor", "mode": "default"}
    assert compile_options(AOT_EAGER) == AOT_EAGER and compile_options(False) is None
    with pytest.raises(ValueError, match="compile must be True, False or a dict"):
        compile_options("yes")
