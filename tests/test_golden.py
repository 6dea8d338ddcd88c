"""Golden traces of the official samplers, replayed with veridec's decoders on every run (spec SQ1.8, SQ2.6,
FD4, FD8). No network and no official code: ``tests/golden/golden.json`` holds what the official files did
(recorded by ``python -m tools.golden.record record``, see tools/golden/record.py), on the tiny checkpoints under
``tests/golden/checkpoints`` and the 126464-token one written here from its seed; their content hashes are
checked before anything runs.

Each case is asserted according to ``expect``:
- ``equal``: veridec gives the official canvas, forward count and per-step commits (ties="torch", torch's global
  RNG seeded as recorded);
- ``padding_ignored_upstream`` (LLaDA, left-padded rows): the official LLaDA modelling ignores the attention
  mask, so the official output is veridec's with the padding treated as tokens (no attention mask), and
  veridec with the mask gives its own recorded output (which differs where ``differs``);
- ``row_clamp`` (Dream, rows with unequal mask counts): the official loop writes the mask token over committed
  tokens, veridec clamps (SQ2.4); veridec gives its recorded output and the same steps up to the re-masking;
- ``upstream_defect``: the official run failed (an error, or an endless loop stopped after the recorder's cap);
  the failure is a documented one, veridec completes or reports a stall as recorded, and the steps both took
  agree;
- ``near_tie``: a decision's margin was within the measured rounding error between the official modelling and
  ours; veridec must run, tokens are not asserted;
- ``disagreement``: veridec differs from the official code for a reason found and reported (``cause``); veridec
  gives its recorded outcome and the steps both took agree. A change of veridec that resolves it fails here on
  purpose: re-record, and the case becomes ``equal``.
"""

import hashlib
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from tools.golden.checkpoints import content_sha256
from tools.golden.replay import DEFECTS, ignores_padding, replay_case

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "golden.json").read_text())
CASES = GOLDEN["cases"]
GROUPS = sorted({f"{case['sampler']}/{case['variant']}" for case in CASES})


@pytest.fixture(scope="module")
def models(golden_checkpoints):
    return golden_checkpoints[1]


def test_committed_checkpoints_match_their_recorded_hashes():
    for name, info in GOLDEN["checkpoints"].items():
        if info["committed"]:
            folder = GOLDEN_DIR / "checkpoints" / name
            assert content_sha256(folder) == info["content_sha256"], name
            for file, sha in info["files"].items():
                assert hashlib.sha256((folder / file).read_bytes()).hexdigest() == sha, f"{name}/{file}"


def test_the_grid_covers_every_option():
    assert len(CASES) >= 500
    seen = {}
    for case in CASES:
        for key, value in case["settings"].items():
            seen.setdefault((case["sampler"], key), set()).add(json.dumps(value))
    values = lambda sampler, key: {json.loads(v) for v in seen[(sampler, key)]}
    assert {0.0, 0.5, 1.0} <= values("llada", "temperature")
    assert values("llada", "remasking") == {"low_confidence", "random"}
    assert {0.0, 1.5} <= values("llada", "cfg_scale")
    assert values("llada", "logits_eos_inf") == values("llada", "confidence_eos_eot_inf") == {False, True}
    assert len({(c["settings"]["gen_length"], c["settings"]["block_length"], c["settings"]["steps"])
                for c in CASES if c["sampler"] == "llada"}) >= 8
    assert {None, 0.05, 0.2, 0.5, 0.9} <= values("fastdllm", "threshold")
    assert {0.5, 1.0, 2.0, 4.0} <= values("fastdllm", "factor")
    assert values("dream", "alg") == {"origin", "maskgit_plus", "topk_margin", "entropy"}
    assert {None, 0.5} <= values("dream", "alg_temp") and {None, 0.9} <= values("dream", "top_p")
    assert {None, 5} <= values("dream", "top_k") and {0.0, 0.7} <= values("dream", "temperature")
    assert {f"fastdllm/{loop}/{cache}" for loop in ("current", "legacy") for cache in ("none", "prefix", "dual")} \
        <= set(GROUPS)
    shapes = Counter((case["sampler"], case.get("shape")) for case in CASES)
    for wanted in (("llada", "padded"), ("llada", "infill"), ("llada", "two"), ("fastdllm", "batch"),
                   ("dream", "padded"), ("dream", "infill"), ("dream", "unequal-masks")):
        assert shapes[wanted] > 0, wanted
    defects = {case["defect"] for case in CASES if case["expect"] == "upstream_defect"}
    assert defects == set(DEFECTS.values())  # every documented upstream defect is exercised


def test_sources_are_recorded():
    for role, source in GOLDEN["sources"].items():
        assert source["repository"] in ("ML-GSAI/LLaDA", "NVlabs/Fast-dLLM"), role
        assert len(source["commit"]) == 40 and len(source["sha256"]) == 64, role


@pytest.mark.parametrize("group", GROUPS)
def test_golden_cases(group, models):
    started, failures, counts = time.perf_counter(), [], Counter()
    for case in (c for c in CASES if f"{c['sampler']}/{c['variant']}" == group):
        problem = replay_case(case, models[case["checkpoint"]])
        counts[case["expect"]] += 1
        if problem:
            failures.append(f"{case['id']} ({case['expect']}, {case['settings']}): {problem}")
    print(f"{group}: {dict(counts)} in {time.perf_counter() - started:.1f} s")
    assert not failures, f"{len(failures)} of {sum(counts.values())} cases:\n" + "\n".join(failures[:20])


def test_the_replay_fails_when_any_recorded_field_differs(models):
    """A negative control per field the replay holds: a recording changed in its canvas, forward count, one
    forward's commits, its status (the stop reason), the recorded error of ours or a documented difference fails."""
    def first(expect: str, **where) -> dict:
        return next(c for c in CASES if c["expect"] == expect and all(c.get(k) == v for k, v in where.items()))

    def changed(case: dict, path: tuple, value) -> dict:
        copy = json.loads(json.dumps(case))
        parent = copy
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value(parent[path[-1]])
        return copy

    equal = first("equal", sampler="fastdllm", variant="current/dual")
    defect = next(c for c in CASES if c["expect"] == "upstream_defect" and c["veridec"]["status"] == "error")
    padded = first("padding_ignored_upstream")
    edits = [(equal, ("official", "canvas", 0, -1), lambda t: t + 1),
             (equal, ("official", "nfe"), lambda n: n + 1),
             (equal, ("official", "steps", 0), lambda step: step[1:]),
             (equal, ("official", "status"), lambda _: "error"),
             (defect, ("veridec", "error"), lambda e: e + " (changed)"),
             (defect, ("official", "status"), lambda _: "ok"),
             (padded, ("differs",), lambda d: not d)]
    assert all(replay_case(case, models[case["checkpoint"]]) is None for case in (equal, defect, padded))
    for case, path, value in edits:
        assert replay_case(changed(case, path, value), models[case["checkpoint"]]) is not None, path


def test_a_llada_case_with_any_padded_row_is_replayed_without_its_mask():
    """The official LLaDA modelling ignores the attention mask (SQ1.8): one padded row is enough for the replay
    to run ours without it; an all-ones mask, or another sampler, keeps it."""
    case = {"sampler": "llada", "attention_mask": [[0, 1, 1], [1, 1, 1]]}
    assert ignores_padding(case)
    assert not ignores_padding({**case, "attention_mask": [[1, 1, 1], [1, 1, 1]]})
    assert not ignores_padding({**case, "attention_mask": None})
    assert not ignores_padding({**case, "sampler": "dream"})
    mixed = [c for c in CASES if c["expect"] == "padding_ignored_upstream"
             and any(0 not in row for row in c["attention_mask"])]
    assert mixed and all(ignores_padding(c) for c in mixed)  # recorded: a padded row beside unpadded ones
