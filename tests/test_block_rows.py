"""The exactness table on a block-diffusion model (harness/block_rows.py, spec/exactness.md E4): every decoder's
cached batch against its reference on each prompt alone, tier E within the measured rounding; a negative control;
a model without blocks gets no block rows."""

import pytest
from veridec.harness.block_rows import SDAR_DECODERS, block_decoders
from veridec.harness.exactness import VERIFY_DECODERS, all_exact, not_exact, table_for_model
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

    monkeypatch.setattr(exactness, "block_row", never)
    again = _table(block_model, decoders=("fastdllm",), records=records())
    assert again == first and len(again) == 2
