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


def test_the_exactness_table_holds_compiled_rows_to_eager(monkeypatch):
    """exactness --compile aot_eager: each optimized variant compiled is tier E and equal to its eager decode;
    a compiled decode whose recorded logits moved by 1e-6 (negative control) is not exact."""
    from veridec.harness import compiled_rows
    from veridec.harness.exactness import table_for_model

    table = table_for_model("hmm", ["fastdllm"], 1, 32, compile="aot_eager", mine=lambda unit: unit == "fastdllm")
    rows = [r for r in table if "compiled" in r.variant]  # the eager rows are the table's own tests
    assert [(r.variant, r.tier, r.exact) for r in rows] == [
        ("optimized+compiled", "E", True), ("prefix+compiled", "E", True), ("dual+compiled", "E", True)]

    run_variant = compiled_rows.run_variant

    def nudged(*args, compile=None, **kwargs):
        out, seconds = run_variant(*args, compile=compile, **kwargs)
        if compile:
            for step in out.trace.steps:
                step.logits = [[[value + 1e-6 for value in row] for row in rows] for rows in step.logits]
        return out, seconds

    monkeypatch.setattr(compiled_rows, "run_variant", nudged)
    row = compiled_rows.compiled_row("hmm", "fastdllm", "dual+compiled", "aot_eager", *_hmm_table_inputs())
    assert row["max_logit_error"] > 0 and row["commit_order_match"] == 1


def _hmm_table_inputs():
    """The shipped HMM model, one table prompt, gen 32, block 32, a sequential time of 1 s."""
    from veridec.harness.workloads import prompts_for
    from veridec.models.shipped import load_model

    model = load_model("hmm", dtype=torch.float32)
    prompt, mask = prompts_for("hmm", model, 1, 0)
    return model, prompt, mask, 32, 32, 1.0
