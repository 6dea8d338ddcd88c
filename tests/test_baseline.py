"""The CI regression gate: benchmark counters vs the committed benchmarks/baseline.json (spec/exactness.md E5)."""

from pathlib import Path

import pytest

from tools import baseline

BASELINE = Path(__file__).parent.parent / "benchmarks" / "baseline.json"


# The suite holds the cheapest length of the grid (about a tenth of its cost); the whole grid and its same-run
# speed floors at gen 256 run with ``python -m tools.baseline`` (docs/maintainers.md).
SUITE_GEN_LENGTHS = (64,)


@pytest.fixture(scope="module")
def records():
    return {**baseline.run_cases(SUITE_GEN_LENGTHS), **baseline.run_block_cases(SUITE_GEN_LENGTHS)}


def test_counters_stay_within_tolerance_of_the_baseline(records):
    """Update after an intended change: ``python -m tools.baseline --update`` (the diff shows in review)."""
    expected = baseline.cases_at(baseline.load(BASELINE), SUITE_GEN_LENGTHS)
    problems = baseline.regressions(records, expected)
    assert not problems, "\n".join(problems)
    assert set(records) == set(expected), "cases changed: run python -m tools.baseline --update"


def test_reference_rows_agree_with_themselves(records):
    assert all(r["token_match"] == 1 and r["commit_order_match"] == 1
               for name, r in records.items() if "/reference/" in name or "/reference-b" in name)


def test_the_block_cache_is_exact_and_cheaper_than_its_reference(records):
    """BD8, BD11 on the shipped block-diffusion model: the cached batch commits as each prompt alone, with no full
    forward and fewer query positions than the reference's full block-causal forwards."""
    blocks = {name: r for name, r in records.items() if name.startswith("blocks/")}
    assert len(blocks) == len(baseline.BLOCK_DECODERS) * 2 * len(baseline.BLOCK_SIZES) * len(SUITE_GEN_LENGTHS)
    for name, r in blocks.items():
        if "/cached-" in name:
            reference = blocks[name.replace("/cached-", "/reference-")]
            assert r["token_match"] == 1 and r["commit_order_match"] == 1, name
            assert r["full_forwards"] == 0 < reference["full_forwards"], name
            assert r["positions_per_prompt"] < reference["positions_per_prompt"], name


def test_the_gate_fails_on_regressions():
    base = {"a/dual/gen64": {"full_forwards": 10, "positions_per_prompt": 100.0, "tokens_per_step": 4.0,
                             "token_match": 0.9, "commit_order_match": 0.5}}
    same = {"a/dual/gen64": dict(base["a/dual/gen64"], seconds=1.0)}
    assert baseline.regressions(same, base) == []
    for metric, value in [("full_forwards", 11), ("positions_per_prompt", 106.0), ("tokens_per_step", 3.7),
                          ("token_match", 0.84), ("commit_order_match", 0.2)]:
        worse = {"a/dual/gen64": dict(same["a/dual/gen64"], **{metric: value})}
        assert [p.split(":")[1].split()[0] for p in baseline.regressions(worse, base)] == [metric]
    better = {"a/dual/gen64": dict(same["a/dual/gen64"], full_forwards=5, token_match=1.0)}
    assert baseline.regressions(better, base) == []
    assert baseline.regressions({}, base) == ["a/dual/gen64: missing from this run"]
    slow = {"fastdllm/dual/gen256": {"seconds": 1.0}, "sequential/reference/gen256": {"seconds": 2.0}}
    assert "floor 3.0x" in baseline.speed_shortfalls(slow)[0]
    fast = {"fastdllm/dual/gen256": {"seconds": 1.0}, "sequential/reference/gen256": {"seconds": 3.0}}
    assert baseline.speed_shortfalls(fast) == []


def test_the_suite_runs_a_length_the_baseline_holds_for_every_case():
    cases = baseline.load(BASELINE)
    at = baseline.cases_at(cases, SUITE_GEN_LENGTHS)
    per_length = len(baseline.DECODERS) * len(baseline.VARIANTS) + len(baseline.BLOCK_DECODERS) * 2 * len(
        baseline.BLOCK_SIZES)
    assert len(at) == per_length == len(cases) // len(baseline.GEN_LENGTHS)
    assert baseline.cases_at({"a/dual/gen64": {}, "a/dual/gen640": {}}, (64,)) == {"a/dual/gen64": {}}
