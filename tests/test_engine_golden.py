"""SGLang's own decisions, recorded (tests/golden/sglang.json, ``python -m tools.golden.sglang``; spec/engines.md
EN6): veridec's rules fed the recorded logits take SGLang's decisions at every step of every case recorded as a
pass, and differ exactly at the last step of a case recorded with a stated difference; broken rules do not.
With sglang loadable (installed, or VERIDEC_SGLANG_ROOT naming an unzipped wheel), its algorithms fed the same
logits take the recorded decisions again."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from veridec.rules.editing import EditParams
from veridec.testing.engine_golden import engine_decisions, rule_decisions
from veridec.testing.families.sglang import RULES, EditRule, ThresholdRule

GOLDEN = json.loads((Path(__file__).resolve().parent / "golden" / "sglang.json").read_text())
DTYPE, MASKS = GOLDEN["logits_dtype"], GOLDEN["mask_ids"]
CASES = GOLDEN["cases"]
CAPPED = ("step cap", "stalled")  # the engine's loop ended the case: every recorded step agrees


def sglang(step: dict) -> dict:
    return step["engine"]


def agreeing(decisions: list, steps: list) -> int:
    """How many steps from the first agree with SGLang's recorded decisions."""
    return next((i for i, (ours, theirs) in enumerate(zip(decisions, steps)) if ours != sglang(theirs)),
                len(steps))


@pytest.mark.parametrize("index", range(len(CASES)))
def test_veridec_takes_sglangs_decisions(index):
    case = CASES[index]
    steps = case["steps"]
    ours = rule_decisions(RULES[case["against"]], case["case"]["config"], MASKS[case["model"]], steps, DTYPE)
    assert ours == [step["reference"] for step in steps]  # veridec's rule as when recorded
    if case["verdict"] == "pass":
        assert agreeing(ours, steps) == len(steps) and steps[-1]["engine"]["done"] == [True] * len(steps[-1]["rows"])
    elif case["kind"] in CAPPED:
        assert agreeing(ours, steps) == len(steps) and False in steps[-1]["engine"]["done"], case["divergence"]
    else:
        assert agreeing(ours, steps) == len(steps) - 1, case["divergence"]


def test_the_golden_holds_every_algorithm_and_the_typed_outcomes():
    runs = {(c["algorithm"], c["case"]["config"].get("vectorized_decoding", False)) for c in CASES}
    assert runs == {("LowConfidence", False), ("JointThreshold", False), ("JointThreshold", True),
                    ("JointThresholdInDel", False)}
    assert {c["verdict"] for c in CASES} == {"pass", "strict-threshold", "anti-loop", "mask-token", "step-cap",
                                             "stalled"}
    assert GOLDEN["sglang"] == "0.5.23" and len(GOLDEN["files"]) == 5


def test_the_strict_difference_is_the_strict_reading():
    """Where SGLang's LowConfidence parts from Fast-dLLM's rule, the strict reading takes its decisions."""
    for case in (c for c in CASES if c["verdict"] == "strict-threshold"):
        strict = rule_decisions(RULES["threshold-strict"], case["case"]["config"], MASKS[case["model"]],
                                case["steps"], DTYPE)
        assert agreeing(strict, case["steps"]) == len(case["steps"])


def last_round(case: dict) -> list[dict]:
    return [step for step in case["steps"] if step["round"] == case["steps"][-1]["round"]]


def test_a_mask_token_divergence_is_the_rule_writing_the_mask():
    for case in (c for c in CASES if c["verdict"] == "mask-token"):
        last, mask = case["steps"][-1], MASKS[case["model"]]
        engine, ours = last["engine"]["input_ids"], last["reference"]["input_ids"]
        assert any(o == mask != e for e, o in zip(engine, ours))


def test_a_capped_case_ran_its_rounds_full_length():
    """step-cap: SGLang's loop ran max_steps = b + max_post_edit_steps + 1 steps and emitted the block with a row
    not done (and the rule had not come back to a state); stalled: a row's block came back within the round."""
    for case in (c for c in CASES if c["kind"] in CAPPED):
        steps, config, size = last_round(case), case["case"]["config"], case["case"]["block_size"]
        rows = len(steps[0]["rows"])
        blocks = [[tuple(s["input_ids"][i * size:(i + 1) * size]) for s in steps] for i in range(rows)]
        repeated = any(len(set(row)) < len(row) for row in blocks)
        if case["kind"] == "step cap":
            assert len(steps) == size + config["max_post_edit_steps"] + 1 and not repeated
        else:
            assert repeated


def test_an_anti_loop_divergence_follows_a_block_seen_before():
    for case in (c for c in CASES if c["verdict"] == "anti-loop"):
        last, rows = case["steps"][-1], len(case["steps"][-1]["rows"])
        size = len(last["input_ids"]) // rows
        earlier = [step["input_ids"] for step in case["steps"][:-1] if step["round"] == last["round"]]
        blocks = lambda ids: [ids[i * size:(i + 1) * size] for i in range(rows)]
        assert any(a == b for ids in earlier for a, b in zip(blocks(ids), blocks(last["input_ids"])))
        before, engine, ours = last["input_ids"], last["engine"]["input_ids"], last["reference"]["input_ids"]
        differing = [j for j in range(len(before)) if engine[j] != ours[j]]
        assert len(differing) == 1 and before[differing[0]] not in (engine[differing[0]], ours[differing[0]])


class IgnoredThreshold(ThresholdRule):
    def __init__(self, threshold, mask_id, inclusive=True):
        super().__init__(0.9, mask_id, inclusive)


class NoEdits(EditRule):
    def __init__(self, params, mask_id):
        super().__init__(replace(params, editing_threshold=1.0), mask_id)


class PostStepsOffByOne(EditRule):
    def __init__(self, params, mask_id):
        super().__init__(replace(params, max_post_steps=params.max_post_steps + 1), mask_id)


def params(config: dict) -> EditParams:
    return EditParams(threshold=config["threshold"], editing_threshold=config["edit_threshold"],
                      max_post_steps=config["max_post_edit_steps"], ties="torch")


@pytest.mark.parametrize("against, broken", [
    ("threshold", lambda config, mask: IgnoredThreshold(config.get("threshold"), mask, False)),
    ("editing", lambda config, mask: NoEdits(params(config), mask)),
    ("editing", lambda config, mask: PostStepsOffByOne(params(config), mask)),
])
def test_the_golden_catches_a_broken_rule(against, broken):
    """Negative controls: a threshold ignored, edits off, one post step too many each part from SGLang."""
    rule = replace(RULES[against], rule=broken)
    cases = [c for c in CASES if c["against"] == against and c["verdict"] == "pass"]
    assert any(agreeing(rule_decisions(rule, c["case"]["config"], MASKS[c["model"]], c["steps"], DTYPE),
                        c["steps"]) < len(c["steps"]) for c in cases)


def _sglang_root():
    from veridec.testing.sglang import ContractError, sglang_root

    try:
        return sglang_root(os.environ.get("VERIDEC_SGLANG_ROOT"))
    except ContractError as err:
        pytest.skip(f"SGLang's code is not here ({err}); the golden data above holds its recorded decisions")


@pytest.mark.parametrize("index", range(len(CASES)))
def test_sglang_itself_takes_the_recorded_decisions(index):
    from veridec.testing.engine_check import _builder
    from veridec.testing.sglang import load_sglang_algorithm

    root = _sglang_root()
    case = CASES[index]
    cls, config_class = load_sglang_algorithm(case["algorithm"], root)
    build = _builder(cls, config_class, case["algorithm"], MASKS[case["model"]], tuple(case["case"]["indel_ids"]))
    assert engine_decisions(lambda: build(case["case"]), case["steps"], DTYPE) == [sglang(s) for s in case["steps"]]


MASK_LOGITS = [[0.0, 0.0, 0.0, 4.0], [9.0, 0.0, 0.0, 0.0]]  # [b=2, V=4], mask id 3: position 0's argmax is the mask


@pytest.mark.parametrize("name", ["LowConfidence", "JointThreshold"])
def test_sglang_emits_the_mask_token_where_the_model_proposes_it(name):
    """The finding of benchmarks/engine-conformance.md, logits in, decisions out: where the argmax at a masked
    position is the mask token, LowConfidence and JointThreshold commit it (the position stays masked), the block
    never finishes, and the sync loop emits it with the mask id after max_steps (FDFO has no cap: never done)."""
    import torch

    from veridec.testing.sglang import ReplayBatch, load_sglang_algorithm

    cls, config_class = load_sglang_algorithm(name, _sglang_root())
    algorithm = cls(config_class(name, {}, block_size=2, mask_id=3, max_running_requests=1))
    batch = ReplayBatch(torch.tensor([3, 3]), torch.tensor([[False, False]]))
    states = algorithm.init_step_state(batch)
    done = [algorithm.step(batch, torch.tensor(MASK_LOGITS, dtype=torch.float64), states)
            for _ in range(algorithm.max_steps(2))]
    assert batch.input_ids.tolist() == [3, 0] and not any(d[0] for d in done)


def test_veridecs_rule_stalls_on_the_same_logits():
    """veridec's rules make the same decisions there and come back to a block and state they had seen: the
    replay's typed outcome ``stalled`` (spec/engines.md EN4), never a pass."""
    import torch

    from veridec.testing.families.sglang import edit_rule, threshold_rule

    for rule in (threshold_rule({}, 3, False), edit_rule({}, 3)):
        block, prompt = torch.tensor([3, 3]), torch.tensor([False, False])
        for _ in range(3):
            decided = rule.step(block, prompt, torch.tensor(MASK_LOGITS, dtype=torch.float64))
            block = decided.tokens
        assert block.tolist() == [3, 0] and not decided.done and rule.stalled


class RecordedRunner:
    """A ModelRunner stand-in whose forwards return a round's recorded logits in turn (the last again past them:
    a capped loop forwards once more after its last step)."""

    def __init__(self, logits: list):
        self.logits, self.calls = logits, 0

    def forward(self, forward_batch, pp_proxy_tensors=None):
        from types import SimpleNamespace

        full = self.logits[min(self.calls, len(self.logits) - 1)]
        self.calls += 1
        return SimpleNamespace(logits_output=SimpleNamespace(full_logits=full.clone()), can_run_graph=False)


@pytest.mark.parametrize("index", [i for i, c in enumerate(CASES) if c["verdict"] == "pass" or c["kind"] in CAPPED])
def test_sglangs_own_run_loop_takes_the_replays_steps(index):
    """SGLang's own ``DllmAlgorithm.run`` (its sync loop: ``_run_sync``), fed each round's recorded logits, makes
    the steps the replay's mirror of it made: as many, with the same blocks and done flags."""
    from veridec.testing.engine_check import _builder
    from veridec.testing.engine_golden import _tensors
    from veridec.testing.sglang import ReplayBatch, load_sglang_algorithm

    root, case = _sglang_root(), CASES[index]
    cls, config_class = load_sglang_algorithm(case["algorithm"], root)
    algorithm = _builder(cls, config_class, case["algorithm"], MASKS[case["model"]],
                         tuple(case["case"]["indel_ids"]))(case["case"])
    taken, step = [], algorithm.step
    algorithm.step = lambda batch, logits, states: taken.append(step(batch, logits, states)) or taken[-1]
    for number in sorted({s["round"] for s in case["steps"]}):
        steps = [s for s in case["steps"] if s["round"] == number]
        ids, prompt_mask, _ = _tensors(steps[0], DTYPE)
        batch, taken[:] = ReplayBatch(ids.flatten().clone(), prompt_mask), []
        algorithm.run(RecordedRunner([_tensors(s, DTYPE)[2] for s in steps]), batch)
        assert [list(map(bool, d)) for d in taken] == [s["engine"]["done"] for s in steps]
        assert batch.input_ids.tolist() == steps[-1]["engine"]["input_ids"]


FDFO_CASES = [{"prompts": [[5, 6, 7], [8]], "gen_length": 6, "block_size": 2, "config": {}},
              {"prompts": [[1], [2, 3, 4, 5], [6, 7]], "gen_length": 5, "block_size": 3,
               "config": {"threshold": 0.5, "edit_threshold": 0.0, "max_post_edit_steps": 1}}]


@pytest.mark.parametrize("name", ["LowConfidence", "JointThreshold", "JointThresholdInDel"])
@pytest.mark.parametrize("case", FDFO_CASES)
def test_sglangs_own_fdfo_run_takes_the_replays_steps(name, case):
    """SGLang's own ``run`` in first-done-first-out mode (``_run_fdfo``: one step per call, states carried by the
    caller), fed each round of an FDFO replay's transcript, emits the rows the replay's mirror emitted, with the
    same blocks."""
    from veridec.testing.engine_check import _builder, _run_case
    from veridec.testing.engine_golden import _tensors
    from veridec.testing.engines import float64_model
    from veridec.testing.families.sglang import BUILT_IN
    from veridec.testing.models import load_check_model
    from veridec.testing.sglang import ReplayBatch, load_sglang_algorithm

    cls, config_class = load_sglang_algorithm(name, _sglang_root())
    model = float64_model(load_check_model("blocks"))
    build = _builder(cls, config_class, name, model.special.mask_id, (42, 41), fdfo=True)
    against, differences = BUILT_IN[name]
    _, replay = _run_case(build, RULES[against], differences, model, {**case, "fdfo": True}, (42, 41), 10.0, True)
    algorithm, carried = build(replay.case), {}
    for step in replay.transcript:
        ids, prompt_mask, logits = _tensors(step)
        batch = ReplayBatch(ids.flatten().clone(), prompt_mask)
        out = algorithm.run(RecordedRunner([logits]), batch, [carried.get(r) for r in step["rows"]])
        assert out[2] == [case["block_size"] if done else 0 for done in step["engine"]["done"]]  # accepted
        assert [t for row in out[1] for t in row] == step["engine"]["input_ids"]
        carried = {r: state for r, state in zip(step["rows"], out[3]) if state is not None}
