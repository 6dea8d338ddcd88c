"""Negative controls: every invariance check run on a deliberately broken variant must fail (as vLLM's
batch-invariance suite does), so a check that cannot fail is found. Padded vs unpadded and batch vs single
(a model whose rows see each other's pads), cached vs uncached (a cache that answers for the wrong query; two
layers where one-layer caches are exact), one vs two threads (a model that reads the thread count), CPU vs
device (the other side a different model)."""

from types import SimpleNamespace

import pytest
import torch

from tools import gpu_check
from veridec.harness.checks.registry import VerifyContext, all_checks
from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.optimized.fastdllm import generate_with_dual_cache
from veridec.reference.fastdllm import generate as fastdllm_reference
from veridec.reference.llada import generate as llada_generate

SIZES = dict(hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)


class Broken:
    """``model`` with some of its calls replaced (``call``, ``forward_cached``); everything else is the model's."""

    def __init__(self, model, **replaced):
        self.model, self.replaced = model, replaced

    def __getattr__(self, name):
        if name in ("model", "replaced"):
            raise AttributeError(name)
        return self.replaced.get(name) or getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **options):
        call = self.replaced.get("call")
        return call(x, attention_mask, **options) if call else self.model(x, attention_mask=attention_mask, **options)


def ignores_padding(model):
    """Pads read as tokens: the attention mask is dropped."""
    return Broken(model, call=lambda x, attention_mask=None, **options: model(x, **options))


def answers_the_wrong_query(model):
    """A cached call whose logits are those of the query next to the one asked (rolled by one)."""
    def forward_cached(tokens, positions, cache, **options):
        out = model.forward_cached(tokens, positions, cache, **options)
        return SimpleNamespace(**{**vars(out), "logits": out.logits.roll(1, dims=1)}) if hasattr(out, "__dict__") \
            else out._replace(logits=out.logits.roll(1, dims=1))
    return Broken(model, forward_cached=forward_cached)


def run(name: str, model, higher):
    return all_checks()[name].run(VerifyContext(model, higher, 0, True))


@pytest.fixture(scope="module")
def pair():
    model = random_model("llada", 0, num_layers=2, **SIZES)
    higher = random_model("llada", 0, num_layers=2, dtype=torch.float64, **SIZES)
    return model, higher


def test_the_padding_check_fails_when_pads_leak_into_the_rows(pair):
    model, higher = pair
    assert run("model/padding", model, higher).passed
    assert not run("model/padding", ignores_padding(model), ignores_padding(higher)).passed


@pytest.mark.parametrize("name", ["model/cache-subset", "model/cache-recompute"])
def test_the_cache_checks_fail_when_the_cache_answers_for_another_query(pair, name):
    model, higher = pair
    assert run(name, model, higher).passed
    assert not run(name, answers_the_wrong_query(model), answers_the_wrong_query(higher)).passed


def test_batch_equals_single_fails_when_rows_see_each_others_pads(pair):
    model, higher = pair
    assert run("reference/batch-equals-single", model, never_predicts_mask(higher)).passed
    assert not run("reference/batch-equals-single", model, ignores_padding(never_predicts_mask(higher))).passed


def test_one_layer_caches_are_exact_and_two_layer_ones_are_caught_differing():
    """FD7: one layer makes the dual cache exact; the same comparison tells two layers apart on some seed."""
    prompt = torch.randint(0, 90, (1, 4), generator=torch.Generator().manual_seed(0))
    kw = dict(steps=8, gen_length=8, block_length=4, threshold=0.5)
    differs = []
    for seed in range(6):
        for layers in (1, 2):
            model = never_predicts_mask(random_model("llada", seed, num_layers=layers, dtype=torch.float64, **SIZES))
            same = torch.equal(fastdllm_reference(model, prompt, **kw).canvas,
                               generate_with_dual_cache(model, prompt, **kw).canvas)
            if layers == 1:
                assert same, seed
            else:
                differs.append(not same)
    assert any(differs)


def reads_the_thread_count(model):
    return Broken(model, call=lambda x, attention_mask=None, **options: SimpleNamespace(
        logits=model(x, attention_mask=attention_mask, **options).logits + 3.0 * torch.get_num_threads()
        * torch.arange(model.vocab_size, dtype=torch.float64) / model.vocab_size))


def decode_with_threads(model, threads: int) -> torch.Tensor:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        prompt = torch.randint(0, 90, (2, 6), generator=torch.Generator().manual_seed(1))
        return llada_generate(model, prompt, steps=8, gen_length=8, block_length=4).canvas
    finally:
        torch.set_num_threads(before)


def test_decodes_do_not_depend_on_the_thread_count_and_a_model_that_does_is_caught():
    model = never_predicts_mask(random_model("llada", 2, num_layers=2, dtype=torch.float64, **SIZES))
    assert torch.equal(decode_with_threads(model, 1), decode_with_threads(model, 2))
    broken = reads_the_thread_count(model)
    assert not torch.equal(decode_with_threads(broken, 1), decode_with_threads(broken, 2))


def test_the_cross_device_count_sees_a_device_that_decodes_otherwise(monkeypatch):
    """tools/gpu_check.py's CPU vs device agreement, with the CPU as the device: all agree; with the device side
    built from another seed, some do not (two presets, to keep it short)."""
    monkeypatch.setattr(gpu_check, "PRESETS", {name: gpu_check.PRESETS[name] for name in ("sequential", "fastdllm")})
    same = gpu_check.cross_device(torch.device("cpu"))
    assert same["agree"] == same["decodes"] > 0
    made = []

    def other_seed_for_the_device(layout, seed, **kw):
        made.append(layout)
        return random_model(layout, seed + (len(made) % 2 == 0), **kw)  # every second model: the device's

    monkeypatch.setattr(gpu_check, "random_model", other_seed_for_the_device)
    differs = gpu_check.cross_device(torch.device("cpu"))
    assert differs["agree"] < differs["decodes"]
