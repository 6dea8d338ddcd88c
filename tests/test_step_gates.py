"""What a GPU would show of a cached decode step, gated on the CPU (issue 47, tools/step_gates.py): host
synchronisations per cached step of the optimized Fast-dLLM decoders (dual and prefix caches) and operators per
cached step at LLaDA-8B's 32-layer structure, each at most the ceiling committed in benchmarks/step_gates.json.
Each gate has its negative control: a planted ``.item()`` (or ``.tolist()``, ``.cpu()``, ``bool(tensor)``,
``nonzero``) inside the step, or a layer that copies its cache, fails it."""

import json
from pathlib import Path

import pytest
import torch

from tools import step_gates
from veridec.models.transformer import KVCache
from veridec.optimized import parallel

RECORDED = json.loads((Path(__file__).parents[1] / "benchmarks" / "step_gates.json").read_text())
CEILING = RECORDED["ceiling"]


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return {layers: step_gates.structured_model(layers) for layers in (1, 2)}


PROMPT = torch.randint(0, step_gates.SIZES["vocab_size"] - 3, (1, step_gates.PROMPT_LENGTH),
                       generator=torch.Generator().manual_seed(0))


def costs(models, cache="dual", layers=2):
    return step_gates.decode_costs(models[layers], PROMPT, cache=cache, **step_gates.SETTINGS)


def test_every_gated_configuration_has_a_ceiling():
    assert set(CEILING) == set(step_gates.GATED) == set(RECORDED["before"]) - {"commit"}


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_host_syncs_per_cached_step_stay_under_the_ceiling(models, cache):
    found = costs(models, cache)
    assert found["cached_steps"] >= 8 and found["blocks"] == 2  # the gate sees many cached steps
    assert found["syncs_per_cached_step"] <= CEILING[cache]["syncs_per_cached_step"], found["syncs_by_phase"]
    # between steps, the loop reads one flag pair per step (a mask left, a non-finite logit), and nothing else
    assert found["termination_reads_per_cached_step"] <= CEILING[cache]["termination_reads_per_cached_step"]
    assert set(found["syncs_by_phase"].get(step_gates.TERMINATION, {})) <= {"Tensor.tolist"}
    assert found["syncs_by_phase"].get(step_gates.BLOCK_END, {}) in ({}, {"Tensor.tolist": found["blocks"]})


@pytest.mark.parametrize("name", sorted(step_gates.GATED))
def test_operators_per_cached_step_at_32_layers_stay_under_the_ceiling(models, name):
    cache, dtype = step_gates.GATED[name]
    found = {layers: step_gates.decode_costs(step_gates.structured_model(layers, dtype) if dtype != torch.float32
                                             else models[layers], PROMPT, cache=cache, **step_gates.SETTINGS)
             for layers in (1, 2)}
    one, two = found[1]["ops_per_cached_step"], found[2]["ops_per_cached_step"]
    assert one + (step_gates.FULL_LAYERS - 1) * (two - one) <= CEILING[name]["ops_per_cached_step_32_layers"]
    assert found[2]["syncs_per_cached_step"] <= CEILING[name]["syncs_per_cached_step"]


@pytest.mark.parametrize("planted", ["item", "tolist", "cpu", "bool", "nonzero"])
def test_a_sync_planted_in_the_step_fails_the_gate(models, monkeypatch, planted):
    """Negative control: one host read per step, planted after the rule, is counted once per cached step."""
    clean = costs(models)
    real = parallel.parallel_step
    reads = {"item": lambda t: t.sum().item(), "tolist": lambda t: t.tolist(), "cpu": lambda t: t.cpu(),
             "bool": lambda t: bool(t.any()), "nonzero": lambda t: t.nonzero()}

    def with_read(*args, **kwargs):
        result = real(*args, **kwargs)
        reads[planted](result.x)
        return result

    monkeypatch.setattr(parallel, "parallel_step", with_read)
    planted_costs = costs(models)
    assert planted_costs["syncs_per_cached_step"] == pytest.approx(clean["syncs_per_cached_step"] + 1)
    assert planted_costs["termination_reads_per_cached_step"] == clean["termination_reads_per_cached_step"]
    assert planted_costs["syncs_per_cached_step"] > CEILING["dual"]["syncs_per_cached_step"]


def test_a_layer_that_copies_its_cache_fails_the_operator_gate(models, monkeypatch):
    """Negative control: two clones per layer (its keys and values) are 64 more operators per step at 32 layers."""
    from veridec.models import transformer

    clean = costs(models)["ops_per_cached_step"]
    real = transformer.attend
    monkeypatch.setattr(transformer, "attend", lambda q, k, v, bias, need: real(q, k.clone(), v.clone(), bias, need))
    copied = costs(models)["ops_per_cached_step"]
    assert copied == pytest.approx(clean + 4)  # 2 layers
    one = costs(models, layers=1)["ops_per_cached_step"]
    assert one + (step_gates.FULL_LAYERS - 1) * (copied - one) > CEILING["dual"]["ops_per_cached_step_32_layers"]


def test_the_structure_dispatches_what_llada_8b_widths_dispatch(monkeypatch):
    """The counts hold at LLaDA-8B's widths: its cached block step (2 layers, on the meta device: no memory, no
    data) dispatches the same operators, one by one, as the small model of the same structure. The attention
    kernel is one stand-in operator in both (on meta, SDPA runs its decomposed math form, a device difference)."""
    from torch.nn import functional
    from tools.gpu_check import SHAPES, shaped_model

    monkeypatch.setattr(functional, "scaled_dot_product_attention", lambda q, k, v, attn_mask=None: q.clone())

    def block_step_ops(model, device):
        batch, length, block = 1, 24, 8
        cache = model.new_cache(batch, length) if device == "cpu" else KVCache(
            *_meta_cache(model, batch, length), padded=False)
        tokens = torch.zeros(batch, block, dtype=torch.long, device=device)
        positions = torch.arange(8, 8 + block, device=device)[None]
        counter = step_gates.StepCosts()
        with counter:
            model.forward_cached(tokens, positions, cache, check=False)
        return counter.ops["outside"]

    big = shaped_model({**SHAPES["llada-8b"], "num_layers": 2}, torch.device("meta"), torch.bfloat16)
    small = step_gates.structured_model(2, dtype=torch.bfloat16)
    assert block_step_ops(big, "meta") == block_step_ops(small, "cpu")


def _meta_cache(model, batch, length):
    shape = (batch, model.cfg.num_kv_heads, length, model.cfg.head_dim)
    keys = [torch.empty(shape, dtype=model.dtype, device="meta") for _ in model.layers]
    values = [torch.empty(shape, dtype=model.dtype, device="meta") for _ in model.layers]
    return keys, values, torch.ones(batch, length, dtype=torch.bool, device="meta"), torch.zeros(
        batch, dtype=torch.long, device="meta")


AOT_EAGER = {"backend": "aot_eager"}


def test_the_whole_cached_step_is_one_graph_and_decodes_as_eager(models, monkeypatch):
    """The compiled decode captures each cached step, model and rule, as one ``fullgraph=True`` graph
    (``whole_step``; on a GPU one CUDA graph per shape with reduce-overhead): no graph break, one graph for every
    cached step of the decode (the refresh is the other), and the same canvas, trace and counters as eager."""
    from veridec.optimized.fastdllm import generate_with_dual_cache

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    eager = generate_with_dual_cache(models[2], PROMPT, **step_gates.SETTINGS)
    steps = []
    real = parallel.graph_step
    monkeypatch.setattr(parallel, "graph_step", lambda *args: steps.append(1) or real(*args))
    compiled = generate_with_dual_cache(models[2], PROMPT, compile=AOT_EAGER, **step_gates.SETTINGS)
    assert torch.equal(compiled.canvas, eager.canvas) and compiled.trace.to_dict() == eager.trace.to_dict()
    stats = torch._dynamo.utils.counters
    assert not stats["graph_break"] and stats["stats"]["unique_graphs"] == 2, (stats["graph_break"], stats["stats"])
    cached = eager.trace.counters.model_calls - eager.trace.counters.full_forwards
    assert len(steps) == cached >= 8  # every cached step went through the captured graph


def test_a_sync_planted_in_the_rule_breaks_the_whole_step_graph(models, monkeypatch):
    """Negative control: a host decision on an ``.item()`` inside the rule cannot be captured, which
    ``fullgraph=True`` refuses (a graph break, or a guard on data). The patched function fails the captured
    step's guards, so the step is traced anew."""
    real = parallel.parallel_step

    def with_item(*args, **kwargs):
        result = real(*args, **kwargs)
        if result.x.sum().item() < 0:  # never true: the host decision alone breaks the graph
            raise AssertionError
        return result

    from veridec.optimized.fastdllm import generate_with_dual_cache

    monkeypatch.setattr(parallel, "parallel_step", with_item)
    with pytest.raises((torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError), match="item|data-dependent"):
        generate_with_dual_cache(models[2], PROMPT, compile=AOT_EAGER, **step_gates.SETTINGS)


def test_the_whole_step_graph_holds_a_shifted_prefix_window():
    """Dream's logit shift and the prefix cache's narrowed window (the block's queries of a window to the canvas's
    end) go through the captured step too: a padded batch decodes as eager, trace and counters included."""
    from veridec.models import random_model
    from veridec.models.tiny import never_predicts_mask
    from veridec.optimized.fastdllm import generate_with_prefix_cache

    model = never_predicts_mask(random_model("dream", 0, dtype=torch.float32))
    prompt = torch.randint(0, 90, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(prompt)
    mask[0, :2] = 0
    settings = dict(steps=8, gen_length=8, block_length=4, threshold=0.5)  # two blocks: a graph each (prefix)
    eager = generate_with_prefix_cache(model, prompt, mask, **settings)
    compiled = generate_with_prefix_cache(model, prompt, mask, compile=AOT_EAGER, **settings)
    assert torch.equal(compiled.canvas, eager.canvas) and compiled.trace.to_dict() == eager.trace.to_dict()
