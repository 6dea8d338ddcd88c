"""SGLang's Gemma4Renoise held to DiffusionGemma's rule (spec/engines.md EN8), from its decisions recorded by
``python -m tools.golden.sglang_renoise`` (tests/golden/sglang_renoise.json): the rule fed the recorded logits (no
model) and the rule on the model (the replay's forwards, no engine) take SGLang's canvases and done flags at every
recorded step, up to the stated differences; broken rules do not (negative controls). Bad input is refused by name.
With sglang loadable (installed, or VERIDEC_SGLANG_ROOT naming an unzipped wheel), the replay itself runs SGLang's
``run`` and a broken Gemma4Renoise is caught with a shrunk case."""

import json
import math
import os
from pathlib import Path

import pytest
import torch

from veridec.rules import diffusiongemma as dg
from veridec.testing.engine_check import check_engine
from veridec.testing.engine_compare import explained
from veridec.testing.engine_renoise import rule_trajectory
from veridec.testing.engine_renoise_check import renoise_model
from veridec.testing.engine_renoise_compare import engine_temperature_explains
from veridec.testing.engines import Divergence
from veridec.testing.families import sglang_renoise
from veridec.testing.families.sglang import NEAR_TIE, TEMPERATURE_ROUNDING
from veridec.testing.families.sglang_renoise import RenoiseRule, engine_temperature, params_of, soft_embeddings
from veridec.testing.sglang import ContractError

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "sglang_renoise.json").read_text())
CASES = GOLDEN["cases"]
WITH_LOGITS = [c for c in CASES if "logits" in c["steps"][0]]
MODELS = {"diffusiongemma": "diffusiongemma",
          "diffusiongemma-canvas8": str(GOLDEN_DIR / "checkpoints" / "diffusiongemma-canvas8")}
# every eighth case (none of the 16-step ones, i % 4 == 0) and every typed one: the forwards cost ~0.25 s a case
SAMPLED = {name: [c for i, c in enumerate(x for x in CASES if x["model"] == name)
                  if i % 8 == 3 or c["verdict"] != "pass"] for name in MODELS}
LAST_STEP_DIFFERS = ("fail", "near-tie")  # a decision divergence: the recorded last step is where it parts


def recorded(step: dict) -> tuple[list, list]:
    return step["engine"]["input_ids"], step["engine"]["done"]


def rule_from_logits(case: dict) -> list[tuple[list, list]]:
    """DiffusionGemma's rule (SGLang's stated stream) fed each recorded step's logits: per step (canvases, done),
    a finished row keeping its canvas; the first step's given canvases checked against the stream's first draw."""
    rows, out, rules, canvas = len(case["case"]["prompts"]), [], None, None
    for step in case["steps"]:
        length = len(step["input_ids"]) // rows
        logits = torch.tensor(step["logits"], dtype=torch.float32, device="cpu").view(rows, length, -1)  # [B, L, V]
        if step["canvas"] != canvas:
            canvas = step["canvas"]
            rules = [RenoiseRule(case["case"]["config"], f"{case['case']['rid']}-{i}", logits.shape[-1], length, "cpu")
                     for i in range(rows)]
            assert torch.cat([r.start for r in rules]).tolist() == step["input_ids"]
        given = torch.tensor(step["input_ids"], device="cpu").view(rows, length)  # [B, L]
        after = [given[i] if r.finished else r.step(logits[i]).tokens for i, r in enumerate(rules)]
        out.append((torch.cat(after).tolist(), [r.finished for r in rules]))
    return out


def agreeing(ours: list, steps: list) -> int:
    return next((i for i, (o, s) in enumerate(zip(ours, steps)) if o != recorded(s)), len(steps))


def expected_agreement(case: dict) -> int:
    return len(case["steps"]) - 1 if case["verdict"] in LAST_STEP_DIFFERS else len(case["steps"])


@pytest.mark.parametrize("index", range(len(WITH_LOGITS)))
def test_the_rule_fed_the_recorded_logits_takes_sglangs_decisions(index):
    case = WITH_LOGITS[index]
    assert agreeing(rule_from_logits(case), case["steps"]) == expected_agreement(case), case["divergence"]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_rule_on_the_model_takes_sglangs_decisions(model):
    loaded = renoise_model(MODELS[model])
    for case in SAMPLED[model]:
        ours = [(s["decided"], s["done"]) for s in rule_trajectory(loaded, case["case"])]
        assert agreeing(ours, case["steps"]) == expected_agreement(case), (case["case"], case["divergence"])
        if case["verdict"] == "pass":
            assert len(ours) == len(case["steps"]) and all(case["steps"][-1]["engine"]["done"])


def test_the_golden_holds_both_models_and_its_typed_outcomes():
    assert GOLDEN["sglang"] == "0.5.23" and len(GOLDEN["files"]) == 2 and GOLDEN["logits_dtype"] == "float32"
    assert {c["model"] for c in CASES} == set(MODELS) and len(CASES) == 240
    assert {c["verdict"] for c in CASES} <= {"pass", "near-tie", "temperature-rounding"}
    assert sum(c["verdict"] == "pass" for c in CASES) >= 230
    assert sum(len(c["steps"]) for c in CASES) > 600 and any(c["case"]["config"]["max_denoising_steps"] == 16
                                                             for c in CASES)


def test_a_temperature_rounding_case_is_one_ulp_of_the_schedule():
    """Each temperature-rounding case ran a step whose two float32 readings of DG3.2's schedule differ."""
    for case in (c for c in CASES if c["verdict"] == "temperature-rounding"):
        p = params_of(case["case"]["config"])
        last = case["steps"][-1]["canvas"]
        remaining = [p.max_denoising_steps - s["step"] for s in case["steps"] if s["canvas"] == last]
        assert any(not torch.equal(dg.temperature(r, p, "cpu"), engine_temperature(p, r)) for r in remaining)


def _divergence(kind: str, margin: float = math.inf, **config) -> Divergence:
    return Divergence(kind, 0, 1, 0, 0, "m", margin=margin, config=config)


@pytest.mark.parametrize("difference, explained_by, not_explained_by", [
    (NEAR_TIE, _divergence("decision", 1e-7, near_tie=True), _divergence("decision", 1e-7, near_tie=False)),
    (NEAR_TIE, _divergence("done", 0.0, near_tie=True), _divergence("self-conditioning", 0.0, near_tie=True)),
    (TEMPERATURE_ROUNDING, _divergence("self-conditioning", engine_temperature=True),
     _divergence("self-conditioning")),
    (TEMPERATURE_ROUNDING, _divergence("self-conditioning", engine_temperature=True),
     _divergence("decision", 0.0, engine_temperature=True)),
])
def test_each_renoise_difference_explains_its_own_divergence_only(difference, explained_by, not_explained_by):
    assert explained(explained_by, (difference,)) == difference.name
    assert explained(not_explained_by, (difference,)) is None
    assert explained(_divergence("contract", 0.0, near_tie=True, engine_temperature=True),
                     (NEAR_TIE, TEMPERATURE_ROUNDING)) is None


def test_the_signal_at_sglangs_temperature_is_named_only_where_the_schedules_differ():
    """N = 8, t = (0.001, 0.002): one ulp apart at 7 steps remaining, equal at 8; a signal at another step's
    temperature is not excused (negative control)."""
    embedding = renoise_model("diffusiongemma").hf.model.decoder.embed_tokens
    config = {"max_denoising_steps": 8, "entropy_bound": 0.1, "t_min": 0.001, "t_max": 0.002,
              "stability_threshold": 3, "confidence_threshold": 0.0, "seed": 0}
    rule, generator = RenoiseRule(config, "r", 32, 16, "cpu"), torch.Generator(device="cpu").manual_seed(1)
    logits = torch.randn(16, 32, generator=generator, dtype=torch.float32, device="cpu") * 0.02  # [L, V]
    at = lambda r: soft_embeddings(logits / engine_temperature(rule.p, r), embedding)  # [L, H]
    with torch.no_grad():
        rule.step(logits)  # remaining 8: the two schedules agree
        assert not engine_temperature_explains(at(8), rule, embedding)
        rule.step(logits)  # remaining 7: one ulp apart
        assert engine_temperature_explains(at(7), rule, embedding)
        assert not engine_temperature_explains(at(5), rule, embedding)


def test_near_tie_is_a_margin_within_the_measured_rounding():
    """An entropy bound equal to a rank's C_k - H_(k) is a near tie; half-way between two ranks it is not."""
    config = {"max_denoising_steps": 4, "entropy_bound": 0.5, "t_min": 0.4, "t_max": 0.8, "stability_threshold": 1,
              "confidence_threshold": 0.005, "seed": 0}
    logits = torch.randn(16, 32, generator=torch.Generator(device="cpu").manual_seed(3), device="cpu")  # [L, V]
    ranked = RenoiseRule(config, "r", 32, 16, "cpu").step(logits).entropy.double().sort().values  # [L]
    at = (ranked.cumsum(0) - ranked).tolist()
    decide = lambda bound: RenoiseRule({**config, "entropy_bound": bound}, "r", 32, 16, "cpu").step(logits)
    tie, clear = decide(at[5]), decide((at[5] + at[6]) / 2)
    assert tie.near_tie and tie.margin == 0 and not clear.near_tie and clear.margin > clear.rounding
    assert 0 < sglang_renoise.probability_rounding(logits / 0.8) < 1e-5


def _one_step_early(logits, remaining, p):  # vLLM#45965's kind: the schedule read one step ahead
    return logits / dg.temperature(remaining - 1, p, logits.device)


def _no_bound(entropy, bound):  # every draw accepted: no renoising
    return torch.ones_like(entropy, dtype=torch.bool)


@pytest.mark.parametrize("name, broken", [("processed_logits", _one_step_early),
                                          ("accepted_positions", _no_bound)])
def test_a_broken_rule_parts_from_sglangs_recorded_decisions(monkeypatch, name, broken):
    """Negative control: the same comparison with the rule broken fails on the recorded data."""
    monkeypatch.setattr(sglang_renoise, name, broken)
    parted = [c for c in WITH_LOGITS if agreeing(rule_from_logits(c), c["steps"]) < expected_agreement(c)]
    assert len(parted) >= len(WITH_LOGITS) // 2, name


def test_a_stop_that_ignores_stability_parts_from_sglang(monkeypatch):
    cases = [c for c in WITH_LOGITS if c["case"]["config"]["stability_threshold"] > 0 and len(c["steps"]) > 1]
    assert cases
    monkeypatch.setattr(RenoiseRule, "step", _stability_ignored(RenoiseRule.step))
    assert any(agreeing(rule_from_logits(c), c["steps"]) < expected_agreement(c) for c in cases)


def _stability_ignored(step):
    def broken(self, logits):
        self.p = self.p.__class__(**{**self.p.__dict__, "stability_threshold": 0})
        return step(self, logits)
    return broken


@pytest.mark.parametrize("kwargs, said", [
    ({"fdfo": True}, "fdfo: the uniform-state replay runs SGLang's sync loop only"),
    ({"model": "blocks"}, "model: a uniform-state algorithm is replayed on a DiffusionGemma model"),
    ({"max_examples": 0}, "max_examples"),
])
def test_bad_renoise_arguments_are_refused_by_name(kwargs, said):
    with pytest.raises(ValueError, match=said):
        check_engine(_SglangFree, "diffusiongemma", **kwargs)


class _SglangFree:
    """A class with the contract's methods (never built: the arguments are refused first)."""

    def __init__(self, config):
        raise AssertionError("built")

    def step(self, forward_batch, full_logits, states):
        raise AssertionError("stepped")

    def run(self, model_runner, forward_batch, states):
        raise AssertionError("ran")


def test_a_constructor_refusing_the_knobs_is_a_bad_argument():
    class Refuses(_SglangFree):
        def __init__(self, config):
            raise ValueError("entropy_bound must be positive")

    with pytest.raises(ContractError, match="Refuses.*raised ValueError: entropy_bound must be positive"):
        check_engine(Refuses, "diffusiongemma", max_examples=2)


def test_a_class_without_its_own_loop_is_refused_by_name():
    class StepOnly:
        def __init__(self, config):
            pass

        def step(self, forward_batch, full_logits, states):
            return [True]

    with pytest.raises(ContractError, match="StepOnly does not implement the uniform-state contract.*run"):
        check_engine(StepOnly, "diffusiongemma")


def _sglang_root():
    root = os.environ.get("VERIDEC_SGLANG_ROOT")
    try:
        from veridec.testing.sglang import load_sglang_algorithm, sglang_root

        return load_sglang_algorithm("Gemma4Renoise", sglang_root(root))
    except (ContractError, ValueError, ImportError, OSError) as err:
        pytest.skip(f"SGLang's code is not here ({err}); the golden data above holds its recorded decisions")


@pytest.mark.parametrize("index", range(0, 240, 40))
def test_sglangs_own_run_gives_the_recorded_verdicts(index):
    """With SGLang's code here: its Gemma4Renoise, replayed again, takes the recorded verdict."""
    from veridec.testing.engine_renoise_check import renoise_builder, run_renoise_case
    from veridec.testing.families.sglang import BUILT_IN

    cls, config_class = _sglang_root()
    case = CASES[index]
    model = renoise_model(MODELS[case["model"]])
    verdict, replay = run_renoise_case(renoise_builder(cls, config_class, "Gemma4Renoise", model),
                                       BUILT_IN["Gemma4Renoise"][1], model, case["case"], 10.0, record=True)
    assert verdict == case["verdict"] and [recorded(s) for s in replay.transcript] == \
        [recorded(s) for s in case["steps"]]


def test_a_broken_gemma4renoise_is_caught_with_a_shrunk_case():
    """Negative control of the replay itself: SGLang's class with its schedule read one step early."""
    cls, _ = _sglang_root()

    class OneStepEarly(cls):
        def _temperature(self, step):
            return super()._temperature(step - 1)

    result = check_engine(OneStepEarly, "diffusiongemma", max_examples=40, max_rows=2)
    assert not result.passed and result.failure.kind in ("decision", "done", "self-conditioning"), result.markdown()
    assert len(result.failure_case["prompts"]) == 1 and result.failure_case["canvases"] == 1, result.failure_case


CONTRACT_FILE = '''
class Renoise:
    def __init__(self, config):
        raise AssertionError("built")

    def step(self, forward_batch, full_logits, states):
        return [True]

    def run(self, model_runner, forward_batch, states):
        raise AssertionError("ran")
'''


@pytest.mark.parametrize("extra, said", [(["--fdfo"], "fdfo: the uniform-state replay runs SGLang's sync loop only"),
                                         (["--model", "blocks"], "model: a uniform-state algorithm is replayed on")])
def test_bad_renoise_command_arguments_are_one_line(tmp_path, capsys, extra, said):
    from veridec.harness.cli import main

    (tmp_path / "renoise.py").write_text(CONTRACT_FILE)
    argv = ["check", "--engine", f"sglang:{tmp_path / 'renoise.py'}:Renoise", "--against", "diffusiongemma", *extra]
    assert main(argv) == 2
    assert said in capsys.readouterr().err


def test_the_command_checks_gemma4renoise(tmp_path, capsys):
    from veridec.harness.cli import main

    _sglang_root()
    root = os.environ.get("VERIDEC_SGLANG_ROOT")
    argv = ["check", "--engine", "sglang:Gemma4Renoise", "--trials", "4", "--max-batch", "2", "--out", str(tmp_path)]
    assert main(argv + (["--sglang-root", root] if root else [])) == 0
    assert "sglang:Gemma4Renoise: PASS" in (tmp_path / "check.md").read_text()


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str):
    import importlib
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLES))


def test_the_renoise_example_from_scratch_passes():
    """examples/sglang_renoise.py, written from DG3-DG4 and EN8 to the contract, run through the whole replay."""
    result = check_engine(_example("sglang_renoise").RenoiseSampler, "diffusiongemma", max_examples=10, max_rows=2)
    assert result.passed and result.cases == 10 and result.steps > 25, result.markdown()


@pytest.mark.parametrize("name, kind, rows", [("ScheduleOneStepEarly", "decision", 1),
                                              ("OneGeneratorPerBatch", "decision", 2),
                                              ("NoSelfConditioning", "self-conditioning", 1),
                                              ("StopsWithoutStability", "decision", 1)])
def test_each_broken_renoise_variant_is_caught_with_a_shrunk_case(name, kind, rows):
    result = check_engine(getattr(_example("sglang_renoise_broken"), name), "diffusiongemma", max_examples=40,
                          max_rows=2)
    assert not result.passed and result.failure.kind == kind, result.markdown()
    case = result.failure_case
    assert len(case["prompts"]) == rows and case["canvases"] == 1 and case["config"]["max_denoising_steps"] <= 2, case
    assert result.reproducer["steps"] or kind == "self-conditioning"


def _bad_steps():
    base = _example("sglang_renoise").RenoiseSampler

    class ReturnsATensor(base):
        def step(self, forward_batch, full_logits, states):
            return torch.tensor(super().step(forward_batch, full_logits, states), device="cpu")

    class ChangesTheLogits(base):
        def step(self, forward_batch, full_logits, states):
            done = super().step(forward_batch, full_logits, states)
            full_logits.mul_(2)
            return done

    class Raises(base):
        def step(self, forward_batch, full_logits, states):
            raise RuntimeError("boom")

    return [(ReturnsATensor, "step returned Tensor"), (ChangesTheLogits, "step changed the logits it was given"),
            (Raises, "run raised RuntimeError: boom")]


@pytest.mark.parametrize("index", range(3))
def test_a_bad_renoise_step_is_a_failure_naming_the_step(index):
    cls, said = _bad_steps()[index]
    result = check_engine(cls, "diffusiongemma", max_examples=3, max_rows=1)
    assert not result.passed and result.failure.kind == "contract" and said in result.failure.message
    assert "step 0" in result.failure.message, result.failure.message


# -- the comparison's own parts, each held to a truth made by hand (the mutation gate's survivors) --

STAGGERED = CASES[70]  # SGLang recorded row 0 stopping at step 1 (confident), row 1 at its last step, 2


def _flag_and_frozen_variants():
    """Engines whose canvases are the rule's at every step where it decides, wrong only in a done flag or in a row
    the rule has finished (EN8: each row's canvas and done flag are compared, a finished row is frozen)."""
    base = _example("sglang_renoise").RenoiseSampler

    class DoneFlagOneStepLate(base):  # a row says done one step after it stopped (its argmax canvas on time)
        def step(self, forward_batch, full_logits, states):
            before = [s["done"] for s in states]
            done = super().step(forward_batch, full_logits, states)
            return [d and b for d, b in zip(done, before)]

    class DoneFlagOneStepEarly(base):  # a row says done with one step left, its canvas still the renoised one
        def step(self, forward_batch, full_logits, states):
            done = super().step(forward_batch, full_logits, states)
            return [d or s["left"] == 1 for d, s in zip(done, states)]

    class RenoisesFinishedRows(base):  # a finished row keeps drawing noise from its generator, still done
        def step(self, forward_batch, full_logits, states):
            for state in (s for s in states if s["done"]):
                state["canvas"] = torch.randint(self.vocab, (self.size,), generator=state["generator"],
                                                device=state["canvas"].device)  # [L]
            return super().step(forward_batch, full_logits, states)

    return {cls.__name__: cls for cls in (base, DoneFlagOneStepLate, DoneFlagOneStepEarly, RenoisesFinishedRows)}


def _replay_staggered(cls):
    from veridec.testing.engine_renoise_check import renoise_builder, run_renoise_case
    from veridec.testing.sglang import EngineConfig

    model = renoise_model("diffusiongemma")
    return run_renoise_case(renoise_builder(cls, EngineConfig, cls.__name__, model), (), model, STAGGERED["case"],
                            10.0, record=True)


@pytest.mark.parametrize("name, kind, step, row, said", [
    ("DoneFlagOneStepLate", "done", 1, 0, "the engine goes on where the rule stops the row"),
    ("DoneFlagOneStepEarly", "done", 1, 1, "the engine says the row is done where the rule goes on"),
    ("RenoisesFinishedRows", "decision", 2, 0, "the engine changed a row the rule has finished"),
])
def test_a_wrong_done_flag_or_a_changed_finished_row_fails_where_the_canvas_agrees(name, kind, step, row, said):
    """Golden case 70 (two rows, 3 steps): SGLang's recorded flags stop row 0 at step 1 and row 1 at step 2, and
    the example from scratch takes them; each variant (its canvases the rule's wherever the rule decides) fails at
    the step and row the recorded flags name."""
    assert [s["engine"]["done"] for s in STAGGERED["steps"]] == [[False, False], [True, False], [True, True]]
    variants = _flag_and_frozen_variants()
    verdict, correct = _replay_staggered(variants["RenoiseSampler"])
    assert verdict == "pass" and [recorded(s) for s in correct.transcript] == [recorded(s) for s in
                                                                               STAGGERED["steps"]]
    verdict, replay = _replay_staggered(variants[name])
    found = replay.divergence
    assert verdict == "fail", f"{name} passed the replay of golden case 70"
    assert (found.kind, found.step, found.row) == (kind, step, row), found.message
    assert said in found.message, found.message


SEED, LENGTH, VOCAB = 0, 32, 64
FLAT = {"max_denoising_steps": 4, "entropy_bound": 1000.0, "t_min": 1.0, "t_max": 1.0, "stability_threshold": 1,
        "confidence_threshold": 0.005, "seed": SEED}  # temperature 1: the processed logits are the logits


def _race_logits(gaps: list[float]) -> torch.Tensor:
    """Logits [L, V] whose race (EN8: argmax p / e, e the row's exponential draw after its start) is won by token 0
    at every position j with relative margin gaps[j] / (1 + gaps[j]): log e, plus log(1 + gap) on token 0, so
    p / e is one constant times (1 + gap) on token 0 and the constant elsewhere. The draws are the stated stream's,
    drawn here from the seed."""
    generator = torch.Generator(device="cpu").manual_seed(SEED)
    torch.randint(VOCAB, (LENGTH,), generator=generator, device="cpu")  # the canvas's start
    race = torch.empty(LENGTH, VOCAB, dtype=torch.float32, device="cpu").exponential_(1.0, generator=generator)
    logits = race.double().log()  # [L, V]
    logits[:, 0] += torch.tensor(gaps, dtype=torch.float64, device="cpu").log1p()
    return logits.float()


def _decide(logits: torch.Tensor, **knobs):
    return RenoiseRule({**FLAT, **knobs}, "r", VOCAB, LENGTH, "cpu").step(logits)


def _entropies(logits: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(logits.double(), dim=-1)  # [L, V]
    return -(probs * probs.log()).sum(-1)  # [L] float64, -sum p log p


def test_a_race_margin_above_the_probabilities_rounding_is_no_near_tie():
    """One position's race won by a relative 1e-5 (the others by 1/2; the entropy bound and stop far): beyond the
    probabilities' relative rounding, so no near tie, though within the entropies' (which do not bound a race)."""
    gaps = [1.0] * LENGTH
    gaps[5] = 1e-5
    logits = _race_logits(gaps)
    decision = _decide(logits)
    assert (decision.sample == 0).all()
    assert decision.margin == pytest.approx(1e-5 / (1 + 1e-5), abs=1e-6)
    assert sglang_renoise.probability_rounding(logits) < 5e-6 and decision.rounding > 2e-5  # the premise
    assert not decision.near_tie


def test_the_stop_margin_counts_only_where_the_canvas_is_stable():
    """The confidence threshold at the mean entropy (float64 by hand): a near tie where stability holds (k = 0);
    at a canvas's first step with k = 1 stability has already decided (no stop), so the margin is the race's 1/2."""
    logits = _race_logits([1.0] * LENGTH)
    threshold = _entropies(logits).mean().item()
    stable = _decide(logits, stability_threshold=0, confidence_threshold=threshold)
    assert stable.near_tie and stable.margin < stable.rounding
    unstable = _decide(logits, stability_threshold=1, confidence_threshold=threshold)
    assert not unstable.done and not unstable.near_tie
    assert unstable.margin == pytest.approx(0.5, abs=1e-6)


def test_the_acceptance_margin_is_against_the_sums_before_each_rank():
    """DG3.4's margin min_k |C_k - H_(k) - bound| by hand on (4, 1, 2): the sums before each rank are 0, 1, 3
    (C_k itself would be 1, 3, 7); and in a decision, a bound of 0 is a near tie (rank 0's sum before it is 0)."""
    entropy = torch.tensor([4.0, 1.0, 2.0], device="cpu")
    assert sglang_renoise._acceptance_margin(entropy, 0.1) == pytest.approx(0.1)
    assert sglang_renoise._acceptance_margin(entropy, 7.0) == pytest.approx(4.0)
    logits = _race_logits([1.0] * LENGTH)
    assert _entropies(logits).min().item() > 1  # every inclusive sum C_k is far from 0 and 1e-3
    assert _decide(logits, entropy_bound=1e-3).margin == pytest.approx(1e-3)
    assert _decide(logits, entropy_bound=0.0).near_tie
