"""The K/V cache API and padding (spec/models.md M2-M4, C1-C6)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from veridec.numerics import assert_close_measured, max_abs, tolerance

from veridec.models import random_model, realign_shifted

FAMILIES = ["llada", "dream"]
ODD = dict(hidden_size=48, num_heads=2, num_kv_heads=1, intermediate_size=40, num_layers=2)  # head_dim 24


def pair(family, seed=0, **sizes):
    """The same random model in float32 and float64 (the float64 one measures float32's rounding)."""
    sizes = {**ODD, **sizes}
    return random_model(family, seed, torch.float32, **sizes), random_model(family, seed, torch.float64, **sizes)


def random_canvas(model, batch, length, seed, mask_rate=0.5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, model.special.mask_id, (batch, length), generator=g)
    return x.masked_fill(torch.rand(x.shape, generator=g) < mask_rate, model.special.mask_id)


def left_pad(rows, pad_id):
    """Left-pad 1-D LongTensors into a batch; returns (x [B, L], attention_mask [B, L])."""
    length = max(len(r) for r in rows)
    x = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for i, r in enumerate(rows):
        x[i, length - len(r):] = r
        mask[i, length - len(r):] = 1
    return x, mask


@pytest.mark.parametrize("family", FAMILIES)
def test_prefill_equals_forward_and_fills_cache(family):
    model = random_model(family, 0, **ODD)
    x = random_canvas(model, 3, 97, seed=1)
    with torch.no_grad():
        full = model(x).logits
        out, cache = model.prefill(x)
    assert torch.equal(out.logits, full)
    assert cache.length == 97 and cache.writes == 3 * 97
    assert all(k.abs().sum() > 0 for k in cache.keys)


@pytest.mark.parametrize("family", FAMILIES)
@given(data=st.data())
def test_subset_forward_on_fresh_cache_equals_full_forward(family, data):
    """C2: queries at any subset of positions against a freshly filled cache = the full forward there."""
    m32, m64 = pair(family)
    length = data.draw(st.integers(2, 40), label="L")
    batch = data.draw(st.integers(1, 3), label="B")
    n_query = data.draw(st.integers(1, length), label="Q")
    seed = data.draw(st.integers(0, 10_000), label="seed")
    x = random_canvas(m32, batch, length, seed)
    g = torch.Generator().manual_seed(seed)
    positions = torch.stack([torch.randperm(length, generator=g)[:n_query] for _ in range(batch)])  # [B, Q]
    tokens = x.gather(1, positions)
    results = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            out, cache = model.prefill(x)
            raw_full = model.raw_forward(x, torch.arange(length).expand_as(x)).logits  # [B, L, V]
            cached = model.forward_cached(tokens, positions, cache).logits  # [B, Q, V]
            results[name] = (raw_full.gather(1, positions[..., None].expand_as(cached)), cached)
    tol = tolerance(results["32"][0], results["64"][0])
    assert_close_measured(results["32"][1], results["32"][0], tol, "subset vs full (float32)")
    assert max_abs(results["64"][1], results["64"][0]) <= tol * 1e-8, "float64 subset vs full"


@pytest.mark.parametrize("family", FAMILIES)
def test_cache_write_semantics_one_layer(family):
    """C3: after changing tokens in a window, a 1-layer model's subset forward equals the full forward on the
    new canvas there (layer-0 K/V elsewhere depend only on unchanged tokens); other cache entries untouched."""
    m32, m64 = pair(family, num_layers=1)
    x = random_canvas(m32, 2, 33, seed=5)
    positions = torch.tensor([[3, 4, 5, 6], [20, 21, 22, 30]])
    new_tokens = torch.tensor([[1, 2, 3, m32.special.mask_id], [4, m32.special.mask_id, 6, 7]])
    y = x.scatter(1, positions, new_tokens)
    outs = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            _, cache = model.prefill(x)
            before = [k.clone() for k in cache.keys]
            cached = model.forward_cached(new_tokens, positions, cache).logits
            _, fresh = model.prefill(y)
            full = model.raw_forward(y, torch.arange(33).expand_as(y)).logits
            outs[name] = (full.gather(1, positions[..., None].expand_as(cached)), cached)
            untouched = torch.ones(2, 33, dtype=torch.bool).scatter(1, positions, False)
            for k_before, k_after, k_fresh in zip(before, cache.keys, fresh.keys):
                assert torch.equal(k_after.transpose(1, 2)[untouched], k_before.transpose(1, 2)[untouched])
                written = ~untouched
                assert torch.allclose(k_after.transpose(1, 2)[written], k_fresh.transpose(1, 2)[written])
    tol = tolerance(outs["32"][0], outs["64"][0])
    assert_close_measured(outs["32"][1], outs["32"][0], tol, "window recompute vs full")


@pytest.mark.parametrize("family", FAMILIES)
def test_recompute_everything_through_cache_equals_full_forward(family):
    """C3 for deep models: recomputing all positions through a stale cache = a full forward of the new canvas."""
    m32, m64 = pair(family, num_layers=3)
    x, y = random_canvas(m32, 2, 29, seed=6), random_canvas(m32, 2, 29, seed=7)
    outs = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            _, cache = model.prefill(x)
            all_positions = torch.arange(29).expand(2, -1)
            cached = model.forward_cached(y, all_positions, cache).logits
            outs[name] = (model.raw_forward(y, all_positions).logits, cached)
    tol = tolerance(outs["32"][0], outs["64"][0])
    assert_close_measured(outs["32"][1], outs["32"][0], tol, "full recompute via cache")


@pytest.mark.parametrize("family", FAMILIES)
def test_read_only_forward_leaves_cache_untouched(family):
    """C4: write=False appends the queries' K/V for this call only; hiding the stale cached entries at the
    query positions gives what write=True gives."""
    model = random_model(family, 0, **ODD)
    x = random_canvas(model, 2, 21, seed=8)
    positions = torch.tensor([[2, 3, 4], [10, 11, 19]])
    tokens = torch.randint(0, model.special.mask_id, (2, 3), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = model.prefill(x)
        snapshot = cache.clone()
        bias = torch.zeros(2, 1, 3, 21 + 3)
        bias[torch.arange(2)[:, None, None], 0, torch.arange(3)[None, :, None], positions[:, None, :]] = float("-inf")
        read_only = model.forward_cached(tokens, positions, cache, write=False, attn_bias=bias).logits
        for a, b in zip(cache.keys + cache.values, snapshot.keys + snapshot.values):
            assert torch.equal(a, b)
        written = model.forward_cached(tokens, positions, snapshot).logits
    assert torch.allclose(read_only, written, rtol=0, atol=1e-5 * written.abs().max())


def visibility_bias(owner):
    """Additive bias [1, 1, Q, Q]: a query sees shared keys (owner 0) and keys of its own branch."""
    visible = (owner[:, None] == owner[None, :]) | (owner[None, :] == 0)  # [Q, K]
    return torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))[None, None]


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_isolated_branches_equal_separate_forwards(family):
    """C5: [prefix | branch 1 | branch 2 | suffix] with repeated positions and an additive mask isolating the
    branches equals one forward per branch under the same visibility (shared context does not see branches)."""
    model = random_model(family, 0, **ODD)
    g = torch.Generator().manual_seed(9)
    prefix, suffix = torch.randint(0, 90, (7,), generator=g), torch.randint(0, 90, (5,), generator=g)
    branches = [torch.randint(0, 90, (4,), generator=g) for _ in range(2)]
    packed = torch.cat([prefix, *branches, suffix])[None]
    rope = torch.cat([torch.arange(11), torch.arange(7, 16)])[None]  # branch positions repeat 7..10
    owner = torch.tensor([0] * 7 + [1] * 4 + [2] * 4 + [0] * 5)
    alone_owner = torch.tensor([0] * 7 + [1] * 4 + [0] * 5)
    with torch.no_grad():
        out = model.raw_forward(packed, rope, attn_bias=visibility_bias(owner)).logits[0]
        for k, branch in enumerate(branches):
            alone = torch.cat([prefix, branch, suffix])[None]
            ref = model.raw_forward(alone, torch.arange(16)[None], attn_bias=visibility_bias(alone_owner)).logits[0]
            got = torch.cat([out[:7], out[7 + 4 * k: 11 + 4 * k], out[15:]])
            assert torch.allclose(got, ref, rtol=0, atol=1e-5 * ref.abs().max()), k


@pytest.mark.parametrize("family", FAMILIES)
def test_left_padded_batch_equals_rows_alone(family):
    """M2: padding is honoured in forward, prefill and cached forwards."""
    model = random_model(family, 0, **ODD)
    rows = [random_canvas(model, 1, n, seed=n)[0] for n in (13, 5, 9)]
    x, mask = left_pad(rows, model.special.pad_id)
    with torch.no_grad():
        batch = model(x, mask).logits
        _, cache = model.prefill(x, mask)
        last = torch.full((3, 1), 12)
        cached = model.forward_cached(x[:, -1:], last, cache).logits
        for i, row in enumerate(rows):
            alone = model(row[None]).logits[0]
            assert torch.allclose(batch[i, 13 - len(row):], alone, rtol=0, atol=2e-5 * alone.abs().max())
            _, row_cache = model.prefill(row[None])
            ref = model.forward_cached(row[None, -1:], torch.tensor([[len(row) - 1]]), row_cache).logits
            assert torch.allclose(cached[i], ref[0], rtol=0, atol=2e-5 * ref.abs().max())


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_probabilities(family):
    """C6: per-layer probabilities [B, H, Q, Lk], rows sum to 1, zero on padding, same output as SDPA."""
    model = random_model(family, 0, **ODD)
    x, mask = left_pad([random_canvas(model, 1, n, seed=n)[0] for n in (11, 6)], model.special.pad_id)
    with torch.no_grad():
        with_weights = model(x, mask, output_attentions=True)
        plain = model(x, mask)
    assert len(with_weights.attentions) == model.cfg.num_layers
    for w in with_weights.attentions:
        assert w.shape == (2, model.cfg.num_heads, 11, 11)
        assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-6)
        assert (w[1, :, :, :5] == 0).all()
    assert torch.allclose(with_weights.logits, plain.logits, rtol=0, atol=1e-5 * plain.logits.abs().max())


def test_dream_query_positions_score_the_shifted_tokens():
    """M3: for Dream, the query at position i - 1 scores token i; forward() realigns accordingly."""
    model = random_model("dream", 0, **ODD)
    x = random_canvas(model, 1, 15, seed=3)
    with torch.no_grad():
        aligned = model(x).logits
        _, cache = model.prefill(x)
        tokens_at = torch.tensor([[0, 5, 14]])
        queries = model.query_positions(tokens_at)
        assert queries.tolist() == [[0, 4, 13]]
        got = model.forward_cached(x.gather(1, queries), queries, cache).logits
    assert torch.allclose(got, aligned[:, [0, 5, 14]], atol=1e-5)
    raw = torch.arange(6.0).view(1, 3, 2)
    assert realign_shifted(raw, 1).tolist() == [[[0, 1], [0, 1], [2, 3]]]


@pytest.mark.parametrize("bad, message", [
    (dict(tokens=torch.zeros(1, 2, dtype=torch.long), positions=torch.tensor([[1, 1]])), "repeats a position"),
    (dict(tokens=torch.zeros(1, 1, dtype=torch.long), positions=torch.tensor([[9]])), r"positions must lie in \[0, 9\)"),
    (dict(tokens=torch.zeros(1, 2, dtype=torch.long), positions=torch.tensor([[1]])), "must both be"),
])
def test_forward_cached_rejects_bad_input(bad, message):
    model = random_model("llada", 0, **ODD)
    _, cache = model.prefill(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=message):
        model.forward_cached(bad["tokens"], bad["positions"], cache)


def test_canvas_validation():
    model = random_model("llada", 0, **ODD, max_length=16)
    x = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(ValueError, match="exceeds the model's max_length 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="left padding"):
        model(x, torch.tensor([[1, 1, 0, 0, 1, 1, 1, 1]]))
    with pytest.raises(ValueError, match="at least one real"):
        model(x, torch.zeros(1, 8))
    with pytest.raises(ValueError, match="LongTensor"):
        model(x.float())
    bias = torch.full((1, 1, 8, 8), float("-inf"))
    with pytest.raises(ValueError, match="no key to attend to"):
        model.raw_forward(x, torch.arange(8)[None], attn_bias=bias)
