"""The Python API's last silent accepts (issue 48, item 5): each bad argument refused with a ValueError that names
it, where it used to run on with a derived value, return a meaningless number, or reach a raw torch error."""

import pytest

from veridec.testing import check_law


@pytest.mark.parametrize("samples", [0, -3, 2.5, True, "100"])
def test_check_law_refuses_a_sample_count_that_is_no_positive_integer(samples):
    """samples=0 used to be read as "derive it" (``samples or ...``) and ran to a verdict."""
    drawn = []
    with pytest.raises(ValueError, match=r"^samples must be None .* or an integer >= 1"):
        check_law(lambda n: drawn.append(n) or [(0,)] * n, {(0,): 0.5, (1,): 0.5}, samples=samples)
    assert drawn == []  # refused before any draw
    assert check_law(lambda n: [(0,), (1,)] * (n // 2), {(0,): 0.5, (1,): 0.5}, samples=10).samples == 10


def test_a_joint_with_nan_entries_is_refused():
    """NaN passed both checks (NaN < 0 is False, |NaN - 1| > 1e-9 is False) and made every conditional NaN."""
    import torch

    from veridec.oracles import EnumeratedJoint

    table = torch.full((2, 2), 0.25, dtype=torch.float64)
    table[0, 1] = float("nan")
    with pytest.raises(ValueError, match="^joint must hold finite probabilities"):
        EnumeratedJoint(table)
    assert EnumeratedJoint(torch.full((2, 2), 0.25, dtype=torch.float64)).length == 2  # the control


def test_total_variation_refuses_laws_over_canvases_of_two_lengths():
    """Two laws over outcomes of different lengths share no outcome: their TV of 1 said nothing."""
    from veridec.proofs_checks.laws import total_variation

    with pytest.raises(ValueError, match="one length, got lengths \\[1, 2\\]"):
        total_variation({(0,): 1.0}, {(0, 0): 1.0})
    assert total_variation({(0,): 0.5, (1,): 0.5}, {(0,): 1.0}) == pytest.approx(0.5)


@pytest.mark.parametrize("greedy", ["yes", 1, None])
def test_fastguide_params_take_a_boolean_greedy_only(greedy):
    from veridec.guidance.fastguide import FastGuideParams

    with pytest.raises(ValueError, match="^greedy must be True or False"):
        FastGuideParams(greedy=greedy)
    assert FastGuideParams(greedy=True).greedy is True


def test_compare_traces_names_what_is_no_trace():
    from veridec.compare import compare_traces
    from veridec.trace import Trace

    trace = Trace("t", {}, 1, 1)
    for a, b, name in ((trace, None, "b"), ("trace", trace, "a")):
        with pytest.raises(ValueError, match=f"^compare_traces: {name} must be a Trace"):
            compare_traces(a, b)
    assert compare_traces(trace, trace).same_commit_order  # the control


def _decoders():
    """Every public decoder of veridec.reference and veridec.optimized that takes a ``generator``."""
    import importlib
    import inspect
    import pkgutil

    import veridec.optimized
    import veridec.reference

    found = []
    for package in (veridec.reference, veridec.optimized):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, function in inspect.getmembers(module, inspect.isfunction):
                parameters = list(inspect.signature(function).parameters)
                own = function.__module__ == module.__name__ and not name.startswith("_")
                if own and "generator" in parameters and parameters[0] == "model":  # a decoder, not a step
                    found.append(pytest.param(function, id=f"{package.__name__[8:]}.{info.name}.{name}"))
    from veridec.optimized import fastdllm  # they pass generator= on to parallel.decode (**options)

    return found + [pytest.param(getattr(fastdllm, name), id=f"optimized.fastdllm.{name}")
                    for name in ("generate", "generate_with_prefix_cache", "generate_with_dual_cache")]


@pytest.mark.parametrize("decoder", _decoders())
@pytest.mark.parametrize("generator", [5, "seed", "numpy"])
def test_every_decoder_refuses_a_generator_that_is_no_torch_generator(decoder, generator):
    """An int seed, a string or a numpy Generator reached torch.rand's TypeError mid-decode; now each public
    decoder refuses it by name before anything runs (the arguments after it do not matter)."""
    import inspect

    import numpy as np
    import torch

    from veridec.rules.presets import PRESETS
    from veridec.testing import load_check_model

    generator = np.random.default_rng(0) if generator == "numpy" else generator
    uniform_state = decoder.__module__.endswith("diffusiongemma")  # its decoders refuse a mask predictor first
    model = load_check_model("diffusiongemma" if uniform_state else "tiny-llada")
    named = inspect.signature(decoder).parameters
    extra = {key: value for key, value in (("rule", PRESETS["fastdllm"]), ("reward", None), ("prompt_texts", [""]),
                                                        ("max_new_tokens", 4))
             if key in named and named[key].default is inspect.Parameter.empty}
    with pytest.raises(ValueError, match="generator must be None"):
        decoder(model, torch.tensor([[5, 6]]), generator=generator, **extra)


def test_a_prompt_on_the_meta_device_is_refused_by_name():
    """A meta tensor holds shapes only: the prompt's checks reached torch's error on .item() / nonzero."""
    import torch

    from veridec.reference.llada import generate
    from veridec.testing import load_check_model

    model = load_check_model("tiny-llada")
    with pytest.raises(ValueError, match="^prompt is on the meta device"):
        generate(model, torch.tensor([[5, 6]], device="meta"), steps=2, gen_length=2, block_length=2)
    with pytest.raises(ValueError, match="^attention_mask is on the meta device"):
        generate(model, torch.tensor([[5, 6]]), torch.ones(1, 2, device="meta"), steps=2, gen_length=2,
                 block_length=2)
