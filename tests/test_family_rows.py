"""The exactness table's rows of the decoder families beside the mask presets (harness/family_rows.py,
spec/exactness.md E6, E7): DiffusionGemma's cached / batch / padded rows (tier E) on the shipped checkpoint and a
random config, Fast-dLLM v2's prefix-cache row (tier E) and its block cache (tier A, its drift reported); each
tier E row with a negative control (a deliberately broken optimized variant makes it fail)."""

import pytest
import torch

from veridec.harness import diffusiongemma_rows, fastdllm_v2_rows
from veridec.harness.exactness import all_exact, not_exact, row_plan, table_for_model, table_units
from veridec.harness.family_rows import FAMILY_DECODERS, family_of, load_table_model
from veridec.harness.rows import Sides, TableInputs
from veridec.harness.workloads import table_models
from veridec.optimized import diffusiongemma as cached
from veridec.rules import diffusiongemma as dg_rule

DG_KINDS = ["batch", "cached", "padded"]


@pytest.fixture(scope="module")
def shipped_dg():
    return load_table_model("diffusiongemma", "cpu", torch.float32)


@pytest.fixture(scope="module")
def random_dg():
    return load_table_model("diffusiongemma-random", "cpu", torch.float32)


@pytest.fixture(scope="module")
def tiny_v2():
    return load_table_model(fastdllm_v2_rows.MODEL, "cpu", torch.float32)


def _dg_table(name, model, n=3, gen=32):
    return table_for_model(name, FAMILY_DECODERS, n_prompts=n, gen_length=gen, model=model)


@pytest.mark.parametrize("name", ["diffusiongemma", "diffusiongemma-random"])
def test_every_diffusiongemma_row_is_exact(name, shipped_dg, random_dg):
    rows = _dg_table(name, shipped_dg if name == "diffusiongemma" else random_dg)
    assert sorted(r.variant for r in rows) == DG_KINDS and {r.tier for r in rows} == {"E"}
    assert all_exact(rows), not_exact(rows)
    by = {r.variant: r for r in rows}
    assert by["cached"].max_logit_error == 0 and by["cached"].logit_tolerance is None  # bit-equal, judged so
    for kind in ("batch", "padded"):  # other shapes: rounding, within the measured tolerance
        assert 0 < by[kind].logit_tolerance < 1e-4 and by[kind].token_match == 1


def test_a_cached_decoder_one_ulp_off_is_not_exact(random_dg, monkeypatch):
    """The cached row asks bit-equal logits: one ulp on the decoder's logits (compounded through
    self-conditioning, still far below a rounding tolerance) fails it."""
    original = cached._denoise_canvas

    def one_ulp_up(model, decoder, *args):
        return original(model, lambda *a: torch.nextafter(decoder(*a), torch.tensor(float("inf"))), *args)

    monkeypatch.setattr(cached, "_denoise_canvas", one_ulp_up)
    rows = {r.variant: r for r in _dg_table("diffusiongemma-random", random_dg, n=2, gen=16)}
    assert not rows["cached"].exact and 0 < rows["cached"].max_logit_error < 1e-3


def test_a_cached_encoder_that_sees_the_padding_is_not_exact(shipped_dg, monkeypatch):
    """The cached decoder's encoder attends to the left padding (its state's mask all ones): the cached row
    (against the reference on the padded batch), the batch row and the padded row (against each row unpadded)
    all fail."""
    original = cached._State.encode_new

    def leaky(self, model, trace):
        self.mask[:] = True
        return original(self, model, trace)

    monkeypatch.setattr(cached._State, "encode_new", leaky)
    rows = _dg_table("diffusiongemma", shipped_dg)
    assert sorted(not_exact(rows)) == [f"diffusiongemma/diffusiongemma/{kind}" for kind in DG_KINDS]


def test_a_batch_that_draws_every_row_from_row_0s_generator_is_not_exact(random_dg, monkeypatch):
    """The batch row holds each row to its own stream (DG6.5): a batch whose rows all draw from the first row's
    generator fails it (the rows alone and the padded row, one generator each, are untouched)."""
    original = dg_rule.draw_sample

    def shared(processed, generator, live=None):
        if dg_rule.per_row(generator):
            generator = [generator[0]] * len(generator)
        return original(processed, generator, live)

    monkeypatch.setattr(dg_rule, "draw_sample", shared)
    rows = {r.variant: r for r in _dg_table("diffusiongemma-random", random_dg)}
    assert not rows["batch"].exact and rows["padded"].exact and rows["cached"].exact


def test_the_fastdllm_v2_rows(tiny_v2):
    rows = {r.variant: r for r in table_for_model(fastdllm_v2_rows.MODEL, FAMILY_DECODERS, n_prompts=4,
                                                   gen_length=32, model=tiny_v2)}
    assert sorted(rows) == ["block-cache", "prefix-cache"]
    prefix, block = rows["prefix-cache"], rows["block-cache"]
    assert prefix.tier == "E" and prefix.exact and prefix.token_match == 1 and 0 < prefix.logit_tolerance < 1e-4
    assert block.tier == "A" and block.max_logit_error > block.logit_tolerance  # stale keys: drift, reported
    assert all_exact(list(rows.values()))  # tier A is reported, not judged


def test_a_prefix_cache_that_never_stores_its_blocks_is_not_exact(tiny_v2, monkeypatch):
    original = type(tiny_v2).forward_blocks

    def forgetful(self, tokens, start, cache, block_size, *, store, **options):
        return original(self, tokens, start, cache, block_size, store=False, **options)

    monkeypatch.setattr(type(tiny_v2), "forward_blocks", forgetful)
    rows = table_for_model(fastdllm_v2_rows.MODEL, ("fastdllm-v2",), n_prompts=2, gen_length=32, model=tiny_v2)
    assert not_exact(rows) == [f"{fastdllm_v2_rows.MODEL}/fastdllm-v2/prefix-cache"]


def test_the_default_table_brings_the_families_along(shipped_dg, tiny_v2):
    assert table_models("default") == ["default", "hmm", "diffusiongemma", "diffusiongemma-random",
                                       fastdllm_v2_rows.MODEL]
    assert table_models("diffusiongemma") == ["diffusiongemma"]
    assert family_of(shipped_dg) is diffusiongemma_rows and family_of(tiny_v2) is fastdllm_v2_rows
    assert table_units(shipped_dg, ("sequential", "diffusiongemma")) == ["diffusiongemma"]
    assert table_units(tiny_v2, ("sequential", "diffusiongemma")) == []
    assert row_plan(shipped_dg, ("sequential",), 32, None) == []  # a family's rows only when its decoder is asked


def test_family_rows_resume_from_the_records(random_dg, tmp_path, monkeypatch):
    """A family's rows are recorded units like the others (keyed by the model's weights, which for DiffusionGemma
    are the wrapped transformers model's): a rerun takes them from the records without decoding."""
    from veridec.harness import exactness
    records = lambda: exactness.records_for(tmp_path, "diffusiongemma-random", 2, 16, 32, 0)  # noqa: E731
    first = table_for_model("diffusiongemma-random", ("diffusiongemma",), n_prompts=2, gen_length=16,
                            model=random_dg, records=records())

    def never(*args, **kwargs):
        raise AssertionError("a recorded row was decoded again")

    monkeypatch.setattr(exactness, "build_row", never)
    again = table_for_model("diffusiongemma-random", ("diffusiongemma",), n_prompts=2, gen_length=16,
                            model=random_dg, records=records())
    assert again == first and sorted(r.variant for r in again) == DG_KINDS


def test_below_float32_the_rounded_rows_are_tier_a():
    """In bfloat16 the sampled decisions of ``batch`` and ``padded`` flip at near-ties (the random config's
    entropies nearly tie): those rows report their drift as tier A; ``cached`` (the same computation) stays tier
    E and bit-equal."""
    model = load_table_model("diffusiongemma-random", "cpu", torch.bfloat16)
    rows = {r.variant: r for r in _dg_table("diffusiongemma-random", model, n=2, gen=16)}
    assert {v: r.tier for v, r in rows.items()} == {"cached": "E", "batch": "A", "padded": "A"}
    assert rows["cached"].exact and rows["cached"].max_logit_error == 0 and all_exact(list(rows.values()))


# ------------------------------------------------------------------------- the comparisons against known answers
def test_a_diffusiongemma_row_reports_its_largest_logit_error(shipped_dg):
    """The row's ``max_logit_error`` is the largest over its rows (E6): the reference decode against itself with
    one logit of row 0 moved by 0.25 and one of row 1 by 0.5 (row 2 untouched) reports 0.5, events and tokens
    all equal."""
    prompt, mask = diffusiongemma_rows.prompts(shipped_dg, 3, 0)
    inputs = TableInputs("diffusiongemma", shipped_dg, prompt, mask, 16, 16)
    out, calls, _ = diffusiongemma_rows._reference(inputs)
    moved = [logits.clone() for logits in calls]  # [B, L, V] each
    moved[0][0, 0, 0] += 0.25
    moved[0][1, 0, 0] += 0.5
    pads = diffusiongemma_rows.pads(mask)
    cached_kind = diffusiongemma_rows.kinds(shipped_dg)[0]
    row = diffusiongemma_rows.compared(inputs, "diffusiongemma", cached_kind,
                                       Sides([(out, calls, pads)], [(out, moved, pads)], 1.0))
    assert cached_kind.label == "cached" and row["max_logit_error"] == 0.5
    assert row["commit_order_match"] == 1 and row["token_match"] == 1


def _view(steps, prompt_length=2, canvas=4):
    tokens = torch.tensor([2, 5] + [7] * canvas)  # [prompt_length + canvas]
    return diffusiongemma_rows.RowView(steps, tokens, [torch.zeros(canvas, 3) for _ in steps], prompt_length)


def test_a_row_with_an_extra_step_in_its_canvas_has_other_events():
    """E6: the same events at every step of the expected row's canvases. A measured row that takes one more step
    inside the canvas (a renoising then an acceptance where the expected row accepted at once) has other events,
    though its first step's events are the expected ones; steps on later canvases (positions past the expected
    row) are left out."""
    first = {("accept", 2, 9, 7), ("accept", 3, 9, 7), ("accept", 4, 9, 7), ("accept", 5, 9, 7)}
    extra = {("accept", 2, 7, 7), ("accept", 3, 7, 7), ("accept", 4, 7, 7), ("renoise", 5, 7, 8)}
    later = {("accept", 6, 9, 0)}  # a later canvas: past the expected row's 6 positions
    expected = _view([first])
    assert diffusiongemma_rows.row_agreement(expected, _view([first, later]), pad_id=0)[0]
    assert not diffusiongemma_rows.row_agreement(expected, _view([first, extra]), pad_id=0)[0]
    assert not diffusiongemma_rows.row_agreement(expected, _view([first, extra, later]), pad_id=0)[0]


def test_a_fastdllm_v2_row_counts_the_measured_tokens(tiny_v2):
    """E7: ``token_match`` is the share of generated tokens the measured decode shares with the expected one: the
    reference decode against itself with one generated token changed (2 rows x 16 generated) reports 31/32,
    its commit order still equal."""
    prompt, mask = fastdllm_v2_rows.prompts(tiny_v2, 2, 0)
    inputs = TableInputs(fastdllm_v2_rows.MODEL, tiny_v2, prompt, mask, 16, 16)
    expected = fastdllm_v2_rows._reference(inputs)[0]
    canvas = expected.canvas.clone()  # [2, P + 16]
    canvas[1, -1] = (canvas[1, -1] + 1) % tiny_v2.vocab_size
    kind = fastdllm_v2_rows.kinds(tiny_v2)[0]
    row = fastdllm_v2_rows.compared(inputs, "fastdllm-v2", kind, Sides([expected], [expected._replace(canvas=canvas)],
                                                                         1.0))
    assert row["token_match"] == round(31 / 32, 4) and row["commit_order_match"] == 1
