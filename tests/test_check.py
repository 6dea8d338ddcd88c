"""veridec check on code it has not seen (issue 14): the adapters against the official modelling's recorded
behaviour, ``check_decoder`` on a from-scratch Fast-dLLM decoder and seven broken variants of it, the
reproducers it prints, the command and its exit codes, and the pytest plugin."""

import copy
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

from veridec.adapters import DreamConvention, FastDLLMConvention, LLaDAConvention, adapt
from veridec.harness.cli import main
from veridec.numerics import assert_close_measured, max_abs, tolerance
from veridec.recording import RecordingModel
from veridec.reference.llada import generate as llada_generate
from veridec.testing import CandidateError, check_decoder, load_check_model, load_candidate
from veridec.testing.strategies import decode_states, exact_joints

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fastdllm_dual.py"
BROKEN = ROOT / "examples" / "fastdllm_dual_broken.py"
VARIANTS = ("stale_cache", "ties_to_highest_index", "strict_threshold", "block_positions_from_zero",
            "block_done_by_row_zero", "one_too_many", "confidence_of_noisy_logits")
GOLDEN_DIR = Path(__file__).parent / "golden"
DUAL = dict(against="fastdllm", cache="dual", model="tiny-llada")


@pytest.fixture(scope="module")
def golden_models(golden_checkpoints):
    return golden_checkpoints


# ------------------------------------------------------------------ adapters vs the official modelling
def test_example_through_the_cache_adapter_reproduces_the_official_modelling(golden_models):
    """The from-scratch dual-cache decoder, run through FastDLLMConvention on the golden checkpoints, gives the
    canvas and nfe the official generate_with_dual_cache gave with the official cached modelling (every
    ``equal`` case of the current loop it can run: one row, no factor)."""
    golden, models = golden_models
    generate = load_candidate(f"{EXAMPLE}:generate")
    compared = 0
    for case in golden["cases"]:
        settings = case["settings"]
        if case["variant"] != "current/dual" or case["expect"] != "equal" or settings.get("factor") is not None \
                or len(case["prompt"]) != 1 or settings.get("remasking") != "low_confidence":
            continue
        model = models[case["checkpoint"]]
        torch.manual_seed(case["seed"])
        kwargs = {k: settings[k] for k in ("steps", "gen_length", "block_length", "temperature", "mask_id",
                                           "threshold") if k in settings}
        canvas, nfe = generate(FastDLLMConvention(model), torch.tensor(case["prompt"]), **kwargs)
        assert canvas.tolist() == case["official"]["canvas"] and nfe == case["official"]["nfe"], case["id"]
        compared += 1
    assert compared >= 20, compared


@pytest.mark.parametrize("cache, function", [("none", "generate"), ("prefix", "generate_with_prefix_cache"),
                                             ("dual", "generate_with_dual_cache")])
def test_the_june_2025_port_through_the_adapters_reproduces_the_official_modelling(golden_models, cache, function):
    """examples/fastdllm_june2025.py through LLaDAConvention (no cache) or FastDLLMConvention (a prefix
    continuation at offset C, a dual replace_position), on the golden checkpoints, gives the canvas and nfe the
    official 24cc59e loops gave with their own cached modelling: every ``equal`` case of that loop and cache."""
    golden, models = golden_models
    port = load_candidate(f"{ROOT / 'examples' / 'fastdllm_june2025.py'}:{function}")
    compared = 0
    for case in (c for c in golden["cases"] if c["variant"] == f"legacy/{cache}" and c["expect"] == "equal"):
        model = models[case["checkpoint"]]
        adapter = LLaDAConvention(model) if cache == "none" else FastDLLMConvention(model)
        torch.manual_seed(case["seed"])
        canvas, nfe = port(adapter, torch.tensor(case["prompt"]), **case["settings"])
        assert canvas.tolist() == case["official"]["canvas"] and nfe == case["official"]["nfe"], case["id"]
        compared += 1
    assert compared >= 35, compared


def test_llada_adapter_ignores_padding_as_the_official_modelling_does(golden_models):
    """padding="ignore" reproduces the official LLaDA modelling on left-padded rows (golden
    padding_ignored_upstream cases); padding="honour" reproduces veridec's own recorded outputs."""
    golden, models = golden_models
    cases = [c for c in golden["cases"] if c["expect"] == "padding_ignored_upstream"]
    for case in cases[:12]:
        settings, model = dict(case["settings"]), models[case["checkpoint"]]
        prompt, mask = torch.tensor(case["prompt"]), torch.tensor(case["attention_mask"])
        for padding, want in (("ignore", case["official"]["canvas"]), ("honour", case["veridec"]["canvas"])):
            torch.manual_seed(case["seed"])
            got = llada_generate(LLaDAConvention(model, padding=padding), prompt, mask, ties="torch", **settings)
            assert got.canvas.tolist() == want, (case["id"], padding)
    assert len(cases) >= 12


def finite(logits: torch.Tensor) -> torch.Tensor:
    """Logits [..., V] with the banned (-inf) entries zeroed, for a distance (the check models ban the mask)."""
    return logits.masked_fill(torch.isinf(logits), 0.0)


def float64_logits(model, x: torch.Tensor, **kwargs) -> torch.Tensor:
    """The same full forward on a float64 copy: the float32 result's rounding is measured against it."""
    return copy.deepcopy(model).double()(x, **kwargs).logits


def test_cache_adapter_shapes_and_in_place_writes():
    model = load_check_model("tiny-llada")
    adapter, x = FastDLLMConvention(model), torch.randint(0, 90, (2, 9))
    full = adapter(x, use_cache=True)
    keys = full.past_key_values[0][0]
    assert keys.shape == (2, model.cfg.num_kv_heads, 9, model.cfg.head_dim)
    prefix = [(k[:, :, :4], v[:, :, :4]) for k, v in full.past_key_values]
    continued = adapter(x[:, 4:], past_key_values=prefix, use_cache=True)
    assert continued.past_key_values[0][0].shape[2] == 9  # the prefix, then x's entries (official concat)
    assert torch.equal(torch.isinf(continued.logits), torch.isinf(full.logits[:, 4:]))
    measured = tolerance(finite(full.logits[:, 4:]), finite(float64_logits(model, x)[:, 4:]))
    assert_close_measured(finite(continued.logits), finite(full.logits[:, 4:]), measured, "cached continuation")
    replace = torch.zeros(2, 9, dtype=torch.bool)
    replace[:, 4:7] = True
    before = keys.clone()
    block = x[:, 4:7].clone()
    block[:, 0] = (block[:, 0] + 1) % 90
    out = adapter(block, past_key_values=full.past_key_values, use_cache=True, replace_position=replace)
    assert out.past_key_values is not None and out.logits.shape == (2, 3, model.vocab_size)
    assert not torch.equal(keys[:, :, 4], before[:, :, 4]) and torch.equal(keys[:, :, :4], before[:, :, :4])


@pytest.mark.parametrize("call, message", [
    (lambda a, x, kv: a(x[:, :2], past_key_values=kv, replace_position=_marks([[1, 0, 1]] * 2, 9)),
     "contiguous"),
    (lambda a, x, kv: a(x[:, :2], past_key_values=kv, replace_position=_marks([[1, 1, 0], [0, 1, 1]], 9)),
     "same positions in every row"),
    (lambda a, x, kv: a(x[:, :3], past_key_values=kv, replace_position=_marks([[1, 1, 0]] * 2, 9)), "marks 2"),
    (lambda a, x, kv: a(x, past_key_values=kv, attention_mask=torch.ones_like(x)), "attention_mask"),
    (lambda a, x, kv: a(x, replace_position=torch.ones_like(x, dtype=torch.bool)), "needs past_key_values"),
])
def test_cache_adapter_refuses_what_the_official_modelling_cannot_mean(call, message):
    adapter, x = FastDLLMConvention(load_check_model("tiny-llada")), torch.randint(0, 90, (2, 9))
    with pytest.raises(ValueError, match=message):
        call(adapter, x, adapter(x, use_cache=True).past_key_values)


def _marks(rows, length):
    marks = torch.zeros(len(rows), length, dtype=torch.bool)
    marks[:, : len(rows[0])] = torch.tensor(rows, dtype=torch.bool)
    return marks


def test_dream_adapter_gives_raw_shifted_logits_and_reads_the_official_mask():
    model = load_check_model("tiny-dream")
    x = torch.randint(0, 90, (2, 7))
    mask = torch.ones_like(x)
    mask[1, :3] = 0
    aligned = model(x, attention_mask=mask).logits  # [B, L, V] token-aligned
    keys = mask.bool()
    official_mask = (keys[:, None, :, None] & keys[:, None, None, :])  # [B, 1, L, L] as diffusion_generate builds
    tok_idx = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    raw = DreamConvention(model)(x, official_mask, tok_idx).logits
    shifted = torch.cat([raw[:, :1], raw[:, :-1]], dim=1)  # what diffusion_generate does
    measured = tolerance(finite(aligned), finite(float64_logits(model, x, attention_mask=mask)))
    assert_close_measured(finite(shifted[0]), finite(aligned[0]), measured, "row 0, shifted back")
    assert_close_measured(finite(shifted[1, 4:]), finite(aligned[1, 4:]), measured, "padded row 1, shifted back")
    gapped = torch.cat([torch.arange(3), torch.arange(3, 7) + 5]).expand_as(x)  # [B, L] not a constant shift
    moved = DreamConvention(model)(x, None, gapped).logits
    assert torch.equal(moved, model.raw_forward(x, gapped, key_mask=torch.ones_like(keys)).logits)
    assert max_abs(finite(moved), finite(DreamConvention(model)(x).logits)) > 1e3 * measured  # tok_idx is read
    with pytest.raises(ValueError, match="Dream-layout"):
        adapt(load_check_model("tiny-llada"), "dream")
    with pytest.raises(ValueError, match="convention must be"):
        adapt(model, "vllm")


def test_check_models_tie_twin_tokens_exactly():
    for name in ("tiny-llada", "tiny-dream"):
        logits = load_check_model(name)(torch.randint(0, 90, (3, 11))).logits
        assert torch.equal(logits[..., 0:64:2], logits[..., 1:64:2]), name
        assert (logits[..., load_check_model(name).special.mask_id] == -torch.inf).all()


def test_a_copy_of_a_check_model_computes_on_its_own_weights():
    """EC4's mask ban survives copy.deepcopy: a float64 copy (the precision reruns of spec E3 and EC9) computes in
    float64 on its own weights, still never proposing the mask, and differs from the original by rounding."""
    import copy

    for name in ("tiny-llada", "tiny-dream"):
        model = load_check_model(name)
        x = torch.randint(0, 90, (2, 7), generator=torch.Generator().manual_seed(0))
        higher = copy.deepcopy(model).to(torch.float64)
        low, high = model(x).logits, higher(x).logits
        assert high.dtype == torch.float64 and (high[..., model.special.mask_id] == -torch.inf).all(), name
        finite = torch.isfinite(low)
        assert 0 < (low[finite].double() - high[finite]).abs().max() < 1e-4, name


# ------------------------------------------------------------------ check_decoder on the examples
def test_the_correct_example_passes():
    result = check_decoder(load_candidate(f"{EXAMPLE}:generate"), max_examples=100, **DUAL)
    assert result.passed and result.trials == 100 and result.failure is None, result.markdown()


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_broken_variant_is_caught_with_a_shrunk_reproducer(variant):
    result = check_decoder(load_candidate(f"{BROKEN}:{variant}"), max_examples=200, **DUAL)
    assert not result.passed and result.failure.problems, variant
    size = lambda case: len(case["prompt"]) * (len(case["prompt"][0]) + case["settings"]["gen_length"])
    assert size(result.failure.case) <= size(result.first_failing_case)
    assert "veridec check" in result.command and "torch.manual_seed" in result.reproducer
    print(f"{variant}: detected after {result.trials_to_detection} case(s); shrunk to {result.failure.case}")


def test_the_reproducer_snippet_reproduces_the_divergence():
    result = check_decoder(load_candidate(f"{BROKEN}:one_too_many"), max_examples=200, **DUAL)
    printed = subprocess.run([sys.executable, "-c", result.reproducer], capture_output=True, text=True, cwd=ROOT,
                             check=True).stdout.strip().splitlines()
    theirs, ours = printed[: len(printed) // 2], printed[len(printed) // 2:]
    assert theirs != ours


def test_the_command_reruns_a_printed_case_and_exits_1(capsys):
    result = check_decoder(load_candidate(f"{BROKEN}:strict_threshold"), max_examples=200, **DUAL)
    case = json.dumps(result.failure.case)
    assert main(["check", f"{BROKEN}:strict_threshold", "--against", "fastdllm", "--cache", "dual", "--model",
                 "tiny-llada", "--case", case, "--quiet"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["check", f"{EXAMPLE}:generate", "--against", "fastdllm", "--cache", "dual", "--model",
                 "tiny-llada", "--case", case, "--quiet"]) == 0


def test_the_command_passes_the_example_and_writes_reports(tmp_path):
    assert main(["check", f"{EXAMPLE}:generate", "--against", "fastdllm", "--cache", "dual", "--model",
                 "tiny-llada", "--trials", "20", "--quiet", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "check.json").read_text())
    assert data["passed"] and data["trials"] == 20 and "PASS" in (tmp_path / "check.md").read_text()


def test_the_command_writes_a_tier_a_baseline_then_holds_runs_against_it(tmp_path, capsys):
    baseline = tmp_path / "stale.json"
    argv = ["check", f"{BROKEN}:stale_cache", "--tier", "A", "--baseline", str(baseline), "--trials", "15",
            "--quiet", *sum(([f"--{k}", v] for k, v in DUAL.items()), [])]
    assert main(argv) == 0 and "baseline written" in capsys.readouterr().out
    stored = json.loads(baseline.read_text())
    assert stored["cases"] == 15 and stored["exact_rate"] < 1
    assert main(argv) == 0
    baseline.write_text(json.dumps(dict(stored, candidate_full_forwards=stored["candidate_full_forwards"] - 0.5)))
    assert main(argv) == 1 and "candidate_full_forwards" in capsys.readouterr().out


@pytest.mark.parametrize("arguments, message", [
    (["missing.py:f"], "does not exist"),
    ([f"{EXAMPLE}:nope"], "defines no function 'nope'"),
    ([f"{EXAMPLE}:DualCacheDecoder"], "takes no 'gen_length'"),
    ([f"{EXAMPLE}"], "FILE.py:FUNCTION"),
    ([f"{EXAMPLE}:generate", "--case", "{not json"], "--case must be JSON"),
    ([f"{EXAMPLE}:generate", "--case", "[1]"], "case must be a dict"),
    ([f"{EXAMPLE}:generate", "--cache", "dual", "--against", "llada"], "no llada decoder with a dual cache"),
    ([f"{EXAMPLE}:generate", "--model", "nowhere"], "model must be one of"),
])
def test_the_command_refuses_bad_arguments_with_exit_2(arguments, message, capsys):
    argv = ["check", *arguments] + ([] if "--against" in arguments else ["--against", "fastdllm"])
    assert main(argv + ["--quiet"]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error


# ------------------------------------------------------------------ what a check reports
def test_a_wrong_nfe_and_a_decoder_that_never_stops_are_reported():
    generate = load_candidate(f"{EXAMPLE}:generate")

    def miscounts(model, prompt, steps=128, gen_length=128, block_length=128, mask_id=0, threshold=None):
        canvas, nfe = generate(model, prompt, steps, gen_length, block_length, 0.0, mask_id, threshold)
        return canvas, nfe + 1

    def never_stops(model, prompt, gen_length=128, mask_id=0):
        while True:
            model(torch.full((1, prompt.shape[1] + gen_length), mask_id), use_cache=True)

    result = check_decoder(miscounts, **DUAL, max_examples=20)
    assert not result.passed and "reports nfe=" in " ".join(result.failure.problems)
    result = check_decoder(never_stops, **DUAL, max_examples=5)
    assert not result.passed and "model calls (stopped there)" in result.failure.problems[0]


def test_the_commit_order_is_held_when_only_the_candidates_trace_has_events(small_model):
    """EC1: the target's commits are final (its trace has no events); the candidate's calls, all full forwards,
    give its reconstructed trace events. The commit orders are compared all the same: the calls as made are
    exact, the same canvas and costs with one call unseen (two steps merged) diverge on the commit order."""
    from veridec.testing.exact import CaseOutcome, compare_sides
    from veridec.testing.running import Side

    model = small_model("llada", 3)
    prompt = torch.tensor([[5, 6, 7]])
    verdicts = []
    for drop_a_call in (False, True):
        proxy = RecordingModel(model)
        decoded = llada_generate(proxy, prompt, None, steps=4, gen_length=4, block_length=4)
        if drop_a_call:
            del proxy.calls[2]
        recorded = proxy.trace(decoded.canvas, prompt.shape[1])
        assert decoded.trace.events is None and recorded.events is not None  # the case the clause is about
        outcome = CaseOutcome({}, "pending", target=Side(decoded.canvas, decoded.trace, decoded.trace.counters),
                              candidate=Side(decoded.canvas.clone(), recorded, decoded.trace.counters))
        compare_sides(outcome, model, prompt, None)
        verdicts.append((outcome.verdict, outcome.problems))
    assert verdicts[0] == ("exact", [])
    assert verdicts[1][0] == "diverged" and verdicts[1][1][0].startswith("commit order differs from step 1"), verdicts


def test_tier_a_measures_and_fails_only_against_its_baseline():
    """Tier A runs every case and measures: the correct example is exact everywhere with the target's costs and
    the dual cache's own logit error; the stale cache is not, and its logit error is larger. A baseline better in
    any one measure fails the run; the run's own metrics pass."""
    correct = check_decoder(load_candidate(f"{EXAMPLE}:generate"), tier="A", max_examples=30, **DUAL).metrics
    assert correct["cases"] == 30 and correct["exact_rate"] == correct["commit_order_match"] == 1
    assert correct["mean_token_match"] == 1 and 0 < correct["max_logit_error"]
    assert all(correct[f"candidate_{n}"] == correct[f"target_{n}"] > 0 for n in ("model_calls", "full_forwards",
                                                                                 "query_positions"))
    stale = load_candidate(f"{BROKEN}:stale_cache")
    first = check_decoder(stale, tier="A", max_examples=30, **DUAL)
    assert first.passed and first.failure is None and first.metrics["cases"] == 30
    assert first.metrics["exact_rate"] < 1 and first.metrics["commit_order_match"] < 1  # reported, not failed
    assert first.metrics["max_logit_error"] > correct["max_logit_error"]
    assert first.metrics["candidate_full_forwards"] < first.metrics["target_full_forwards"]  # never refreshes
    again = check_decoder(stale, tier="A", max_examples=30, baseline=first.metrics, **DUAL)
    assert again.passed
    for name, better in (("exact_rate", 1.0), ("mean_token_match", 1.0), ("commit_order_match", 1.0),
                         ("max_logit_error", correct["max_logit_error"]),
                         ("candidate_model_calls", first.metrics["candidate_model_calls"] - 1),
                         ("candidate_query_positions", first.metrics["candidate_query_positions"] - 1)):
        judged = check_decoder(stale, tier="A", max_examples=30, baseline=dict(first.metrics, **{name: better}),
                               **DUAL)
        assert not judged.passed and set(judged.metrics["regressed"]) == {name}, name


def test_bad_arguments_of_check_decoder():
    generate = load_candidate(f"{EXAMPLE}:generate")
    for kwargs, message in (({"tier": "X"}, "tier"), ({"max_examples": 0}, "max_examples"),
                            ({"numeric_error": float("nan")}, "numeric_error"), ({"ties": "highest"}, "ties"),
                            ({"against": "vllm"}, "against must be"), ({"model": "tiny-dream"}, "LLaDA")):
        with pytest.raises(ValueError, match=message):
            check_decoder(generate, **{**DUAL, **kwargs})
    with pytest.raises(CandidateError, match="positionally"):
        check_decoder(lambda model: None, **DUAL)


def test_recording_places_a_prompt_mask_at_the_refresh_that_decided_it():
    """A dual-cache decoder's cached calls show only the block: a prompt mask committed by the block's full
    refresh is placed at that refresh, not at the next call that shows it."""
    model = load_check_model("tiny-llada")
    generate = load_candidate(f"{EXAMPLE}:generate")
    placed = []
    for seed in range(12):
        recording = RecordingModel(model)
        prompt = torch.randint(0, 90, (1, 3), generator=torch.Generator().manual_seed(seed))
        prompt[0, 1] = model.special.mask_id
        canvas, _ = generate(FastDLLMConvention(recording), prompt, steps=4, gen_length=4, block_length=2,
                             mask_id=model.special.mask_id)
        steps = [i for i, step in enumerate(recording.trace(canvas, 3).steps) if 1 in step.positions[0]]
        if steps:
            placed.append(recording.calls[steps[0]].kind)
    assert len(placed) >= 6 and set(placed) == {"full"}, placed


# ------------------------------------------------------------------ the pytest plugin
def test_the_plugin_checks_a_decoder_in_five_lines(veridec_check, tiny_llada, adapt):
    """What a user writes (docs/checking.md, the pytest plugin); the fixtures come from the pytest11 entry point."""
    generate = load_candidate(f"{EXAMPLE}:generate")
    veridec_check(generate, against="fastdllm", cache="dual", model=tiny_llada, max_examples=20)
    assert adapt(tiny_llada, "fastdllm").config.mask_token_id == tiny_llada.special.mask_id
    with pytest.raises(AssertionError, match="veridec check: FAIL"):
        veridec_check(load_candidate(f"{BROKEN}:one_too_many"), against="fastdllm", cache="dual", model=tiny_llada)


def test_a_callable_reference_in_a_convention():
    """``against`` may be the user's own decoder: run through the same adapter and recording as the candidate."""
    good, bad = load_candidate(f"{EXAMPLE}:generate"), load_candidate(f"{BROKEN}:one_too_many")
    assert check_decoder(good, good, convention="fastdllm", model="tiny-llada", max_examples=20).passed
    result = check_decoder(bad, good, convention="fastdllm", model="tiny-llada", max_examples=50)
    assert not result.passed and "define it here" in result.reproducer
    with pytest.raises(ValueError, match="needs its calling convention"):
        check_decoder(bad, good, model="tiny-llada")


def dream_origin(model, input_ids, max_new_tokens=4, steps=4, eps=1e-3, mask_token_id=None,
                 generation_tokens_hook_func=lambda step, x, logits: x,
                 generation_logits_hook_func=lambda step, x, logits: logits, hooks_before_commits=False):
    """Dream's "origin" sampler at temperature 0, written from the paper's loop in Dream's convention (one row
    length, no padding): each mask is revealed with probability 1 - s/t (all at the last step) as its argmax."""
    x = torch.cat([input_ids, torch.full((input_ids.shape[0], max_new_tokens), mask_token_id)], dim=1)
    timesteps = torch.linspace(1, eps, steps + 1)
    x = generation_tokens_hook_func(None, x, None)
    for i in range(steps):
        masked = x == mask_token_id
        logits = model(x, "full", None).logits
        logits = generation_logits_hook_func(i, x, torch.cat([logits[:, :1], logits[:, :-1]], dim=1))
        if hooks_before_commits:
            x = generation_tokens_hook_func(i, x, logits)
        revealed = torch.rand(int(masked.sum())) < (1 - timesteps[i + 1] / timesteps[i] if i < steps - 1 else 1)
        proposal = torch.full_like(x[masked], mask_token_id)
        proposal[revealed] = logits[masked][revealed].argmax(-1)
        x[masked] = proposal
        if not hooks_before_commits:
            x = generation_tokens_hook_func(i, x, logits)
    return x


DREAM = dict(against="dream", model="tiny-dream", settings={"temperature": 0.0, "alg": "origin"})


def test_dreams_hooks_are_drawn_and_called_where_diffusion_generate_calls_them():
    """A Dream-convention decoder that takes Dream's two hooks gets drawn hooks (a token written at a step, a
    logit bias from a step) on both sides: the one that calls them where diffusion_generate does passes, the one
    that calls the tokens hook before a step's commits is caught, with the hook calls in the report."""
    result = check_decoder(dream_origin, max_examples=60, **DREAM)
    assert result.passed and result.trials == 60, result.markdown()
    early = lambda model, input_ids, **kw: dream_origin(model, input_ids, hooks_before_commits=True, **kw)
    early.__signature__ = inspect.signature(dream_origin).replace(parameters=[
        p for p in inspect.signature(dream_origin).parameters.values() if p.name != "hooks_before_commits"])
    result = check_decoder(early, max_examples=60, **DREAM)
    assert not result.passed and "generation_tokens_hook_func" in result.failure.case["settings"]
    assert "DreamHook(" in result.reproducer
    problems = " ".join(result.failure.problems)
    assert "tokens differ" in problems or "commit order" in problems, problems


def test_a_hook_called_at_other_steps_is_reported():
    def skips_the_first_call(model, input_ids, generation_tokens_hook_func=lambda step, x, logits: x, **kw):
        return dream_origin(model, input_ids, generation_tokens_hook_func=lambda step, x, logits: x if step is None
                            else generation_tokens_hook_func(step, x, logits), **kw)

    skips_the_first_call.__signature__ = inspect.signature(dream_origin)
    result = check_decoder(skips_the_first_call, max_examples=60, **DREAM)
    assert not result.passed
    assert any("hooks were called differently: target tokens@None" in p for p in result.failure.problems)


def test_a_hook_called_as_often_but_at_other_steps_is_reported():
    """The same number of calls, each a step late: the logs differ where their lengths do not (spec EC5)."""
    def one_step_late(model, input_ids, generation_tokens_hook_func=lambda step, x, logits: x, **kw):
        return dream_origin(model, input_ids, generation_tokens_hook_func=lambda step, x, logits:
                            generation_tokens_hook_func(None if step is None else step + 1, x, logits), **kw)

    one_step_late.__signature__ = inspect.signature(dream_origin)
    result = check_decoder(one_step_late, max_examples=60, **DREAM)
    assert not result.passed
    assert any("hooks were called differently" in p for p in result.failure.problems), result.failure.problems


@settings(max_examples=25)
@given(state=decode_states(), joint=exact_joints())
def test_the_exported_joint_and_decode_state_strategies_draw_what_they_say(state, joint):
    """veridec.testing.strategies' joints and decode states, as a user's property test meets them: a decode
    state's visible tokens have positive mass under its oracle (it is a masked sample), and an exact joint is a
    probability distribution in Fractions."""
    oracle, canvas = state
    masked = canvas == oracle.special.mask_id  # [1, L]
    assert masked.any()
    completion = oracle.outcomes  # [V^L, L] every sequence
    consistent = (completion == canvas).logical_or(masked).all(dim=1)  # [V^L]
    assert oracle.log_prob(completion[consistent]).exp().sum() > 0
    assert sum(joint.flat) == 1 and min(joint.flat) >= 0


def test_a_threshold_drawn_at_a_confidence_is_that_confidence():
    """EC2: {"at_confidence": r} becomes row 0's r-th (0-based) largest float64 max-probability over the masks
    before the first block's end, recomputed here position by position."""
    from veridec.testing.running import resolve_case

    model = load_check_model("tiny-llada")
    prompt = torch.tensor([[5, model.special.mask_id, 7], [9, 10, 11]])
    canvas = torch.cat([prompt, torch.full((2, 6), model.special.mask_id)], dim=1)
    logits = model(canvas).logits[0].double()  # [L, V]
    masks = [i for i in range(3 + 3) if canvas[0, i] == model.special.mask_id]  # block 1 ends at 3 + 3
    ranked = sorted((max(torch.softmax(logits[i], dim=-1).tolist()) for i in masks), reverse=True)
    for r in (1, 2, 3, 9):
        case = {"prompt": prompt.tolist(), "attention_mask": None, "seed": 0,
                "settings": {"gen_length": 6, "block_length": 3, "threshold": {"at_confidence": r}}}
        got = resolve_case(case, model, prompt, None)["settings"]["threshold"]
        assert got == pytest.approx(ranked[min(r, len(ranked) - 1)], rel=0, abs=1e-15), r
