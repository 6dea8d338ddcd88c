"""``veridec check`` held against the official code on every run (spec/exactness.md EC6): a candidate that replays
each golden recording (what the official LLaDA, Fast-dLLM and Dream code did on one case: its model calls, then
its output or its error; tools/golden/candidate.py, data only) is checked on that case against veridec's target.
Every case passes: equal ones exactly, near ties within the recorded tolerance, and each upstream defect as the
official defect the golden data names (the target's prediction of it, spec FD9, SQ1.9, SQ2.8, is held against
what the official code did). With ``official_defects="fail"`` exactly the defect cases fail."""

import json
from collections import Counter
from pathlib import Path

import pytest

from tools.golden.candidate import replay_candidate
from veridec.testing import check_decoder, target

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "golden.json").read_text())
CASES = GOLDEN["cases"]
GROUPS = sorted({f"{case['sampler']}/{case['variant']}" for case in CASES})
CLAUSES = {  # the golden data's name of each official defect -> the clause that documents it
    "quota mode": "FD9.1", "endless loop": "FD9.2", "factor mode at batch > 1": "FD9.3",
    "dual cache at batch > 1": "FD9.4", "June 2025 file at batch > 1": "FD9.5", "cfg_scale > 0": "SQ1.9",
}


@pytest.fixture(scope="module")
def models(golden_checkpoints):
    return golden_checkpoints[1]


def expected_clause(case: dict) -> str | None:
    if case["expect"] == "row_clamp":
        return "SQ2.8"
    if case["expect"] != "upstream_defect":
        return None
    (clause,) = [clause for name, clause in CLAUSES.items() if case["defect"].startswith(name)]
    return clause


def check_replay(case: dict, model, official_defects: str = "match"):
    """``check_decoder`` of the case's replay against veridec's target for its sampler, loop and cache, on the
    case alone (ties as the official code's; padding dropped where the official modelling ignores it)."""
    if case["sampler"] == "fastdllm":
        loop, cache = case["variant"].split("/")
        against, convention = ("fastdllm" if loop == "current" else "fastdllm-2025-06"), \
            ("llada" if cache == "none" else "fastdllm")
    else:
        against, cache, convention = case["sampler"], "none", case["sampler"]
    mask = None if case["expect"] == "padding_ignored_upstream" else case["attention_mask"]
    taken = target(against, cache).settings  # the mask and pad ids come from the model
    settings = {name: value for name, value in case["settings"].items() if name in taken}
    one = {"prompt": case["prompt"], "attention_mask": mask, "seed": case["seed"], "settings": settings}
    return check_decoder(replay_candidate(case), against, cache=cache, convention=convention, model=model,
                         case=one, ties="torch", numeric_error=case.get("tolerance", 0.0),
                         official_defects=official_defects)


@pytest.mark.parametrize("group", GROUPS)
def test_the_official_outcomes_pass_the_check(group, models):
    verdicts, wrong = Counter(), []
    for case in (c for c in CASES if f"{c['sampler']}/{c['variant']}" == group):
        result = check_replay(case, models[case["checkpoint"]])
        found = ",".join(result.official_defects) or None
        verdicts[(case["expect"], found)] += 1
        if not result.passed or found != expected_clause(case):
            problems = result.failure.problems if result.failure else []
            wrong.append(f"{case['id']} ({case['expect']}): passed={result.passed}, defect {found}, wanted "
                         f"{expected_clause(case)}; {problems[:2]}")
    print(group, dict(verdicts))
    assert not wrong, "\n".join(wrong)


def test_asking_for_better_than_upstream_fails_exactly_the_defect_cases(models):
    defects = [case for case in CASES if expected_clause(case)]
    assert len(defects) >= 50 and {expected_clause(c) for c in defects} == {*CLAUSES.values(), "SQ2.8"}
    failed = [case["id"] for case in defects
              if not check_replay(case, models[case["checkpoint"]], official_defects="fail").passed]
    assert failed == [case["id"] for case in defects]
    equal = [case for case in CASES if case["expect"] == "equal"][::40]
    assert all(check_replay(case, models[case["checkpoint"]], official_defects="fail").passed for case in equal)


def test_skipping_upstream_defects_leaves_the_case_out(models):
    case = next(case for case in CASES if expected_clause(case) == "FD9.1")
    with pytest.raises(ValueError, match="the official code fails here: FD9.1"):
        check_replay(case, models[case["checkpoint"]], official_defects="skip")
