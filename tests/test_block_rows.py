"""The exactness table on a block-diffusion model (harness/block_rows.py, spec/exactness.md E4): every decoder's
cached batch against its reference on each prompt alone, tier E within the measured rounding; a negative control;
a model without blocks gets no block rows."""

import pytest
import torch

from veridec.harness.block_rows import SDAR_DECODERS, block_decoders, block_tolerance, decoder_pair
from veridec.harness.event_rows import ROUNDED
from veridec.harness.exactness import VERIFY_DECODERS, all_exact, not_exact, table_for_model, unit_rows
from veridec.harness.workloads import prompts_for, single_prompts
from veridec.models import random_model

SDAR = dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)


@pytest.fixture(scope="module")
def block_model():
    return random_model("sdar", 9, **SDAR)


def _table(model, decoders=VERIFY_DECODERS, **kw):
    return table_for_model("sdar-random", decoders, n_prompts=4, gen_length=12, block_length=8, model=model, **kw)


def test_every_block_row_is_exact_on_a_padded_batch(block_model):
    rows = _table(block_model)
    names = block_decoders(VERIFY_DECODERS)
    assert {"wino", "editing", "dapd-hq"}.isdisjoint(names) and set(SDAR_DECODERS) <= set(names)
    assert sorted((r.decoder, r.variant) for r in rows) == sorted(
        (name, f"blocks-cached b{b}") for name in names for b in (4, 8))
    assert all_exact(rows), not_exact(rows)
    assert all(r.prompts == 4 and r.full_forwards == 0 and 0 < r.logit_tolerance < 1e-4 for r in rows)
    assert any(r.max_logit_error > 0 for r in rows)  # other shapes than the reference's: rounding differs


def test_a_cached_decoder_that_lets_queries_see_padding_is_not_exact(block_model, monkeypatch):
    original = type(block_model).forward_blocks

    def leaky(self, tokens, start, cache, block_size, *, store, first_real=None):
        return original(self, tokens, start, cache, block_size, store=store)

    monkeypatch.setattr(type(block_model), "forward_blocks", leaky)
    rows = _table(block_model, decoders=("sequential", "sdar-static"))
    assert not all_exact(rows)
    assert {r.decoder for r in rows if not r.exact} == {"sequential", "sdar-static"}


def test_a_model_without_blocks_gets_no_sdar_rows():
    model = random_model("llada", 2, **SDAR)
    rows = table_for_model("llada-random", ("sequential", *SDAR_DECODERS), n_prompts=2, gen_length=8,
                           block_length=8, model=model)
    assert rows and not {r.decoder for r in rows} & set(SDAR_DECODERS)
    assert not any(r.variant.startswith("blocks-") for r in rows)


def test_compiled_rows_are_refused_on_a_block_model(block_model):
    with pytest.raises(ValueError, match="without --compile"):
        _table(block_model, decoders=("sequential",), compile="aot_eager")


def test_block_rows_resume_from_the_records(block_model, tmp_path, monkeypatch):
    from veridec.harness import exactness
    records = lambda: exactness.records_for(tmp_path, "sdar-random", 4, 12, 8, 0)  # noqa: E731
    first = _table(block_model, decoders=("fastdllm",), records=records())

    def never(*args, **kwargs):
        raise AssertionError("a recorded row was decoded again")

    monkeypatch.setattr(exactness, "build_row", never)
    again = _table(block_model, decoders=("fastdllm",), records=records())
    assert again == first and sorted(r.variant for r in again) == ["blocks-cached b4", "blocks-cached b8"]


@pytest.mark.parametrize("name", ["fastdllm", "klass-hq", *SDAR_DECODERS])
def test_both_sides_keep_the_logits_of_each_commit(block_model, name):
    """What the rows' logit error reads: every committed position's logits [V] on both sides, in the order of the
    step's positions (greedy: each row's argmax is its token), the cached within the measured rounding."""
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    reference, cached = decoder_pair(name, 4)
    ours, theirs = reference(block_model, prompt, gen_length=9), cached(block_model, prompt, None, gen_length=9)
    tol = block_tolerance(block_model, prompt, 9, 4)
    assert [s.positions for s in ours.trace.steps if s.positions[0]] == \
        [s.positions for s in theirs.trace.steps if s.positions[0]]
    steps = [(a, b) for a, b in zip((s for s in ours.trace.steps if s.positions[0]),
                                    (s for s in theirs.trace.steps if s.positions[0]))]
    for a, b in steps:
        for side in (a, b):
            logits = torch.tensor(side.logits[0])  # [n, V]
            assert logits.shape == (len(side.positions[0]), block_model.vocab_size)
            assert logits.argmax(dim=-1).tolist() == side.tokens[0]
        assert (torch.tensor(a.logits[0]) - torch.tensor(b.logits[0])).abs().max() <= tol


def test_each_block_length_has_its_own_measured_rounding(block_model):
    rows = _table(block_model, decoders=("sequential",))
    prompt, mask = prompts_for("sdar-random", block_model, 4, 0)
    first = single_prompts(prompt, mask)[0]
    for row in rows:
        b = int(row.variant.rsplit("b", 1)[1])
        assert row.logit_tolerance == block_tolerance(block_model, first, 12, b), row.variant


def test_the_progress_total_counts_the_rows_each_unit_adds(block_model):
    llada = random_model("llada", 2, **SDAR)
    assert unit_rows(block_model, "sequential", ("sequential",), 8, None) == 2
    assert unit_rows(block_model, "sequential", ("sequential",), 4, None) == 1  # block 4 is the table's: one row
    assert len(_table(block_model, decoders=("sequential",))) == 2
    assert len(table_for_model("x", ("sequential",), n_prompts=2, gen_length=8, block_length=4,
                               model=block_model)) == 1
    assert unit_rows(llada, "sequential", ("sequential",), 8, None) == 4
    assert unit_rows(llada, "sequential", ("sequential",), 8, "aot_eager") == 7
    assert unit_rows(llada, "wino", ("wino",), 8, None) == 3


def test_event_rows_are_held_to_rounding_only_where_their_shapes_differ():
    model = random_model("llada", 2, **SDAR)
    rows = table_for_model("llada-random", ("wino", "editing"), n_prompts=2, gen_length=8, block_length=8,
                           model=model)
    rows = [r for r in rows if r.decoder in ("wino", "editing")]  # the speculative rows come along
    assert {(r.decoder, r.variant) for r in rows} >= ROUNDED and len(rows) == 6
    for row in rows:
        assert (row.logit_tolerance is not None) == ((row.decoder, row.variant) in ROUNDED), row


def test_the_command_line_takes_the_sdar_decoders(cli, tmp_path):
    from veridec.models.tiny import write_tiny_checkpoint
    folder = write_tiny_checkpoint(tmp_path / "sdar", "sdar", seed=3)
    code, out, err = cli("exactness", "--model", folder, "--decoders", "sdar-static", "--quick", "--quiet",
                         "--out", tmp_path / "table")
    assert code == 0, err
    assert "| sdar-static | blocks-cached b4 | E |" in out and "| sdar-static | blocks-cached b32 | E |" in out
