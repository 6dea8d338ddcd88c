"""A candidate on the user's own model object (spec/exactness.md EC9): examples/own_model.py's hooked decoder on
its own module passes, a broken decoder on it fails, models that are not veridec's model of the same weights are
refused by the preflight, and the recording at the module's top-level forward sees what the decoder calls."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from veridec.adapters import adapt
from veridec.harness.cli import main
from veridec.models import random_model
from veridec.recording import ModuleRecording
from veridec.testing import check_decoder, load_candidate, load_check_model
from veridec.testing.own_model import CandidateModelMismatch, check_same_weights, preflight

EXAMPLE = Path(__file__).parents[1] / "examples" / "own_model.py"
OWN = f"{EXAMPLE}:load"


@pytest.fixture(scope="module")
def example():
    return load_candidate(f"{EXAMPLE}:hooked_generate"), load_candidate(f"{EXAMPLE}:MyLLaDA")


def test_the_hooked_example_passes_on_its_own_model(example):
    hooked, _ = example
    result = check_decoder(hooked, "llada", model="tiny-llada", max_examples=15, candidate_model=OWN)
    assert result.passed, result.markdown()
    assert result.model_difference == 0.0 and result.candidate_model == OWN
    assert set(result.knobs.values()) == {"effective"}
    assert f"candidate ran on its own model `{OWN}`" in result.markdown()


def test_a_decoder_that_ignores_block_length_fails_on_its_own_model(example):
    """Negative control: the same recording, a wrong decoder; the failure is shrunk and its reproducer runs."""
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        from llada_sampler import generate
    finally:
        sys.path.remove(str(EXAMPLE.parent))

    def one_block(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                  remasking="low_confidence", mask_id=126336):
        return generate(model, prompt, steps, gen_length, gen_length, temperature, remasking, mask_id)

    result = check_decoder(one_block, "llada", model="tiny-llada", max_examples=40, candidate_model=OWN, knobs=False)
    assert not result.passed
    case = result.failure.case
    assert case["settings"]["block_length"] < case["settings"]["gen_length"]
    assert "candidate_model, _ = own_model(" in result.reproducer and "theirs = candidate(candidate_model" in \
        result.reproducer
    assert f"--candidate-model {OWN}" in result.command  # the user's factory, not a placeholder


def test_models_that_are_not_the_same_function_are_refused(example):
    hooked, my_llada = example
    model = load_check_model("tiny-llada")
    for candidate_model, says in [
            (f"{EXAMPLE}:load_scaled", "beyond the measured rounding"),
            (my_llada(random_model("llada", 5, num_layers=1, hidden_size=16, num_heads=2, num_kv_heads=1,
                                   intermediate_size=24, vocab_size=model.vocab_size)),
             "does not hold veridec's weights"),
            (object(), "must be a torch.nn.Module"),
            (f"{EXAMPLE}:no_such_factory", "candidate_model: .*defines no function"),
            (f"{EXAMPLE}:hooked_generate", "candidate_model: .*raised TypeError")]:
        with pytest.raises(ValueError, match=says):
            check_decoder(hooked, "llada", model="tiny-llada", max_examples=2, candidate_model=candidate_model)


def test_the_numeric_error_is_the_larger_of_the_one_asked_for_and_the_preflight_difference(example):
    """EC9: a float64 copy of the weights differs from veridec's float32 model by rounding alone (a difference
    > 0): asked for numeric_error 0, ties within that difference are excused; asked for more than an exact
    wrapper's difference (0), the larger one stands."""
    hooked, my_llada = example
    run = dict(model="tiny-llada", max_examples=2, knobs=False)
    double = my_llada(load_check_model("tiny-llada").to(torch.float64))
    widened = check_decoder(hooked, "llada", candidate_model=double, **run)
    assert 0 < widened.model_difference == widened.numeric_error < 1e-5
    kept = check_decoder(hooked, "llada", candidate_model=OWN, numeric_error=1e-3, **run)
    assert kept.model_difference == 0.0 and kept.numeric_error == 1e-3
    assert "ties within 0.001 excused" in kept.markdown()


def test_a_candidate_that_never_stops_on_its_own_model_is_stopped_at_the_call_limit():
    """EC9 with EC2: the recording at the user's module enforces the call limit too (a candidate that loops is
    stopped after 2 x the target's calls + 64, well inside its time limit, not timed out)."""
    def never_stops(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                    remasking="low_confidence", mask_id=126336):
        x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
        while True:
            model(x)

    result = check_decoder(never_stops, "llada", model="tiny-llada", max_examples=1, candidate_model=OWN,
                           knobs=False, case_timeout=20.0)
    assert not result.passed and "model calls (stopped there)" in result.failure.problems[0], result.markdown()


def test_the_preflight_measures_rounding_and_refuses_wrong_outputs(example):
    _, my_llada = example
    model = load_check_model("tiny-llada")
    assert preflight(my_llada(model), model, "llada") == 0.0
    half = my_llada(load_check_model("tiny-llada").to(torch.float64))  # the same function, other rounding
    assert 0 < preflight(half, model, "llada") < 1e-5

    class Vector(torch.nn.Module):
        def forward(self, input_ids):
            return input_ids.float()

    with pytest.raises(CandidateModelMismatch, match=r"must return logits \[B, L, V\]"):
        preflight(Vector(), model, "llada")
    with pytest.raises(CandidateModelMismatch, match=r"candidate_model\(x\) raised RuntimeError"):
        preflight(torch.nn.Linear(2, 2), model, "llada")
    assert preflight(load_check_model("tiny-llada"), model, "llada") == 0.0  # veridec's own model is one too


def test_the_recording_sees_every_call_at_the_top_level_forward(example):
    """ModuleRecording: one call per forward of the hooked decoder (positional and keyword canvases), the
    decoder's own hooks working, the commit order placed; cached calls count without a trace; a call without a
    canvas is refused; the hook is gone afterwards."""
    hooked, my_llada = example
    module = my_llada(load_check_model("tiny-llada"))
    prompt = torch.tensor([[3, 4, 5]])
    mask_id = load_check_model("tiny-llada").special.mask_id
    with ModuleRecording(module) as recording:
        out = hooked(module, prompt, steps=4, gen_length=4, block_length=2, mask_id=mask_id)
        module(input_ids=out)
    assert len(recording.calls) == 5 and all(c.kind == "full" for c in recording.calls)
    assert not module._forward_pre_hooks
    trace = recording.trace(out, 3, mask_id)
    assert [p for step in trace.steps for p in step.positions[0]] and trace.counters.model_calls == 5
    with ModuleRecording(module) as recording:
        module(prompt, past_key_values=[])
    assert recording.counters().model_calls == 1 and recording.counters().full_forwards == 0
    with pytest.raises(ValueError, match="first call must be a full forward"):
        recording.trace(prompt, 3, mask_id)  # a cached call shows no canvas: counters only
    with ModuleRecording(module), pytest.raises(ValueError, match="without a canvas"):
        module(input_ids=None, inputs_embeds=torch.zeros(1, 3, 8))
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        ModuleRecording(object())


def test_the_command_line_takes_a_candidate_model(capsys):
    code = main(["check", f"{EXAMPLE}:hooked_generate", "--against", "llada", "--model", "tiny-llada",
                 "--candidate-model", OWN, "--trials", "5", "--quiet", "--no-knobs"])
    assert code == 0 and "candidate ran on its own model" in capsys.readouterr().out
    code = main(["check", f"{EXAMPLE}:hooked_generate", "--against", "llada", "--model", "tiny-llada",
                 "--candidate-model", f"{EXAMPLE}:load_scaled", "--trials", "5", "--quiet"])
    assert code == 2 and "beyond the measured rounding" in capsys.readouterr().err


def _feature_cache(refresh: int):
    cache = load_candidate(f"{EXAMPLE}:prompt_feature_cache")

    def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                 remasking="low_confidence", mask_id=126336):
        return cache(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id, refresh=refresh)

    return generate


def test_tier_a_measures_the_drift_of_a_cache_inside_the_model():
    """EC9, tier A: a hook-based prompt-feature cache on its own model; refreshed every forward it drifts by
    nothing (the negative control: the measure is not noise), refreshed every 4th its calls drift (p99 > 0,
    max = max_logit_error) and tier E fails it; a baseline of the exact cache gates the stale one."""
    run = dict(model="tiny-llada", tier="A", max_examples=12, candidate_model=OWN, knobs=False)
    exact = check_decoder(_feature_cache(1), "llada", **run)
    assert exact.passed and exact.metrics["exact_rate"] == 1.0
    assert (exact.metrics["drift_p50"], exact.metrics["drift_p99"], exact.metrics["max_logit_error"]) == (0, 0, 0)
    stale = check_decoder(_feature_cache(4), "llada", **run)
    assert stale.metrics["drift_p99"] > 1e-3 and stale.metrics["max_logit_error"] >= stale.metrics["drift_p99"]
    assert stale.metrics["exact_rate"] < 1
    gated = check_decoder(_feature_cache(4), "llada", **run, baseline=exact.metrics)
    assert not gated.passed
    strict = check_decoder(_feature_cache(4), "llada", model="tiny-llada", max_examples=50, candidate_model=OWN,
                           knobs=False)
    assert not strict.passed and "commit order differs" in strict.markdown()


def test_drift_quantiles_interpolate_and_keep_infinity():
    from veridec.testing.exact import _drift_quantiles

    assert _drift_quantiles([]) == {"drift_p50": None, "drift_p99": None}
    assert _drift_quantiles([3.0, 1.0, 2.0]) == {"drift_p50": 2.0, "drift_p99": pytest.approx(2.98)}
    assert _drift_quantiles([0.0, 1.0]) == {"drift_p50": 0.5, "drift_p99": pytest.approx(0.99)}
    assert _drift_quantiles([0.0] * 99 + [float("inf")])["drift_p99"] == float("inf")
    assert _drift_quantiles([0.0] * 99 + [float("inf")])["drift_p50"] == 0.0


def test_a_weight_changed_by_one_ulp_is_refused_by_its_digest(example):
    """The digest sees what the preflight's two canvases cannot: one float32 step in one entry of the last layer's
    MLP is refused naming the official tensor; the same weights in bfloat16 (rounded once) or float64 pass."""
    _, my_llada = example
    model = load_check_model("tiny-llada")
    nudged = load_check_model("tiny-llada")
    weight = nudged.layers[-1].mlp.down.weight
    with torch.no_grad():
        weight[0, 0] = torch.nextafter(weight[0, 0], torch.tensor(torch.inf))
    with pytest.raises(CandidateModelMismatch, match=r"model\.transformer\.blocks\.1\.ff_out\.weight \(32, 64\)"):
        check_same_weights(my_llada(nudged), model)
    with pytest.raises(ValueError, match="does not hold veridec's weights"):
        check_decoder(example[0], "llada", model=model, max_examples=1, candidate_model=my_llada(nudged))
    check_same_weights(my_llada(load_check_model("tiny-llada").to(torch.bfloat16)), model)
    check_same_weights(my_llada(load_check_model("tiny-llada").to(torch.float64)), model)
    missing = torch.nn.Module()
    missing.inner = torch.nn.ParameterList(list(load_check_model("tiny-llada").parameters())[:-1])
    with pytest.raises(CandidateModelMismatch, match=r"lm_head|ff_out\.weight"):
        check_same_weights(missing, model)


def test_drift_is_reported_per_call():
    """EC9: the largest drift at each call index over the cases; zero at every call when refreshed each forward,
    and a call after the first refresh drifts when stale (the first call of every case is a refresh)."""
    run = dict(model="tiny-llada", tier="A", max_examples=6, candidate_model=OWN, knobs=False)
    exact = check_decoder(_feature_cache(1), "llada", **run)
    assert exact.metrics["drift_by_call"] and set(exact.metrics["drift_by_call"]) == {0.0}
    stale = check_decoder(_feature_cache(4), "llada", **run)
    by_call = stale.metrics["drift_by_call"]
    assert by_call[0] == 0.0 and max(by_call) == stale.metrics["max_logit_error"] > 0
    assert all(by_call[k] == 0.0 for k in range(0, len(by_call), 4))  # every 4th call refreshes


def test_a_factory_that_needs_the_model_name_gets_it(tmp_path):
    """FILE.py:FACTORY with a required argument is called with --model's name; with a model object (no name)
    it cannot be, and says so."""
    from veridec.testing.own_model import own_model

    factory = tmp_path / "factory.py"
    factory.write_text("from veridec.testing import load_check_model\n\n"
                       "def needs(source):\n    assert source == 'tiny-llada', source\n"
                       "    return load_check_model(source)\n")
    model, label = own_model(f"{factory}:needs", "tiny-llada")
    assert isinstance(model, torch.nn.Module) and label == f"{factory}:needs"
    with pytest.raises(ValueError, match="raised TypeError"):
        own_model(f"{factory}:needs", None)


class Differs(torch.nn.Module):
    """veridec's model with its logits changed where ``where(x)`` holds: +1 everywhere (``shift``) or one token
    banned (``ban``)."""

    def __init__(self, inner, where, ban: int | None = None):
        super().__init__()
        self.inner, self.where, self.ban = inner, where, ban

    def forward(self, input_ids, attention_mask=None, **unused):
        logits = self.inner(input_ids, attention_mask=attention_mask).logits.clone()
        rows = self.where(input_ids)  # [B] bool
        if self.ban is None:
            logits[rows] += 1.0
        else:
            logits[rows, :, self.ban] = -torch.inf
        return SimpleNamespace(logits=logits)


def test_the_preflight_sees_the_all_mask_canvas_and_one_sided_infinities():
    model = load_check_model("tiny-llada")
    mask_id = model.special.mask_id
    all_masks = lambda x: (x == mask_id).all(dim=1)  # noqa: E731
    with pytest.raises(CandidateModelMismatch, match="beyond the measured rounding"):
        preflight(Differs(load_check_model("tiny-llada"), all_masks), model, "llada")
    anywhere = lambda x: torch.ones(x.shape[0], dtype=torch.bool)  # noqa: E731
    with pytest.raises(CandidateModelMismatch, match="differ by up to inf"):
        preflight(Differs(load_check_model("tiny-llada"), anywhere, ban=3), model, "llada")


def test_the_digest_reads_every_element():
    """One float32 step in the last entry of the embedding (past the first thousand values) is refused."""
    model = load_check_model("tiny-llada")
    nudged = load_check_model("tiny-llada")
    with torch.no_grad():
        last = nudged.embed.weight[-1, -1]
        nudged.embed.weight[-1, -1] = torch.nextafter(last, torch.tensor(torch.inf))
    assert nudged.embed.weight.numel() > 1024
    with pytest.raises(CandidateModelMismatch, match=r"model\.transformer\.wte\.weight"):
        check_same_weights(nudged, model)



class _Nudged(torch.nn.Module):
    """A model computing ``base``'s logits with chosen entries moved (``nudges``: (row, position, token, delta)):
    its drift from ``base`` per call is known by hand."""

    def __init__(self, base, nudges):
        super().__init__()
        self.base, self.nudges = base, nudges

    def forward(self, input_ids, attention_mask=None):
        logits = self.base(input_ids, attention_mask=attention_mask).logits.clone()  # [B, L, V]
        for row, position, token, delta in self.nudges:
            logits[row, position, token] += delta
        return SimpleNamespace(logits=logits)


def test_one_calls_drift_is_its_largest_logit_difference_by_hand():
    """EC9: a call's drift is the largest |difference| of its logits from veridec's model on the canvas it was
    fed, not their mean or sum: two entries moved by 0.25 and -0.75 drift by exactly 0.75 in every call (a mean
    would give 1 / (B L V) of the sum, a sum 1.0); a model moved nowhere drifts by 0."""
    model = load_check_model("tiny-llada")
    canvas = torch.tensor([[5, 6, model.special.mask_id, model.special.mask_id]])
    for nudges, want in (([(0, 1, 3, 0.25), (0, 2, 7, -0.75)], 0.75), ([], 0.0)):
        nudged = _Nudged(model, nudges)
        with ModuleRecording(nudged, keep_logits=True) as recording:
            nudged(canvas)
            nudged(canvas.clone())
        assert recording.drift(adapt(model, "llada")) == [pytest.approx(want, abs=1e-6)] * 2
