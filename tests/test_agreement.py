"""vLLM's token-agreement rule in tier A (spec/exactness.md EC10). The candidate is LLaDA's sampler whose first
model call has each position's two best tokens swapped: it commits the same positions at step 0 (the confidence
is the same largest probability), each with the second-best token, so at its first divergence the candidate's
token ranks 1 under the target's distribution and the target's ranks 0 under the candidate's; the gap is the
top-2 log-probability difference of veridec's full forward on the initial canvas."""

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from veridec.harness.cli import main
from veridec.testing import check_decoder, load_check_model
from veridec.testing.agreement import Agreement, _judge

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
from llada_sampler import generate as llada_generate  # noqa: E402

sys.path.pop(0)
EXAMPLE = f"{Path(__file__).parents[1] / 'examples' / 'llada_sampler.py'}:generate"
RUN = dict(model="default", tier="A", max_examples=4, knobs=False, max_batch=1, padding=False,
           settings={"temperature": 0.0, "remasking": "low_confidence"})  # greedy: tokens are choices, not draws


class FirstCallSwapped:
    """The model with the best two tokens' logits swapped at every position of its first call."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def __call__(self, x, **options):
        logits = self.model(x, **options).logits.clone()  # [B, L, V]
        self.calls += 1
        if self.calls == 1:
            top = logits.topk(2, dim=-1)
            logits.scatter_(-1, top.indices, top.values.flip(-1))
        return SimpleNamespace(logits=logits)


def second_choice_first(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                        remasking="low_confidence", mask_id=126336):
    return llada_generate(FirstCallSwapped(model), prompt, steps, gen_length, block_length, temperature, remasking,
                          mask_id)


def top2_gap(model, case: dict, position: int) -> float:
    """log p(best) - log p(second) at ``position`` of veridec's full forward of the case's initial canvas."""
    prompt = torch.tensor(case["prompt"])
    canvas = torch.cat([prompt, torch.full((1, case["settings"]["gen_length"]), model.special.mask_id)], dim=1)
    with torch.no_grad():
        logp = model(canvas).logits[0, position].double().log_softmax(-1)
    best = logp.topk(2).values
    return (best[0] - best[1]).item()


@pytest.fixture(scope="module")
def strict():
    return check_decoder(second_choice_first, "llada", agreement={"top_k": 1}, **RUN)


def test_second_choices_fail_top_1_with_their_ranks_and_gap(strict):
    assert not strict.passed and strict.metrics["agreement_rate"] == 0.0
    assert strict.metrics["agreement_unplaced"] == 0
    failure = strict.metrics["agreement_failures"][0]
    assert failure["candidate_token_rank_in_target"] == 1 and failure["target_token_rank_in_candidate"] == 0
    model = load_check_model("default")
    assert failure["gap"] == pytest.approx(top2_gap(model, failure["case"], failure["position"]), rel=1e-9)
    assert "top-1" in strict.markdown() and "no log-probability bound" in strict.markdown()


def test_second_choices_agree_within_top_2_and_fail_a_smaller_gap(strict):
    within = check_decoder(second_choice_first, "llada", agreement=Agreement(top_k=2), **RUN)
    assert within.passed and within.metrics["agreement_rate"] == 1.0 and not within.metrics["agreement_failures"]
    assert within.metrics["exact_rate"] < 1  # the tokens do differ: the rule, not equality, passed it
    gaps = [f["gap"] for f in strict.metrics["agreement_failures"]]
    bounded = check_decoder(second_choice_first, "llada", agreement=Agreement(top_k=2, max_gap=min(gaps) / 2), **RUN)
    assert not bounded.passed and bounded.metrics["agreement_failures"]
    assert f"log-probability gap <= {min(gaps) / 2:g}" in bounded.markdown()
    loose = check_decoder(second_choice_first, "llada", agreement=Agreement(top_k=2, max_gap=max(gaps) * 2), **RUN)
    assert loose.passed


def test_an_exact_candidate_agrees_everywhere():
    result = check_decoder(llada_generate, "llada", agreement={"top_k": 1, "max_gap": 1e-9}, **RUN)
    assert result.passed and result.metrics["agreement_rate"] == 1.0 and result.metrics["exact_rate"] == 1.0


def test_ranks_count_strictly_better_tokens_and_the_gap_is_the_larger_side():
    target = torch.tensor([0.0, -1.0, -1.0, -3.0]).double()  # log-probabilities (need not normalise here)
    candidate = torch.tensor([-2.0, -0.5, -4.0, -3.0]).double()
    found = _judge(Agreement(top_k=2), 0, 5, 0, 2, {"target": target, "candidate": candidate})
    assert found["candidate_token_rank_in_target"] == 1  # token 1 ties token 2: only token 0 is better
    assert found["target_token_rank_in_candidate"] == 1 and found["gap"] == 1.0  # max(0 - (-1), -4 - (-2))
    assert found["agrees"]
    assert not _judge(Agreement(top_k=1), 0, 5, 0, 2, {"target": target, "candidate": candidate})["agrees"]
    assert not _judge(Agreement(top_k=2, max_gap=0.999), 0, 5, 0, 2,
                      {"target": target, "candidate": candidate})["agrees"]
    assert _judge(Agreement(top_k=2, max_gap=1.0), 0, 5, 0, 2, {"target": target, "candidate": candidate})["agrees"]
    prefers_its_own = torch.tensor([-4.0, -0.5, -1.0, -3.0]).double()  # the candidate's side: 3 nats for token 2
    found = _judge(Agreement(top_k=4), 0, 5, 0, 2, {"target": target, "candidate": prefers_its_own})
    assert found["gap"] == 3.0  # the larger of the two sides' preferences


@pytest.mark.parametrize("bad, says", [
    (dict(top_k=0), "top_k must be an integer >= 1"), (dict(top_k=True), "top_k must be an integer"),
    (dict(top_k=2, max_gap=0), "max_gap must be a number of nats > 0"),
    (dict(top_k=2, max_gap=math.nan), "max_gap must be a number")])
def test_the_rule_refuses_bad_parameters(bad, says):
    with pytest.raises(ValueError, match=says):
        Agreement(**bad)


def test_the_rule_is_tier_a_only_and_named_on_the_command_line(capsys):
    with pytest.raises(ValueError, match="applies to tier A only, not tier E"):
        check_decoder(llada_generate, "llada", agreement={"top_k": 1}, model="default", max_examples=1)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['k'\]"):
        check_decoder(llada_generate, "llada", agreement={"k": 1}, **RUN)
    base = ["check", EXAMPLE, "--against", "llada", "--quiet", "--trials", "2", "--no-knobs"]
    assert main(base + ["--agreement-top-k", "2"]) == 2
    assert "--agreement-top-k applies to --tier A only" in capsys.readouterr().err
    assert main(base + ["--tier", "A", "--agreement-max-gap", "1"]) == 2
    assert "needs --agreement-top-k" in capsys.readouterr().err
    assert main(base + ["--tier", "A", "--agreement-top-k", "3", "--agreement-max-gap", "0.5"]) == 0
    assert "top-3, log-probability gap <= 0.5" in capsys.readouterr().out


def _side(canvas: list, steps: list):
    """A Side with a hand-written trace: ``steps`` per step, per row, the positions committed."""
    from veridec.testing.running import Side
    from veridec.trace import StepRecord, Trace

    trace = Trace("hand", {}, 2, len(canvas))
    for positions in steps:
        trace.steps.append(StepRecord(0, positions, [[0] * len(p) for p in positions],
                                      [[1.0] * len(p) for p in positions], [[1.0] * len(p) for p in positions],
                                      [0.0] * len(positions)))
    return Side(canvas=torch.tensor(canvas), trace=trace)


def test_each_side_is_read_on_the_canvas_it_held_before_its_own_step():
    """Row 1 differs at position 2, which the target commits first and the candidate last (after 3 and 4): the
    candidate's distribution is the forward of its canvas with 3 and 4 filled, the target's of the initial one
    (row 0, equal on both sides, places nothing)."""
    from veridec.testing.agreement import agreement_at_divergence

    model = load_check_model("default")
    m = model.special.mask_id
    prompt = torch.tensor([[5, 6], [7, 8]])
    with torch.no_grad():
        start = model(torch.tensor([[5, 6, m, m, m], [7, 8, m, m, m]])).logits[1, 2].double().log_softmax(-1)
    a, b, c = start.topk(3).indices.tolist()
    with torch.no_grad():
        later = model(torch.tensor([[5, 6, 9, 9, 9], [7, 8, m, b, c]])).logits[1, 2].double().log_softmax(-1)
    ours = _side([[5, 6, 9, 9, 9], [7, 8, a, b, c]], [[[2], [2]], [[3], [3]], [[4], [4]]])
    theirs = _side([[5, 6, 9, 9, 9], [7, 8, b, b, c]], [[[2], [4]], [[3], [3]], [[4], [2]]])
    found = agreement_at_divergence(Agreement(top_k=3), model, prompt, None, ours, theirs)
    assert (found["row"], found["position"], found["target_token"], found["candidate_token"]) == (1, 2, a, b)
    assert found["target_token_rank_in_candidate"] == int((later > later[a]).sum())
    expected = max((start[a] - start[b]).item(), (later[b] - later[a]).item())
    assert found["gap"] == pytest.approx(expected, abs=1e-12)


def test_unplaced_cases_are_counted_apart_and_the_rate_is_gated():
    from veridec.testing.check import CheckResult, _judge_against_baseline
    from veridec.testing.exact import CaseOutcome, _agreement_metrics

    outcomes = [CaseOutcome({}, "exact", agreement={"agrees": True}),
                CaseOutcome({}, "diverged", agreement={"agrees": False, "gap": 1.0}),
                CaseOutcome({}, "diverged", agreement={"agrees": None, "why": "no commit order"})]
    metrics = _agreement_metrics(outcomes)
    assert metrics["agreement_rate"] == 0.5 and metrics["agreement_unplaced"] == 1
    assert len(metrics["agreement_failures"]) == 1
    assert _agreement_metrics([outcomes[2]])["agreement_rate"] is None
    result = CheckResult("c", "llada", "llada", "default", "A", 0, metrics={"agreement_rate": 0.5})
    _judge_against_baseline(result, {"agreement_rate": 1.0})
    assert not result.passed and result.metrics["regressed"] == {"agreement_rate": (1.0, 0.5)}


def test_a_check_fails_when_some_cases_disagree_and_others_agree(strict):
    gaps = sorted(f["gap"] for f in strict.metrics["agreement_failures"])
    assert len(gaps) >= 2 and gaps[0] < gaps[-1]
    middle = check_decoder(second_choice_first, "llada", agreement=Agreement(top_k=2, max_gap=(gaps[0] + gaps[-1]) / 2),
                           **RUN)
    assert 0 < middle.metrics["agreement_rate"] < 1 and not middle.passed


def test_the_first_divergence_is_ordered_by_step_then_row_then_position():
    """Two positions differ, both committed at step 0 by the target: row 0's (position 5) comes before row 1's
    (position 2); a position the target never committed (the prompt) comes last."""
    from testing.agreement import _first_divergence
    from veridec.trace import StepRecord, Trace

    trace = Trace("t", {}, 1, 2, steps=[StepRecord(0, [[5], [2]], [[1], [1]], [[0.9], [0.9]], [[1.0], [1.0]],
                                                   [math.inf, math.inf])])
    a = torch.tensor([[0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    b = torch.tensor([[0, 1, 1, 1, 1, 2], [0, 1, 2, 1, 1, 1]])
    assert _first_divergence(a, b, trace, 1) == (0, 5)
    c = b.clone()
    c[1, 0] = 4  # the prompt differs too
    assert _first_divergence(a, c, trace, 1) == (0, 5)
