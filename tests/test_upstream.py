"""Upstream defects as outcomes (spec/exactness.md EC6, spec/fastdllm.md FD9, spec/sequential.md SQ1.9, SQ2.8): the
predictions at their boundaries, by hand, and ``veridec check`` on a from-scratch port of the June 2025 Fast-dLLM
loops, which fails exactly where the official code does (examples/fastdllm_june2025.py). The predictions are
also held against every official outcome of the golden data (tests/test_golden_check.py)."""

import json
from pathlib import Path

import pytest
import torch

from veridec.models import random_model
from veridec.models.interface import SpecialTokens
from veridec.testing import check_decoder, load_candidate, load_check_model
from veridec.testing.targets import TARGETS
from veridec.trace import StepRecord

JUNE = Path(__file__).resolve().parents[1] / "examples" / "fastdllm_june2025.py"


@pytest.fixture(scope="module")
def model():
    return load_check_model("tiny-llada")


def steps(*blocks_and_commits):
    """StepRecords from (block, [[row 0's (position, token)], [row 1's ...]]) pairs."""
    return [StepRecord(block, [[p for p, _ in row] for row in rows], [[t for _, t in row] for row in rows],
                       [[1.0] * len(row) for row in rows], [[1.0] * len(row) for row in rows], [0.0] * len(rows))
            for block, rows in blocks_and_commits]


def case(prompt, **settings):
    base = {"gen_length": 2, "block_length": 2, "steps": 2, "temperature": 0.0, "remasking": "low_confidence",
            "threshold": None, "factor": None}
    return {"prompt": prompt, "attention_mask": None, "seed": 0, "settings": {**base, **settings}}


def defect_of(loop, one_case, trace, stalled, model, prompt, mask):
    """The prediction of the official ``loop``'s target ("llada", "dream", "fastdllm/LOOP/CACHE" with LOOP current or
    the June 2025 file's "legacy")."""
    against, cache = {"llada": ("llada", "none"), "dream": ("dream", "none")}.get(loop, (None, None))
    if against is None:
        _, version, cache = loop.split("/")
        against = "fastdllm" if version == "current" else "fastdllm-2025-06"
    return TARGETS[(against, cache)].official.defects(one_case, trace, stalled, model, prompt, mask)


def predict(model, family, one_case, trace, stalled=False):
    prompt = torch.tensor(one_case["prompt"])
    return defect_of(family, one_case, trace, stalled, model, prompt, None)


@pytest.mark.parametrize("family", ["fastdllm/current/none", "fastdllm/current/dual", "fastdllm/legacy/prefix"])
def test_the_quota_schedule_is_exhausted_on_its_first_step_past_the_end(model, family):
    one = case([[0]], gen_length=4, block_length=2, steps=4)  # S = 2 per block
    in_time = steps((0, [[(1, 5)]]), (0, [[(2, 5)]]), (1, [[(3, 5)]]), (1, [[(4, 5)]]))
    assert predict(model, family, one, in_time) is None
    late = steps((0, [[(1, 5)]]), (0, [[]]), (0, [[(2, 5)]]), (1, [[(3, 5), (4, 5)]]))
    found = predict(model, family, one, late)
    assert (found.clause, found.kind, found.at_step) == ("FD9.1", "raises", 2)
    assert predict(model, family, case([[0]], gen_length=4, block_length=2, steps=4, threshold=0.5), late) is None


def test_a_dual_cache_at_two_rows_fails_at_its_first_cached_call(model):
    one = case([[0], [1]], gen_length=4, block_length=2, steps=4, threshold=0.9)
    refresh_only = steps((0, [[(1, 5), (2, 5)], [(1, 5), (2, 5)]]), (1, [[(3, 5), (4, 5)], [(3, 5), (4, 5)]]))
    assert predict(model, "fastdllm/current/dual", one, refresh_only) is None
    cached = steps((0, [[(1, 5), (2, 5)], [(1, 5), (2, 5)]]), (1, [[(3, 5)], [(3, 5)]]), (1, [[(4, 5)], [(4, 5)]]))
    assert predict(model, "fastdllm/current/dual", one, cached).at_step == 2
    assert predict(model, "fastdllm/current/prefix", one, cached) is None
    single = case([[0]], gen_length=4, block_length=2, steps=4, threshold=0.9)
    assert predict(model, "fastdllm/current/dual", single, steps((0, [[(1, 5)]]), (0, [[(2, 5)]]))) is None


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_the_june_2025_file_fails_at_two_rows_before_any_forward(model, cache):
    found = predict(model, f"fastdllm/legacy/{cache}", case([[0], [1]]), steps((0, [[(1, 5), (2, 5)]] * 2)))
    assert (found.clause, found.at_step) == ("FD9.5", 0)
    assert predict(model, f"fastdllm/current/{cache}", case([[0], [1]]), steps((0, [[(1, 5), (2, 5)]] * 2))) is None


def test_factor_mode_fails_when_a_row_has_no_candidate_left(model):
    one = case([[0], [1]], gen_length=2, block_length=2, steps=2, factor=1.0)
    ragged = steps((0, [[(1, 5), (2, 5)], [(1, 5)]]), (0, [[], [(2, 5)]]))  # row 0 is done after step 0
    assert predict(model, "fastdllm/current/none", one, ragged).clause == "FD9.3"
    assert predict(model, "fastdllm/current/none", one, ragged).at_step == 1
    together = steps((0, [[(1, 5)], [(1, 5)]]), (0, [[(2, 5)], [(2, 5)]]))
    assert predict(model, "fastdllm/current/none", one, together) is None
    with_leftover = case([[0, model.special.mask_id], [1, 2]], gen_length=2, block_length=2, steps=2, factor=1.0)
    ragged = steps((0, [[(2, 5), (3, 5)], [(2, 5)]]), (0, [[(1, 5)], [(3, 5)]]))  # row 0 keeps its prompt mask
    assert predict(model, "fastdllm/current/none", with_leftover, ragged).clause == "FD9.6"  # a candidate before
    assert predict(model, "fastdllm/current/prefix", with_leftover, ragged).clause == "FD9.3"  # none inside it


def test_a_deterministic_stall_never_ends_upstream_and_a_sampled_one_is_refused(model):
    one = case([[0]], threshold=0.9)
    stalled = steps((0, [[(1, 5)]]), (0, [[]]), (0, [[]]), (0, [[]]))
    found = predict(model, "fastdllm/current/none", one, stalled, stalled=True)
    assert (found.clause, found.kind, found.at_step) == ("FD9.2", "endless", 1)
    assert predict(model, "fastdllm/current/none", case([[0]], threshold=0.9, temperature=0.7), stalled, True) is None
    assert predict(model, "fastdllm/current/none", case([[0]], threshold=0.9, remasking="random"), stalled,
                   True) is None
    assert predict(model, "fastdllm/current/none", case([[0]]), stalled, True).clause == "FD9.1"  # quota: raises


def test_llada_fails_with_guidance_and_no_attention_mask(model):
    one = case([[0]], cfg_scale=1.5)
    assert predict(model, "llada", one, []).clause == "SQ1.9"
    assert predict(model, "llada", case([[0]], cfg_scale=0.0), []) is None


def test_llada_guidance_over_a_banned_token_is_nan_upstream(model):
    """The check models ban the mask token (-inf): with a mask, cfg > 0 gives NaN there upstream (SQ1.11); a
    model that bans nothing does not."""
    masked = {**case([[0]], cfg_scale=1.5), "attention_mask": [[1]]}
    found = predict(model, "llada", masked, [])
    assert (found.clause, found.kind) == ("SQ1.11", "deviates")
    finite = random_model("llada", 0)
    assert defect_of("llada", masked, [], False, finite, torch.tensor([[0]]), torch.tensor([[1]])) is None


def test_llada_hard_codes_llada_8b_eos_ids(model):
    """SQ1.10: the flags index 126081 / 126348; past the vocabulary that raises, with other ids it bans others."""
    for flags in ({"logits_eos_inf": True}, {"confidence_eos_eot_inf": True}):
        found = predict(model, "llada", case([[0]], **flags), [])
        assert (found.clause, found.kind) == ("SQ1.10", "raises")
    assert predict(model, "llada", case([[0]], logits_eos_inf=False, confidence_eos_eot_inf=False), []) is None
    big = random_model("llada", 0, vocab_size=126464, hidden_size=8, num_layers=1, num_heads=2, num_kv_heads=1,
                       intermediate_size=8)
    prompt = torch.tensor([[0]])
    other_ids = case([[0]], logits_eos_inf=True)
    assert defect_of("llada", other_ids, [], False, big, prompt, None).kind == "deviates"
    big.special = SpecialTokens(mask_id=126336, eos_id=126081, eot_id=126348, pad_id=126081)
    assert defect_of("llada", other_ids, [], False, big, prompt, None) is None  # LLaDA-8B's own ids


def test_a_finished_row_with_prompt_masks_keeps_decoding_upstream_without_a_cache(model):
    """FD9.6: row 0 completes the block at step 0 but keeps its prompt mask; row 1 still decodes."""
    m = model.special.mask_id
    one = case([[0, m], [1, 2]], gen_length=2, block_length=2, steps=2, threshold=0.9)
    ragged = steps((0, [[(2, 5), (3, 5)], [(2, 5)]]), (0, [[], [(3, 5)]]))
    found = predict(model, "fastdllm/current/none", one, ragged)
    assert (found.clause, found.kind, found.at_step) == ("FD9.6", "deviates", 1)
    assert predict(model, "fastdllm/current/prefix", one, ragged) is None  # the cached loops read the block only
    filled = steps((0, [[(1, 5), (2, 5), (3, 5)], [(2, 5)]]), (0, [[], [(3, 5)]]))
    assert predict(model, "fastdllm/current/none", one, filled) is None  # nothing left before the block


def test_dream_deviates_where_a_row_has_fewer_masks_than_the_count():
    dream = load_check_model("tiny-dream")
    m = dream.special.mask_id
    settings = {"max_new_tokens": 1, "steps": 1, "alg": "maskgit_plus", "temperature": 0.0}
    ragged = {"prompt": [[3, m, m, 4], [3, 5, 6, 4]], "attention_mask": None, "seed": 0, "settings": settings}
    one_step = steps((0, [[(1, 7), (2, 7), (4, 7)], [(4, 7)]]))  # the last step: k = int(mean masks) = 2
    found = defect_of("dream", ragged, one_step, False, dream, torch.tensor(ragged["prompt"]), None)
    assert (found.clause, found.kind, found.at_step) == ("SQ2.8", "deviates", 0)
    even = {**ragged, "prompt": [[3, m, 5, 4], [3, 5, m, 4]]}  # 2 masks each: k = 2, nobody short
    assert defect_of("dream", even, one_step, False, dream, torch.tensor(even["prompt"]), None) is None
    origin = {**ragged, "settings": {**settings, "alg": "origin"}}
    assert defect_of("dream", origin, one_step, False, dream, torch.tensor(ragged["prompt"]), None) is None


@pytest.mark.parametrize("function, cache, convention", [("generate_with_dual_cache", "dual", "fastdllm"),
                                                          ("generate", "none", "llada")])
def test_a_faithful_port_of_the_june_2025_file_passes_and_fails_only_when_asked(function, cache, convention):
    """The issue's two cases: the dual cache with one step per block (the extra cached call indexes the
    exhausted schedule), and no cache on an infill prompt (the prompt's mask takes the block's quota)."""
    candidate = load_candidate(f"{JUNE}:{function}")
    options = dict(against="fastdllm-2025-06", cache=cache, convention=convention, model="tiny-llada", max_batch=1,
                   padding=False, max_examples=40, knobs=False)
    passed = check_decoder(candidate, **options)
    assert passed.passed and passed.official_defects.get("FD9.1", 0) > 0, passed.markdown()
    assert "reproduce official defects (FD9.1 x" in passed.markdown()
    failed = check_decoder(candidate, **options, official_defects="fail")
    assert not failed.passed and "official defect FD9.1" in failed.failure.problems[0]
    mask_id = load_check_model("tiny-llada").special.mask_id
    wanted = [[0]] if cache == "dual" else [[0, mask_id]]
    assert failed.failure.case["prompt"] == wanted
    assert {k: failed.failure.case["settings"][k] for k in ("gen_length", "block_length", "steps")} == \
        {"gen_length": 1, "block_length": 1, "steps": 1}
    assert "--official-defects fail" in failed.command


def test_a_candidate_that_always_raises_still_fails():
    """Failing is a match only where the official code fails: elsewhere it is the candidate's failure."""
    def broken(model, prompt, steps=4, gen_length=4, block_length=4, mask_id=0, threshold=None):
        raise IndexError("index 1 is out of bounds")

    result = check_decoder(broken, "fastdllm-2025-06", cache="dual", convention="fastdllm", model="tiny-llada",
                           max_batch=1, padding=False, max_examples=20)
    assert not result.passed and "the candidate failed: it raised IndexError" in result.failure.problems[0]


def current_loop_without_cache(model, prompt, steps=4, gen_length=4, block_length=4,
                               mask_id=0, threshold=None):
    """NVlabs/Fast-dLLM f6b35ec's ``generate`` (no cache, batched) written from scratch: a step's candidates are
    every mask before the block's end of every row, finished rows included (what FD9.6 documents)."""
    x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
    per_block, nfe = steps // (gen_length // block_length), 0
    for start in range(prompt.shape[1], x.shape[1], block_length):
        end = start + block_length
        block_masks = (x[:, start:end] == mask_id).sum(dim=1)
        quota = [[int(m) // per_block + (i < int(m) % per_block) for i in range(per_block)] for m in block_masks]
        i = 0
        while True:
            nfe += 1
            logits = model(x).logits
            proposal = logits.argmax(-1)
            score = torch.softmax(logits.double(), -1).gather(-1, proposal[..., None]).squeeze(-1)
            candidates = x == mask_id
            candidates[:, end:] = False
            for row in range(x.shape[0]):
                ranked = torch.topk(score[row].masked_fill(~candidates[row], -torch.inf), int(candidates[row].sum()))
                count = len(ranked.indices) if threshold is not None else quota[row][i]
                for rank, position in enumerate(ranked.indices[:count].tolist()):
                    if threshold is None or rank == 0 or score[row, position] >= threshold:
                        x[row, position] = proposal[row, position]
            i += 1
            if not (x[:, start:end] == mask_id).any():
                break
    return x, nfe


def test_a_candidate_deviating_at_the_deviations_own_step_reproduces_it():
    """FD9.6 on the tiny check model: the from-scratch current loop fills a finished row's prompt mask while
    another row decodes; its commit order leaves ours at exactly the predicted step, and that is a match."""
    options = dict(model="tiny-llada", padding=False, max_examples=200, knobs=False)
    result = check_decoder(current_loop_without_cache, "fastdllm", **options)
    assert result.passed and result.official_defects.get("FD9.6", 0) > 0, result.markdown()
    failed = check_decoder(current_loop_without_cache, "fastdllm", **options, official_defects="fail")
    assert not failed.passed and "better than the official code was asked for" in failed.failure.problems[-1]


def test_a_deviation_from_the_predicted_step_itself_reproduces_it(model):
    """The rule's boundary (EC6): the candidate agrees before the deviation's step and differs at it."""
    from veridec.testing.exact import CaseOutcome, _judge_at_defect
    from veridec.testing.running import CheckSetup, Side
    from veridec.testing.targets import target
    from veridec.testing.families.dream import ROW_CLAMP
    from veridec.testing.official import defect
    from veridec.trace import Counters, Trace

    def side(tokens):
        trace = Trace("t", {}, 2, 1, steps(*[(0, [[(p, t)]]) for p, t in tokens]), Counters(2, 8, 0, 0, 2))
        return Side(torch.tensor([[1, 2] + [t for _, t in tokens]]), trace, trace.counters)

    one = case([[1, 2]], gen_length=2, block_length=2, steps=2)
    for at_step, verdict in ((1, "official"), (2, "diverged")):
        outcome = CaseOutcome(one, "exact", target=side([(2, 5), (3, 5)]), candidate=side([(2, 5), (3, 6)]),
                              defect=defect(ROW_CLAMP, at_step))
        setup = CheckSetup(None, None, target("fastdllm"), model, "llada")
        _judge_at_defect(outcome, model, torch.tensor(one["prompt"]), None, setup)
        assert outcome.divergence.step == 1 and outcome.verdict == verdict, (at_step, outcome.problems)


def test_the_reproducer_command_parses_with_its_official_defects_flag():
    """The printed CLI line is a valid command: --official-defects sits before --case and its JSON."""
    import shlex

    from veridec.harness.cli import build_parser

    candidate = load_candidate(f"{JUNE}:generate_with_dual_cache")
    failed = check_decoder(candidate, "fastdllm-2025-06", cache="dual", convention="fastdllm", model="tiny-llada",
                           max_batch=1, padding=False, max_examples=20, knobs=False, official_defects="fail")
    args = build_parser().parse_args(shlex.split(failed.command)[1:])
    assert args.official_defects == "fail" and json.loads(args.case) == failed.failure.case


def test_the_former_names_still_work_and_say_so():
    """``upstream_defects=`` / ``--upstream-defects``, the names before ``official_defects``: the same mode, with a
    DeprecationWarning in Python."""
    from veridec.harness.cli import build_parser

    candidate = load_candidate(f"{JUNE}:generate_with_dual_cache")
    options = dict(cache="dual", convention="fastdllm", model="tiny-llada", max_batch=1, padding=False,
                   max_examples=20, knobs=False)
    with pytest.warns(DeprecationWarning, match="official_defects"):
        old = check_decoder(candidate, "fastdllm-2025-06", **options, upstream_defects="fail")
    new = check_decoder(candidate, "fastdllm-2025-06", **options, official_defects="fail")
    assert old.official_mode == new.official_mode == "fail" and old.passed == new.passed
    args = build_parser().parse_args(["check", "x.py:f", "--against", "llada", "--upstream-defects", "skip"])
    assert args.official_defects == "skip"
