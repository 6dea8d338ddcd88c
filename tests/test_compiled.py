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
    from veridec.harness import compiled_rows, rows
    from veridec.harness.exactness import table_for_model

    table = table_for_model("hmm", ["fastdllm"], 1, 32, compile="aot_eager", mine=lambda unit: unit == "fastdllm")
    compiled = [r for r in table if "compiled" in r.variant]  # the eager rows are the table's own tests
    assert [(r.variant, r.tier, r.exact) for r in compiled] == [
        ("optimized+compiled", "E", True), ("prefix+compiled", "E", True), ("dual+compiled", "E", True)]

    run_variant = rows.run_variant

    def nudged(*args, compile=None, **kwargs):
        out, seconds = run_variant(*args, compile=compile, **kwargs)
        if compile:
            for step in out.trace.steps:
                step.logits = [[[value + 1e-6 for value in row] for row in logits] for logits in step.logits]
        return out, seconds

    monkeypatch.setattr(rows, "run_variant", nudged)
    kind = next(k for k in compiled_rows.compiled_kinds("aot_eager") if k.label == "dual+compiled")
    row = rows.build_row(_hmm_table_inputs("aot_eager"), "fastdllm", kind)
    assert row["max_logit_error"] > 0 and row["commit_order_match"] == 1


def _hmm_table_inputs(compile=None):
    """The shipped HMM model's table inputs: one table prompt, gen 32, block 32, a sequential time of 1 s."""
    from veridec.harness.rows import SEQUENTIAL, TableInputs
    from veridec.harness.workloads import prompts_for
    from veridec.models.shipped import load_model

    model = load_model("hmm", dtype=torch.float32)
    prompt, mask = prompts_for("hmm", model, 1, 0)
    return TableInputs("hmm", model, prompt, mask, 32, 32, compile, measured={SEQUENTIAL: 1.0})


BLOCK_PROMPT = torch.tensor([[0, 5, 17, 3, 9], [9, 11, 40, 2, 7]])
BLOCK_MASK = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])  # row 0 one shorter: a whole padding block for it


def _block_decodes(compile=False):
    """Block diffusion's cached decoders (spec BD8, BD11) on a padded batch of random SDAR model, greedy."""
    from veridec.optimized.block_diffusion import block_diffusion_generate
    from veridec.optimized.block_parallel import parallel_generate
    from veridec.rules.presets import preset

    model = _sdar_model()
    return [block_diffusion_generate(model, BLOCK_PROMPT, attention_mask=BLOCK_MASK, gen_length=10, block_length=4,
                                     denoising_steps=2, temperature=0.0, compile=compile),
            parallel_generate(model, BLOCK_PROMPT, BLOCK_MASK, rule=preset("fastdllm"), gen_length=10,
                              block_length=4, compile=compile)]


_SDAR = []


def _sdar_model():
    if not _SDAR:
        _SDAR.append(random_model("sdar", 3))
    return _SDAR[0]


def test_compiled_block_decoding_equals_eager():
    """The block calls compiled (fullgraph, static shapes): a denoising call [B, b] against the cache and its
    own block, and a store [B, b] (the prefill of one whole block has its shape): two graphs, none more for a
    second decode over the same static cache; canvases and traces are eager's."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    eager = _block_decodes()
    for _ in range(2):
        for got, want in zip(_block_decodes(AOT_EAGER), eager):
            assert torch.equal(got.canvas, want.canvas)
            assert got.trace.to_dict() == want.trace.to_dict()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2


def test_a_compiled_block_call_that_loses_its_bias_is_caught(monkeypatch):
    """Negative control: a compiled core that drops the block bias (built outside the graph) lets a block see the
    unwritten slots and the blocks after it; the comparison with eager must fail."""
    eager = _block_decodes()
    original = CompiledModel._raw_forward

    def unmasked(self, tokens, rope_pos, **kwargs):
        kwargs.pop("attn_bias", None)
        return original(self, tokens, rope_pos, **kwargs)

    monkeypatch.setattr(CompiledModel, "_raw_forward", unmasked)
    got = _block_decodes({"backend": "eager"})  # another options key: a wrapper built with the broken core
    assert all(g.trace.to_dict() != e.trace.to_dict() for g, e in zip(got, eager))
