"""Knobs that do nothing (spec/exactness.md EC7): a setting the candidate takes, changed where it changes the
target's output or calls, must change the candidate's too."""

from pathlib import Path
from types import SimpleNamespace

from veridec.testing import check_decoder, load_candidate
from veridec.testing.targets import FAMILIES
from veridec.testing.families.common import divisor_block_lengths as block_lengths
from veridec.testing.knobs import alternatives, variants

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fastdllm_dual.py"
DUAL = dict(against="fastdllm", cache="dual", model="tiny-llada", max_examples=10)


def ignoring_its_threshold():
    real = load_candidate(f"{EXAMPLE}:generate")

    def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                 threshold=None):
        return real(model, prompt, steps=steps, gen_length=gen_length, block_length=block_length,
                    temperature=temperature, mask_id=mask_id, threshold=None)  # the knob is read, and dropped

    return generate


def test_every_knob_of_the_correct_example_moves_it():
    result = check_decoder(load_candidate(f"{EXAMPLE}:generate"), **DUAL)
    assert result.passed and result.knobs == {"threshold": "effective", "steps": "effective",
                                              "temperature": "effective", "block_length": "effective"}
    assert "- knobs: threshold effective, steps effective" in result.markdown()


def test_a_threshold_without_effect_is_reported_with_the_smallest_case():
    result = check_decoder(ignoring_its_threshold(), **DUAL, tier="A")  # tier A tolerates the divergences
    assert not result.passed and result.knobs["threshold"] == "no effect"
    assert all(result.knobs[name] == "effective" for name in ("steps", "temperature", "block_length"))
    (finding,) = result.knob_failures
    assert finding["sentence"].startswith("threshold has no effect")
    assert finding["case"]["prompt"] == [[0]] and finding["case"]["settings"]["temperature"] == 0.0
    assert None in finding["values"] and "## A knob without effect" in result.markdown()
    assert not check_decoder(ignoring_its_threshold(), **DUAL).passed  # tier E: a divergence besides


def test_knobs_can_be_left_out():
    result = check_decoder(ignoring_its_threshold(), **DUAL, tier="A", knobs=False)
    assert result.passed and result.knobs == {}


def test_each_variant_keeps_the_case_valid():
    settings = {"gen_length": 6, "block_length": 3, "steps": 4, "temperature": 0.0, "threshold": 0.5,
                "remasking": "low_confidence"}
    for variant in block_lengths(settings):
        blocks = 6 // variant["block_length"]
        assert 6 % variant["block_length"] == 0 and variant["steps"] % blocks == 0 and variant["block_length"] != 3
        assert 1 <= variant["steps"] // blocks <= variant["block_length"]
    block = FAMILIES["block"]
    assert {v["steps"] for v in variants("steps", settings, block)} == {2, 6}  # 2 blocks: 1 or 3 steps, not 2
    assert alternatives("threshold", settings, block) == [None, 0.9, 0.2, 0.05]
    assert alternatives("factor", settings, block) == []  # a threshold rules: factor is not read
    assert alternatives("remasking", settings, block) == ["random"]
    assert alternatives("steps", {"max_new_tokens": 2, "steps": 1}, FAMILIES["dream"]) == [2, 3, 4]  # any count


def test_winos_block_length_knob_offers_every_other_divisor():
    """Without a schedule (no ``steps``), every other divisor of the gen length is an alternative, one block
    included."""
    settings = {"gen_length": 4, "block_length": 2, "threshold": 0.6}
    assert block_lengths(settings) == [{**settings, "block_length": 1}, {**settings, "block_length": 4}]


def _stub_search(monkeypatch, moves_target, moves_candidate):
    """find_effect over drawn integers, with the two sides' movement stubbed: ``moves_target(n)`` and
    ``moves_candidate(n)`` say whether the knob moves each side on drawn case n."""
    from hypothesis import strategies as st

    from veridec.testing import knobs

    def found(setup, name, n):
        return {"case": {"settings": {name: n}}, "other": {"settings": {name: -n}}} if moves_target(n) else None

    monkeypatch.setattr(knobs, "_moves_target", found)
    monkeypatch.setattr(knobs, "_moves_candidate", lambda setup, pair: moves_candidate(pair["case"]["settings"]["k"]))
    setup = SimpleNamespace(goal=SimpleNamespace(family=SimpleNamespace(knobs={"k": None})))
    return knobs.find_effect(setup, st.integers(0, 1000), "k", seed=0)


def test_one_case_where_the_candidate_stays_carries_no_verdict(monkeypatch):
    """EC7: the knob moves the target on every drawn case; the candidate stays on the first and moves on a later
    one: effective, not "no effect" (the shrunk case of a decoder whose two values happen to agree there)."""
    seen = []

    def candidate_moves(n):
        seen.append(n)
        return len(seen) > 1  # idle on the first case tried only

    finding = _stub_search(monkeypatch, lambda n: True, candidate_moves)
    assert finding.verdict == "effective" and finding.moving == 2 and len(seen) == 2


def test_a_knob_idle_on_every_drawn_case_has_no_effect_and_says_how_many(monkeypatch):
    """The negative control: the candidate never moves; every drawn case is tried before the verdict, and the
    sentence counts them and names the values tried."""
    from veridec.testing.knobs import SEARCHED

    finding = _stub_search(monkeypatch, lambda n: n % 2 == 0, lambda n: False)
    assert finding.verdict == "no effect" and finding.failed and finding.drawn == SEARCHED
    assert 0 < finding.moving < SEARCHED and len(finding.pairs) == finding.moving
    assert f"any of the {finding.moving} drawn cases (of {SEARCHED})" in finding.sentence()
    assert _stub_search(monkeypatch, lambda n: False, lambda n: False).verdict == "not exercised"


def test_a_knob_that_moves_the_candidate_otherwise_is_a_divergence_with_its_case():
    """EC7 at tier E: a decoder whose threshold defaults to 0.9 and reads None (quota mode, never drawn for it) as
    0.9; the knob search changes the threshold to None, which moves both sides, and the changed case diverges."""
    real = load_candidate(f"{EXAMPLE}:generate")

    def none_as_default(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                        threshold=0.9):
        return real(model, prompt, steps=steps, gen_length=gen_length, block_length=block_length,
                    temperature=temperature, mask_id=mask_id, threshold=0.9 if threshold is None else threshold)

    result = check_decoder(none_as_default, **DUAL)
    assert not result.passed and result.trials == 10 and result.failure is None  # the drawn cases all pass
    assert result.knobs["threshold"] == "moves differently"
    (finding,) = result.knob_failures
    assert finding["case"]["settings"]["threshold"] is None and None in finding["values"]
    assert finding["sentence"].startswith("threshold moves the candidate otherwise than the target")
    assert "## A knob that moves the candidate otherwise" in result.markdown()
    assert check_decoder(none_as_default, **DUAL, tier="A").knobs["threshold"] == "effective"  # A: measured only
