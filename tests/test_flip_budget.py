"""Tier A's decision-flip budget (spec/exactness.md EC13): a port on its own lower-precision model passes where its
flips are near-ties at its measured error and its trajectories rejoin (or fork), and the budget does not excuse a
real bug (the inverse test); the propagation bounds hold against perturbed logits; the wake walk by hand."""

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from veridec.adapters import adapt
from veridec.harness.cli import main
from veridec.testing import check_decoder, load_candidate, load_check_model
from veridec.testing.flips import (SCORE_BOUNDS, CaseFlips, Flip, FlipContext, FlipScore, flip_metrics, logit_gap_bound,
                                   position_margin, row_flips)
from veridec.testing.own_model import CandidateModelMismatch, preflight
from veridec.trace import StepRecord, Trace

PORT = Path(__file__).parents[1] / "examples" / "fastdllm_port.py"
CASES = 30


def port(name: str):
    return load_candidate(f"{PORT}:{name}")


def run(name: str, reference_dtype, port_factory: str, cases: int = CASES):
    reference = load_check_model("tiny-llada").to(reference_dtype)
    return check_decoder(port(name), "fastdllm", model=reference, tier="A", max_examples=cases, knobs=False,
                         candidate_model=port(port_factory)(), flip_budget=True)


@pytest.mark.parametrize("reference_dtype, factory, dtype", [
    (torch.float64, "load_float32", "float32 vs float64"), (torch.float32, "load_bfloat16", "bfloat16 vs float32")])
def test_a_correct_port_passes_its_flips_near_ties(reference_dtype, factory, dtype):
    """The correct port flips decisions (rounding does move them here), every flip within the budget, every wake
    closed; eps is the port's own rounding (1e-5 in float32, 0.1-0.3 on the check model's large logits in bf16)."""
    result = run("generate", reference_dtype, factory)
    assert result.passed, result.markdown()
    entry = result.metrics["flips"]["by_dtype"][dtype]
    assert entry["cases_judged"] == CASES and entry["flips"] > 0 and entry["within_budget"] == entry["flips"]
    assert entry["failing"] == 0 and entry["k_measured"] is not None
    assert 0 < entry["max_error"] < (1e-4 if reference_dtype == torch.float64 else 0.5)
    assert "decision flips (EC13)" in result.markdown()


def test_the_port_is_exact_on_veridecs_own_model():
    """The port is a correct one: on veridec's model at its own precision it is tier E exact (infilling prompts,
    a row whose block is done taking no step, the last quota repeating), so its flips elsewhere are rounding's."""
    result = check_decoder(port("generate"), "fastdllm", model="tiny-llada", max_examples=60, knobs=False)
    assert result.passed, result.markdown()


@pytest.mark.parametrize("bug", ["threshold_raised", "weakest_first"])
@pytest.mark.parametrize("reference_dtype, factory, dtype", [
    (torch.float64, "load_float32", "float32 vs float64"), (torch.float32, "load_bfloat16", "bfloat16 vs float32")])
def test_the_budget_does_not_excuse_a_real_bug(bug, reference_dtype, factory, dtype):
    """The inverse test: the same port with its threshold read 0.15 high, or ranking the weakest first, fails in
    float32 against float64 and in bfloat16 against float32, each failing flip named with its case, step,
    position, margin, bound and eps."""
    result = run(bug, reference_dtype, factory)
    assert not result.passed
    entry = result.metrics["flips"]["by_dtype"][dtype]
    assert entry["failing"] > 0
    outside = [f for f in entry["failures"] if not f["within"]]
    assert outside and all(f["margin"] > f["bound"] and f["case"]["settings"] for f in outside)
    assert all({"step", "position", "error", "row"} <= set(f) for f in outside)
    assert "outside the budget" in result.markdown()


def test_dreams_scores_are_judged_in_bfloat16():
    """Dream's greedy algorithms (probability, its margin, negative entropy) are judged; sampled or filtered cases
    and padded ones are counted as unjudged, with why."""
    from veridec.testing.families.dream import dream_flip_score

    class Port(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = load_check_model("tiny-dream").to(torch.bfloat16)

        def forward(self, input_ids, *args, **kwargs):
            return adapt(self.inner, "dream")(input_ids, *args, **kwargs)

    generate = load_candidate(f"{PORT.parent}/dream_sampler.py:diffusion_generate")
    result = check_decoder(generate, "dream", model="tiny-dream", tier="A", max_examples=20, knobs=False,
                           candidate_model=Port(), flip_budget=True, padding=False,
                           settings={"temperature": 0.0, "top_p": None, "top_k": None, "alg_temp": None})
    entry = result.metrics["flips"]["by_dtype"]["bfloat16 vs float32"]
    assert result.passed and entry["cases_judged"] > 0 and entry["failing"] == 0
    assert dream_flip_score({"alg": "origin"}).startswith("sampled")
    assert dream_flip_score({"alg": "entropy", "temperature": 0.0}).score == "entropy"


def test_the_bounds_hold_against_perturbed_logits():
    """Each score moves by at most its bound under logits moved by max-norm eps (random and adversarial moves),
    and half the bound is exceeded by the adversarial move (a bound off by its factor 2 would be caught)."""
    generator = torch.Generator().manual_seed(0)
    scores = {"probability": lambda p: p.max(), "probability margin": lambda p: p.topk(2).values @ torch.tensor(
        [1.0, -1.0], dtype=torch.float64), "entropy": lambda p: (p * p.log()).sum()}
    worst = {name: 0.0 for name in [*scores, "logit gap"]}
    for trial in range(200):
        logits = torch.randn(50, generator=generator, dtype=torch.float64) * (1 + trial % 7)
        if trial % 2:  # two tokens far ahead and level: p near 1/2, where a probability moves the most
            logits[:2] = logits.max() + 20
        eps = 10 ** -(1 + trial % 4)
        top = logits.argmax()
        moves = [(torch.rand(50, generator=generator, dtype=torch.float64) * 2 - 1) * eps,
                 torch.full((50,), -eps, dtype=torch.float64).index_fill(0, top, eps),
                 torch.full((50,), eps, dtype=torch.float64).index_fill(0, top, -eps)]
        if trial % 2:
            moves.append(torch.zeros(50, dtype=torch.float64).index_fill(0, torch.tensor([0]), eps).index_fill(
                0, torch.tensor([1]), -eps))
        for move in moves:
            p, q = logits.softmax(-1), (logits + move).softmax(-1)
            for name, score in scores.items():
                ratio = abs(score(q) - score(p)).item() / SCORE_BOUNDS[name](eps, 50)
                worst[name] = max(worst[name], ratio)
            gap = lambda z: (z.topk(2).values[0] - z.topk(2).values[1]).item()
            worst["logit gap"] = max(worst["logit gap"], abs(gap(logits + move) - gap(logits)) / logit_gap_bound(eps))
    assert all(ratio <= 1 + 1e-9 for ratio in worst.values()), worst
    # each bound is met (to rounding) by the adversarial moves, so a bound off by a factor fails; the entropy's is
    # loose by design (H <= log V) and met to 0.156 here, so a bound in V rather than log V (far looser) fails too
    assert min(worst["probability"], worst["logit gap"], worst["probability margin"]) > 0.99, worst
    assert worst["entropy"] > 0.1, worst


def _trace(steps: list[dict]) -> Trace:
    trace = Trace("hand", {}, 0, 1)
    for commits in steps:
        trace.steps.append(StepRecord(0, [list(commits)], [list(commits.values())], [[0.5] * len(commits)],
                                      [[1.0] * len(commits)], [0.1]))
    return trace


def _judge(step, joined, a, b):
    return [Flip(0, step, min(set(a) ^ set(b) or set(a)), "position", "hand", 0.0, 1.0, 0.5, True)]


def _walk(ours: list[dict], theirs: list[dict]):
    return row_flips(_trace(ours), _trace(theirs), 0, _judge)


def test_the_wake_rejoins_forks_or_stays_open():
    """Rejoined: the port commits position 2 a step late and the canvases meet after 1 step; forked: it commits
    another token there; open: it ends first with a generated position unfilled (a failure, as a wake longer than
    the rejoin limit is)."""
    flips, forked = _walk([{1: 5, 2: 6}, {3: 7}], [{1: 5}, {2: 6, 3: 7}])
    assert [(f.wake, f.rejoin) for f in flips] == [("rejoined", 1)] and not forked
    flips, forked = _walk([{1: 5, 2: 6}, {3: 7}], [{1: 5}, {2: 9, 3: 7}])
    assert [(f.wake, f.rejoin) for f in flips] == [("forked", 1)] and forked
    flips, forked = _walk([{1: 5, 2: 6}, {3: 7}], [{1: 5}])
    assert [(f.wake, f.rejoin) for f in flips] == [("open", None)]
    assert CaseFlips("x", 0.5, True, flips=flips).failures() == flips
    flips, _ = _walk([{1: 5, 2: 6}, {3: 7}, {4: 1}], [{1: 5}, {2: 6, 3: 7}, {4: 1}])
    assert CaseFlips("x", 0.5, True, flips=flips, rejoin_within=1).failures() == []
    assert CaseFlips("x", 0.5, True, flips=flips, rejoin_within=0).failures() == flips
    flips, forked = _walk([{1: 5}, {2: 6}], [{1: 4}, {2: 6}])  # a token flip: the texts differ for good
    assert [(f.wake, f.rejoin) for f in flips] == [("forked", 0)] and forked
    # the port fills block position 2 where the reference fills prompt mask 1, so its block is done and it ends;
    # the reference goes on alone and commits 2 with another token: a fork one step on, not an open wake
    flips, forked = _walk([{3: 4}, {1: 7}, {2: 9}], [{3: 4}, {2: 4}])
    assert [(f.wake, f.rejoin) for f in flips] == [("forked", 1)] and forked
    # the same with the reference's token at 2 the port's: they end apart only at prompt mask 1 (infilling: filled
    # by rank, never by obligation), a closed wake; apart at a generated position, the wake stays open
    flips, forked = row_flips(_trace([{3: 4}, {1: 7}, {2: 4}]), _trace([{3: 4}, {2: 4}]), 0, _judge, prompt_length=2)
    assert [(f.wake, f.rejoin) for f in flips] == [("ended apart", 1)] and forked
    flips, forked = row_flips(_trace([{3: 4}, {1: 7}, {2: 4}]), _trace([{3: 4}, {2: 4}]), 0, _judge, prompt_length=1)
    assert [(f.wake, f.rejoin) for f in flips] == [("open", None)] and not forked


def test_a_side_that_commits_on_alone_ends_on_another_canvas_and_apart_only_at_prompt_masks():
    """The port stops where the reference commits one more step: an end flip, outside the budget. Both end with
    other positions filled, one a prompt mask and one generated: not "ended apart" (only prompt masks may differ),
    the wake stays open."""
    flips, forked = _walk([{1: 5}], [{1: 5}, {2: 6}])
    assert [(f.kind, f.position, f.within, f.margin) for f in flips] == [("end", 2, False, math.inf)] and not forked
    flips, forked = row_flips(_trace([{3: 4}, {1: 7}, {2: 4}]), _trace([{3: 4}, {2: 4}, {4: 8}]), 0, _judge,
                              prompt_length=2)
    assert [(f.wake, f.rejoin) for f in flips] == [("open", None)] and not forked


def test_a_position_flips_margin_by_hand():
    """EC13 with eps 0.02 on probabilities (bound eps / 2 = 0.01; twice that against a rank): the reference
    committed 0.6 and 0.5 with the strongest candidate left 0.05 under its weakest commit (0.45). A committed
    position at 0.5 is 0.05 from that candidate (not 0 from itself); a left one at 0.47 is 0.03 from the weakest
    commit; with no candidate left (gap inf) a commit has no recorded margin: infinite, outside any budget."""
    context = FlipContext(SimpleNamespace(vocab_size=50), None, None, None, 0, FlipScore("probability"), 0.02)
    record = SimpleNamespace(confidences=[[0.6, 0.5]], selection_gaps=[0.05])
    quantity, margin, bound = position_margin(context, record, 0, 0.5, ours=True)
    assert quantity == "score - strongest candidate left" and margin == pytest.approx(0.05) and bound == 0.02
    assert position_margin(context, record, 0, 0.47, ours=False)[1:] == (pytest.approx(0.03), 0.02)
    record = SimpleNamespace(confidences=[[0.6, 0.5]], selection_gaps=[math.inf])
    assert position_margin(context, record, 0, 0.5, ours=True) == ("no margin recorded", math.inf, 0.02)


def test_the_metrics_keep_the_largest_eps():
    cases = [CaseFlips("bfloat16 vs float32", error, True) for error in (0.3, 0.1)]
    assert flip_metrics(cases)["by_dtype"]["bfloat16 vs float32"]["max_error"] == 0.3


def test_unjudged_cases_are_counted_with_why():
    """A case the budget cannot judge (a draw decides) counts apart, its reason named, and fails nothing."""
    from veridec.testing.flips import flip_metrics

    cases = [CaseFlips("bfloat16 vs float32", None, False, "sampled (temperature > 0): its decisions are draws")] * 2
    entry = flip_metrics(cases + [CaseFlips("bfloat16 vs float32", 0.1, True)])["by_dtype"]["bfloat16 vs float32"]
    assert entry["cases_unjudged"] == 2 and entry["cases_judged"] == 1 and entry["failing"] == 0
    assert entry["unjudged_why"] == {"sampled (temperature > 0): its decisions are draws": 2}
    assert entry["max_error"] == 0.1 and entry["k_measured"] is None


def test_sdars_greedy_flips_are_judged_whatever_top_k_and_top_p_say():
    """BD6.1: at temperature 0 SDAR ranks by the unfiltered softmax's probability, so top-k / top-p change nothing
    it decides (a decode with top-k 1 and top-p 0.1 records the confidences of one without) and its flips are
    judged by probability against confidence_threshold; Dream's filtered law and any draw are not judged."""
    from veridec.models import random_model
    from veridec.reference.block_diffusion import block_diffusion_generate
    from veridec.testing.families.dream import dream_flip_score
    from veridec.testing.families.sdar import sdar_flip_score

    model = random_model("sdar", 3, dtype=torch.float64, num_layers=1, hidden_size=32, num_heads=4, num_kv_heads=2,
                         intermediate_size=48)
    run = dict(gen_length=8, block_length=4, denoising_steps=4, temperature=0.0, confidence_threshold=0.3)
    plain, filtered = (block_diffusion_generate(model, torch.tensor([[5, 6, 7]]), **run, **extra)
                       for extra in ({}, {"top_k": 1, "top_p": 0.1}))
    assert torch.equal(plain.canvas, filtered.canvas)
    assert [(s.positions, s.confidences, s.selection_gaps) for s in plain.trace.steps] == \
        [(s.positions, s.confidences, s.selection_gaps) for s in filtered.trace.steps]
    greedy = {"temperature": 0.0, "top_k": 1, "top_p": 0.1, "confidence_threshold": 0.3}
    assert sdar_flip_score(greedy) == FlipScore("probability", 0.3)
    assert isinstance(sdar_flip_score({**greedy, "temperature": 0.7}), str)
    assert dream_flip_score({"temperature": 0.0, "top_p": 0.1}) == "top-p / top-k filter the law its confidence is " \
        "taken from"


def test_a_lower_precision_model_is_held_to_its_own_rounding():
    """The preflight accepts a bfloat16 load of veridec's float32 weights (within the rounding of a bf16 rerun)
    and still refuses one whose logits are scaled by 1.25 (the bf16 rerun's tolerance is 4x its rounding)."""
    model = load_check_model("tiny-llada")
    own = port("load_bfloat16")()
    assert 0 < preflight(own, model, "llada") < 0.5
    scaled = load_candidate(f"{PORT.parent}/own_model.py:MyLLaDA")(load_check_model("tiny-llada").to(torch.bfloat16),
                                                                     scale=1.25)
    with pytest.raises(CandidateModelMismatch, match="beyond the measured rounding"):
        preflight(scaled, model, "llada")


def test_bad_flip_budget_arguments_are_refused():
    generate = port("generate")
    for kwargs, says in [({"tier": "E", "candidate_model": port("load_float32")()}, "tier A with a candidate_model"),
                         ({"tier": "A"}, "without candidate_model"),
                         ({"tier": "A", "flip_rejoin": -1}, "flip_rejoin must be None or an integer >= 0"),
                         ({"tier": "A", "flip_budget": "yes"}, "flip_budget must be True or False")]:
        kwargs.setdefault("flip_budget", True)
        with pytest.raises(ValueError, match=says):
            check_decoder(generate, "fastdllm", model="tiny-llada", max_examples=1, **kwargs)
    with pytest.raises(ValueError, match="flip_rejoin applies with flip_budget=True only"):
        check_decoder(generate, "fastdllm", model="tiny-llada", tier="A", max_examples=1, flip_rejoin=2)
    assert math.isfinite(SCORE_BOUNDS["entropy"](0.1, 100))


def test_the_command_line_budget(capsys):
    """--flip-budget and --flip-rejoin K: the bf16 port passes (exit 0), the raised threshold fails with its flip
    named (exit 1); the flags outside tier A on an own model are usage errors (exit 2)."""
    common = ["--against", "fastdllm", "--model", "tiny-llada", "--quiet", "--no-knobs"]
    own = ["--tier", "A", "--candidate-model", f"{PORT}:load_bfloat16", "--flip-budget"]
    assert main(["check", f"{PORT}:generate", *common, "--trials", "8", *own]) == 0
    assert "decision flips (EC13), bfloat16 vs float32: " in capsys.readouterr().out
    assert main(["check", f"{PORT}:threshold_raised", *common, "--trials", "20", *own, "--flip-rejoin", "3"]) == 1
    out = capsys.readouterr().out
    assert "outside the budget" in out and "(required within 3 step(s))" in out
    for flags, says in [(["--tier", "A", "--flip-rejoin", "2"], "--flip-rejoin applies with --flip-budget only"),
                        (["--tier", "A", "--flip-budget"], "--flip-budget judges a port on its own model"),
                        (["--flip-budget", "--candidate-model", f"{PORT}:load_bfloat16"],
                         "--flip-budget applies to --tier A only")]:
        assert main(["check", f"{PORT}:generate", *common, "--trials", "1", *flags]) == 2
        assert says in capsys.readouterr().err
    assert main(["check", "--engine", "sglang:LowConfidence", "--flip-budget", "--flip-rejoin", "1"]) == 2
    assert "--flip-rejoin, --flip-budget do not apply with --engine" in capsys.readouterr().err
