"""The checker held to independent truths (issue: the checker verified like the decoders): tier S's statistics
against tables computed by hand (no continuity correction, pooled cells, degrees of freedom, Bonferroni over the
views), tier S's two seed streams seen disjoint, tier A's costs against hand-counted calls, ``--fresh`` under
two ranks."""

import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from scipy import stats

from veridec.harness.records import Records
from veridec.numerics import max_abs
from veridec.harness.units import open_records
from veridec.testing import check_decoder
from veridec.testing.stochastic import MAX_CELLS, compare_laws, homogeneity, pearson_fit

from oracles.bridge import greedy_candidate  # tests/ is on sys.path under pytest's default import mode

TOL = 1e-12  # float64 sums of a handful of terms of size <= 10


def test_homogeneity_of_a_2x3_table_by_hand():
    """Expected counts row total x column total / N: 15, 20, 25 in both rows; chi2 = 2 (25/15) + 2 (25/25)."""
    statistic, df, p = homogeneity(Counter({0: 10, 1: 20, 2: 30}), Counter({0: 20, 1: 20, 2: 20}))
    assert abs(statistic - (50 / 15 + 2)) < TOL and df == 2
    assert abs(p - math.exp(-statistic / 2)) < TOL  # chi2 with 2 df: sf(x) = exp(-x/2)


def test_a_2x2_table_has_no_continuity_correction():
    """Expected 15 and 25 in both rows: chi2 = 2 (25/15 + 25/25) = 16/3; Yates' correction would give 4.32."""
    statistic, df, p = homogeneity(Counter({0: 10, 1: 30}), Counter({0: 20, 1: 20}))
    assert abs(statistic - 16 / 3) < TOL and df == 1
    assert abs(p - math.erfc(math.sqrt(statistic / 2))) < TOL  # chi2 with 1 df
    yates = sum((abs(o - e) - 0.5) ** 2 / e for o, e in ((10, 15), (30, 25), (20, 15), (20, 25)))
    assert abs(statistic - yates) > 0.5


def test_rare_values_pool_into_one_cell_and_the_degrees_of_freedom_follow():
    """Values seen fewer than 5 times in both samples together share a cell: [[10, 3], [10, 2]], df 1."""
    statistic, df, _ = homogeneity(Counter({0: 10, 1: 2, 2: 1}), Counter({0: 10, 1: 1, 2: 1}))
    expected = [(10, 13 * 20 / 25), (3, 13 * 5 / 25), (10, 12 * 20 / 25), (2, 12 * 5 / 25)]
    assert abs(statistic - sum((o - e) ** 2 / e for o, e in expected)) < TOL and df == 1
    many = Counter({value: 10 for value in range(30)})
    _, df, _ = homogeneity(many, many)
    assert df == MAX_CELLS - 1  # 19 own cells and the pooled rest: 20 cells, 2 rows


def test_pearsons_fit_by_hand():
    """law (.5, .3, .2), 100 draws (40, 35, 25): chi2 = 100/50 + 25/30 + 25/20 on 2 df."""
    statistic, df, p = pearson_fit(Counter({"a": 40, "b": 35, "c": 25}), {"a": 0.5, "b": 0.3, "c": 0.2})
    assert abs(statistic - (2 + 25 / 30 + 1.25)) < TOL and df == 2 and abs(p - math.exp(-statistic / 2)) < TOL
    assert abs(p - stats.chisquare([40, 35, 25], [50, 30, 20]).pvalue) < TOL


def test_the_fit_pools_the_laws_rare_cells_until_the_rest_expects_five():
    """law (.6, .32, .05, .03), 50 draws: expected 30, 16, 2.5, 1.5; the rest (4) is under 5, so b joins it:
    cells a and the rest, expected 30 and 20, observed 28 and 22: chi2 = 4/30 + 4/20 on 1 df."""
    law = {"a": 0.6, "b": 0.32, "c": 0.05, "d": 0.03}
    statistic, df, _ = pearson_fit(Counter({"a": 28, "b": 17, "c": 3, "d": 2}), law)
    assert abs(statistic - (4 / 30 + 4 / 20)) < 1e-9 and df == 1
    statistic, df, _ = pearson_fit(Counter({"a": 44, "b": 4, "c": 2}), {"a": 0.9, "b": 0.07, "c": 0.03})
    assert abs(statistic - (1 / 45 + 1 / 5)) < 1e-9 and df == 1  # the rest expects exactly 5: kept as it is


def test_bonferroni_runs_over_every_view_of_the_output():
    """Outputs of 3 tokens: the whole, 3 positions, 2 adjacent pairs = 6 tests; corrected p = 6 x the smallest."""
    a = [(0, 1, 2)] * 30 + [(1, 1, 2)] * 30
    b = [(0, 1, 2)] * 40 + [(1, 1, 2)] * 20
    comparison = compare_laws(a, b, alpha=0.01)
    assert [name for name, *_ in comparison.tests] == ["output", "position 0", "position 1", "position 2",
                                                       "pair 0,1", "pair 1,2"]
    smallest = min(p for *_, p in comparison.tests)
    assert abs(comparison.corrected_p - min(1.0, 6 * smallest)) < TOL
    assert comparison.differs == (comparison.corrected_p < 0.01)


def seed_logging_sampler(log: list):
    """A LLaDA-convention sampler that writes uniform random tokens and logs the seed torch was given."""

    def sample(model, prompt, gen_length=2, mask_id=0):
        log.append(torch.initial_seed())
        tokens = torch.randint(0, 8, (prompt.shape[0], gen_length))
        return torch.cat([prompt, tokens], dim=1)

    return sample


def test_tier_s_seeds_each_side_with_its_own_stream():
    """Draw i: the target under case seed + 2i, the candidate under case seed + 2i + 1 (spec ST2)."""
    ours, theirs = [], []
    one = {"prompt": [[3, 4]], "attention_mask": None, "seed": 100, "settings": {"gen_length": 2}}
    result = check_decoder(seed_logging_sampler(theirs), seed_logging_sampler(ours), convention="llada",
                           model="tiny-llada", tier="S", case=one, samples=6)
    assert ours == [100 + 2 * i for i in range(6)] and theirs == [100 + 2 * i + 1 for i in range(6)]
    assert result.passed  # the same law from disjoint streams


def counting_candidate(extra_full: int):
    """A LLaDA-convention decoder making (gen_length + extra_full) full calls, one token per step, greedy."""

    def generate(model, prompt, gen_length=2, steps=2, block_length=2, mask_id=0):
        x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
        for _ in range(extra_full):
            model(x)
        for _ in range(gen_length):
            confidence, token = model(x).logits.softmax(-1).max(-1)
            position = confidence.masked_fill(x != mask_id, -1.0).argmax(1)
            x[torch.arange(x.shape[0]), position] = token[torch.arange(x.shape[0]), position]
        return x

    return generate


def test_tier_a_counts_each_sides_calls_as_counted_by_hand():
    """gen 2, one block of 2 steps: the target makes 2 full forwards over B x L = 2 x 6 positions; the candidate
    makes 3 extra: 5 calls, 5 full forwards, 5 x 12 query positions."""
    one = {"prompt": [[3, 4, 5, 6], [7, 8, 9, 10]], "attention_mask": None, "seed": 0,
           "settings": {"gen_length": 2, "block_length": 2, "steps": 2, "temperature": 0.0}}
    result = check_decoder(counting_candidate(3), "llada", model="tiny-llada", tier="A", case=one, knobs=False)
    metrics = result.metrics
    assert (metrics["target_model_calls"], metrics["target_full_forwards"], metrics["target_query_positions"]) == \
        (2, 2, 24)
    assert (metrics["candidate_model_calls"], metrics["candidate_full_forwards"],
            metrics["candidate_query_positions"]) == (5, 5, 60)
    worse = check_decoder(counting_candidate(3), "llada", model="tiny-llada", tier="A", case=one, knobs=False,
                          baseline={**metrics, "candidate_model_calls": 4})
    assert not worse.passed and "candidate_model_calls" in worse.metrics["regressed"]


class FakeRank:
    """A member of a group of two: ``barrier`` records that it was reached."""

    def __init__(self, rank: int):
        self.rank, self.world, self.waited = rank, 2, 0

    def barrier(self) -> None:
        self.waited += 1


@pytest.mark.parametrize("rank", [0, 1])
def test_fresh_under_two_ranks_removes_every_ranks_records_once(tmp_path, rank):
    """Rank 0 removes the main file and every rank's file; rank 1 removes nothing; both wait at the barrier."""
    settings = {"run": "t"}
    Records(tmp_path / "t.records.jsonl", settings).add("a", {"v": 1})
    Records(tmp_path / "t.records.jsonl", settings, rank=1).add("b", {"v": 2})
    other = tmp_path / "u.records.jsonl"
    Records(other, settings).add("c", {"v": 3})  # another run's records in the same folder stay
    group = FakeRank(rank)
    records = open_records(tmp_path, "t", settings, fresh=True, group=group)
    assert group.waited == 1 and other.exists()
    if rank == 0:
        assert records.resumed == 0 and not list(tmp_path.glob("t.records*.jsonl"))
    else:
        assert records.resumed == 2  # nothing removed by rank 1: it reads what is there


def test_a_candidate_may_make_up_to_twice_the_targets_calls_plus_64():
    """The call limit (EC2): 70 target calls, a candidate making 140 (one wasted per step) is measured, not
    stopped; one making more than 2 x 70 + 64 is stopped there."""
    one = {"prompt": [[3, 4]], "attention_mask": None, "seed": 0,
           "settings": {"gen_length": 70, "block_length": 70, "steps": 70, "temperature": 0.0}}
    result = check_decoder(counting_candidate(70), "llada", model="tiny-llada", tier="A", case=one, knobs=False)
    assert result.metrics["target_model_calls"] == 70 and result.metrics["candidate_model_calls"] == 140
    stopped = check_decoder(counting_candidate(140), "llada", model="tiny-llada", case=one, knobs=False)
    assert "it made more than 204 model calls" in stopped.failure.problems[0]


def test_the_diagnosis_reads_the_canvas_before_the_divergent_step():
    """The first divergence's probabilities and margin come from a full forward of the canvas before that step:
    the target's final canvas with the commits of that step and later masked again (EC1), recomputed here."""
    from veridec.testing import load_candidate, load_check_model

    broken = Path(__file__).resolve().parents[1] / "examples" / "fastdllm_dual_broken.py"
    result = check_decoder(load_candidate(f"{broken}:strict_threshold"), "fastdllm", cache="dual",
                           model="tiny-llada", max_examples=60, knobs=False)
    failure, model = result.failure, load_check_model("tiny-llada")
    diagnosis = failure.diagnosis
    canvas = failure.target.canvas.clone()  # [B, L]
    for record in failure.target.trace.steps[diagnosis["step"]:]:
        for row, positions in enumerate(record.positions):
            canvas[row, positions] = model.special.mask_id
    assert failure.case["attention_mask"] is None
    with torch.no_grad():
        logits = model(canvas).logits[diagnosis["row"], diagnosis["position"]].double()  # [V]
    top = logits.topk(2).values
    assert abs(diagnosis["logit_margin"] - (top[0] - top[1]).item()) < 1e-12
    token = diagnosis["target"]["token"]
    assert abs(diagnosis["target"]["probability"] - logits.softmax(-1)[token].item()) < 1e-12


def test_a_knob_moves_a_side_when_any_of_its_costs_moves():
    """Two runs are the same only with the same canvas and every counter the same (EC7): one cost apart (the
    query positions of a cache that is not reused) is a move."""
    from veridec.testing.knobs import _same
    from veridec.testing.running import Side
    from veridec.trace import Counters

    canvas = torch.tensor([[1, 2, 3]])
    base = Side(canvas, None, Counters(full_forwards=2, query_positions=6, model_calls=2))
    assert _same(base, Side(canvas.clone(), None, Counters(full_forwards=2, query_positions=6, model_calls=2)))
    assert not _same(base, Side(canvas, None, Counters(full_forwards=1, query_positions=6, model_calls=2)))
    assert not _same(base, Side(canvas, None, Counters(full_forwards=2, query_positions=9, model_calls=2)))
    assert not _same(base, Side(torch.tensor([[1, 2, 4]]), None, base.counters))


@pytest.mark.parametrize("against", ["fastdllm", "dream"])
def test_tier_s_draws_only_sampled_cases(against):
    """Tier S compares laws at temperature > 0 (ST2): at 0 both laws are point masses, a check of nothing."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from veridec.testing import load_check_model, target
    from veridec.testing.strategies import cases

    model, goal = load_check_model("tiny-dream" if against == "dream" else "tiny-llada"), target(against)

    @settings(max_examples=60, database=None)
    @given(st.data())
    def drawn(data):
        case = data.draw(cases(model, goal, set(goal.settings), {}, sampled=True))
        assert case["settings"]["temperature"] > 0

    drawn()


def test_a_candidate_taking_keyword_arguments_gets_the_drawn_settings():
    """A ``**kwargs`` candidate takes every setting (EC2): it is called with the case's, not at its defaults."""
    seen = {}

    def generate(model, prompt, **kwargs):
        seen.update(kwargs)
        return greedy_candidate(model, prompt, kwargs["gen_length"], kwargs["mask_id"])

    one = {"prompt": [[3, 4]], "attention_mask": None, "seed": 0,
           "settings": {"gen_length": 3, "block_length": 3, "steps": 3, "temperature": 0.0}}
    assert check_decoder(generate, "llada", model="tiny-llada", case=one, knobs=False).passed
    assert {k: seen[k] for k in one["settings"]} == one["settings"]


def test_the_adapters_honour_left_padding_by_default_in_full_and_prefix_calls():
    """MA1: LLaDA's convention honours the attention mask unless told to ignore it, and Fast-dLLM's prefix
    continuation keeps the padding of the full call that made the cache (positions C.. of padded rows). In
    float64: two computations of one function differ by float64 rounding (1000 ulps at the logits' scale)."""
    from veridec.adapters import LLaDAConvention
    from veridec.models import random_model

    model = random_model("llada", 0, num_layers=2, dtype=torch.float64, hidden_size=32, num_heads=4,
                         num_kv_heads=2, intermediate_size=48)
    x = torch.randint(0, 90, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(x)
    mask[1, :4] = 0
    honoured = model(x, attention_mask=mask).logits
    assert torch.equal(LLaDAConvention(model)(x, attention_mask=mask).logits, honoured)
    assert not torch.equal(LLaDAConvention(model, padding="ignore")(x, attention_mask=mask).logits, honoured)
    full, continued = prefix_continuation(model, x, mask)
    rounding = 1000 * torch.finfo(torch.float64).eps * full.abs().max().item()
    assert max_abs(continued, full) <= rounding  # the same padding
    _, unpadded = prefix_continuation(model, x, None)
    assert max_abs(continued[1], unpadded[1]) > 1e6 * rounding  # the padding changes row 1


def prefix_continuation(model, x, mask, cached: int = 6):
    """Fast-dLLM's protocol on ``model``: a full call over the padded canvas (its logits from position ``cached``
    on) and the continuation of x[:, cached:] after the cached prefix."""
    from veridec.adapters import FastDLLMConvention

    adapter = FastDLLMConvention(model)
    full = adapter(x, attention_mask=mask, use_cache=True)
    prefix = [(k[:, :, :cached], v[:, :, :cached]) for k, v in full.past_key_values]
    return full.logits[:, cached:], adapter(x[:, cached:], past_key_values=prefix, use_cache=True).logits


def test_a_recording_allows_exactly_its_limit_of_calls():
    """RecordingModel(limit=N): N calls pass, call N + 1 raises (a candidate that loops stops there)."""
    from veridec.recording import CallLimitExceeded, RecordingModel
    from veridec.testing import load_check_model

    recording = RecordingModel(load_check_model("tiny-llada"), limit=3)
    x = torch.randint(0, 90, (1, 4), generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        recording(x)
    with pytest.raises(CallLimitExceeded, match="more than 3 model calls"):
        recording(x)
    assert len(recording.calls) == 3 and recording.counters().model_calls == 3


def test_every_adapter_takes_the_canvas_by_keyword():
    """MA1: model(input_ids=x, ...) is model(x, ...) in every convention (full, cached and explicit-mask calls);
    the canvas given twice or not at all is refused by name."""
    from veridec.adapters import DreamConvention, FastDLLMConvention, LLaDAConvention
    from veridec.models import random_model

    llada = random_model("llada", 0, num_layers=1, hidden_size=16, num_heads=2, num_kv_heads=1, intermediate_size=24)
    dream = random_model("dream", 0, num_layers=1, hidden_size=16, num_heads=2, num_kv_heads=1, intermediate_size=24)
    x = torch.randint(0, 90, (2, 5), generator=torch.Generator().manual_seed(1))
    sees = torch.ones(1, 1, 5, 5, dtype=torch.bool).tril()
    adapters = [(LLaDAConvention(llada), {}), (LLaDAConvention(llada), {"attention_mask": sees}),
                (FastDLLMConvention(llada), {"use_cache": True}), (DreamConvention(dream), {"tok_idx": None})]
    for adapter, options in adapters:
        assert torch.equal(adapter(input_ids=x, **options).logits, adapter(x, **options).logits)
        with pytest.raises(ValueError, match="pass the canvas once.*both"):
            adapter(x, input_ids=x, **options)
        with pytest.raises(ValueError, match="pass the canvas once.*neither"):
            adapter(**options)
    cached = FastDLLMConvention(llada)
    prefix = [(k[:, :, :3], v[:, :, :3]) for k, v in cached(x, use_cache=True).past_key_values]
    assert torch.equal(cached(input_ids=x[:, 3:], past_key_values=prefix).logits,
                       cached(x[:, 3:], past_key_values=prefix).logits)


def test_a_candidate_that_calls_by_keyword_is_checked():
    """Issue 24's keyword calls end to end: a greedy decoder calling model(input_ids=x) passes against llada,
    and the same decoder committing two tokens per step fails (the keyword path records every call)."""
    from veridec.testing import check_decoder

    def keyword(model, prompt, steps=4, gen_length=4, block_length=4, mask_id=126336, per_step=1):
        x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
        rows = torch.arange(x.shape[0])
        for _ in range(gen_length // per_step):
            confidence, token = model(input_ids=x).logits.softmax(dim=-1).max(dim=-1)  # [B, L] each
            for _ in range(per_step):
                position = confidence.masked_fill(x != mask_id, -1.0).argmax(dim=1)  # [B]
                x[rows, position] = token[rows, position]
        return x

    settings = {"steps": 4, "gen_length": 4, "block_length": 4, "temperature": 0.0, "remasking": "low_confidence"}
    assert check_decoder(keyword, "llada", model="tiny-llada", settings=settings, max_examples=10, knobs=False).passed
    twice = lambda model, prompt, steps=4, gen_length=4, block_length=4, mask_id=126336: keyword(  # noqa: E731
        model, prompt, steps, gen_length, block_length, mask_id, per_step=2)
    assert not check_decoder(twice, "llada", model="tiny-llada", settings=settings, max_examples=10,
                             knobs=False).passed


def _llada_greedy(attention_mask_taken: bool):
    """veridec's LLaDA reference in the official convention, with or without an ``attention_mask`` parameter."""
    from veridec.reference.llada import generate

    def with_mask(model, prompt, attention_mask=None, steps=4, gen_length=4, block_length=4, mask_id=None):
        return generate(model, prompt, attention_mask, steps, gen_length, block_length, mask_id=mask_id).canvas

    def without_mask(model, prompt, steps=4, gen_length=4, block_length=4, mask_id=None):
        return generate(model, prompt, None, steps, gen_length, block_length, mask_id=mask_id).canvas

    return with_mask if attention_mask_taken else without_mask


def test_padded_cases_only_where_both_sides_take_a_mask():
    """A callable target without ``attention_mask`` gets no padded cases even where the candidate takes one (it
    cannot be handed the mask): the same decoder on both sides passes, with every case one row or unpadded."""
    result = check_decoder(_llada_greedy(True), _llada_greedy(False), convention="llada", model="tiny-llada",
                           tier="E", max_examples=25, knobs=False)
    assert result.passed and result.trials == 25, result.report()
