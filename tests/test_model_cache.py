"""The K/V cache API and padding (spec/models.md M2-M4, MC1-MC6)."""

import pytest
import torch
from veridec.canvas import left_pad
from veridec.models import random_model, realign_shifted
from veridec.numerics import assert_close_measured, assert_within_rounding, tolerance

LAYOUT_NAMES = ["llada", "dream"]
ODD = dict(hidden_size=48, num_heads=2, num_kv_heads=1, intermediate_size=40, num_layers=2)  # head_dim 24


def pair(layout, seed=0, **sizes):
    """The same random model in float32 and float64 (the float64 one measures float32's rounding)."""
    sizes = {**ODD, **sizes}
    return random_model(layout, seed, torch.float32, **sizes), random_model(layout, seed, torch.float64, **sizes)


def random_canvas(model, batch, length, seed, mask_rate=0.5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, model.special.mask_id, (batch, length), generator=g)
    return x.masked_fill(torch.rand(x.shape, generator=g) < mask_rate, model.special.mask_id)


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_prefill_equals_forward_and_fills_cache(layout):
    model = random_model(layout, 0, **ODD)
    x = random_canvas(model, 3, 97, seed=1)
    with torch.no_grad():
        full = model(x).logits
        out, cache = model.prefill(x)
    assert torch.equal(out.logits, full)
    assert cache.length == 97 and cache.writes == 3 * 97
    assert all(k.abs().sum() > 0 for k in cache.keys)


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
@pytest.mark.parametrize("name", ["model/cache-subset", "model/cache-recompute", "model/padding"])
def test_registered_cache_and_padding_checks(run_registered_check, layout, name):
    """MC2 (queries at a random subset against a freshly filled cache = the full forward there), MC3
    (recomputing every position through a stale cache = a full forward of the new canvas; three layers here)
    and M2 (a left-padded batch = each row alone): the checks ``veridec verify`` runs, on odd head sizes."""
    for seed in range(2):
        run_registered_check(name, *pair(layout, seed=seed, num_layers=3), seed=seed)


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_cache_write_semantics_one_layer(layout):
    """MC3: after changing tokens in a window, a 1-layer model's subset forward equals the full forward on the
    new canvas there (layer-0 K/V elsewhere depend only on unchanged tokens); other cache entries untouched."""
    m32, m64 = pair(layout, num_layers=1)
    x = random_canvas(m32, 2, 33, seed=5)
    positions = torch.tensor([[3, 4, 5, 6], [20, 21, 22, 30]])
    new_tokens = torch.tensor([[1, 2, 3, m32.special.mask_id], [4, m32.special.mask_id, 6, 7]])
    y = x.scatter(1, positions, new_tokens)
    untouched = torch.ones(2, 33, dtype=torch.bool).scatter(1, positions, False)
    outs, keys = {}, {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            _, cache = model.prefill(x)
            before = [k.clone() for k in cache.keys]
            cached = model.forward_cached(new_tokens, positions, cache).logits
            _, fresh = model.prefill(y)
            full = model.raw_forward(y, torch.arange(33).expand_as(y)).logits
            outs[name] = (full.gather(1, positions[..., None].expand_as(cached)), cached)
            for k_before, k_after in zip(before, cache.keys):
                assert torch.equal(k_after.transpose(1, 2)[untouched], k_before.transpose(1, 2)[untouched])
            keys[name] = [(k_after.transpose(1, 2)[~untouched], k_fresh.transpose(1, 2)[~untouched])
                          for k_after, k_fresh in zip(cache.keys, fresh.keys)]
    for (written, fresh32), (_, fresh64) in zip(keys["32"], keys["64"]):
        assert_within_rounding(written, fresh32, fresh64, "written keys vs a fresh prefill's")
    assert_within_rounding(outs["32"][1], outs["32"][0], outs["64"][0], "window recompute vs full")


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_read_only_forward_leaves_cache_untouched(layout):
    """MC4: write=False appends the queries' K/V for this call only; hiding the stale cached entries at the
    query positions gives what write=True gives."""
    m32, m64 = pair(layout)
    x = random_canvas(m32, 2, 21, seed=8)
    positions = torch.tensor([[2, 3, 4], [10, 11, 19]])
    tokens = torch.randint(0, m32.special.mask_id, (2, 3), generator=torch.Generator().manual_seed(0))
    bias = torch.zeros(2, 1, 3, 21 + 3)
    bias[torch.arange(2)[:, None, None], 0, torch.arange(3)[None, :, None], positions[:, None, :]] = float("-inf")
    outs = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            _, cache = model.prefill(x)
            snapshot = cache.clone()
            read_only = model.forward_cached(tokens, positions, cache, write=False, attn_bias=bias).logits
            for a, b in zip(cache.keys + cache.values, snapshot.keys + snapshot.values):
                assert torch.equal(a, b)
            outs[name] = (read_only, model.forward_cached(tokens, positions, snapshot).logits)
    assert_within_rounding(outs["32"][0], outs["32"][1], outs["64"][1], "write=False vs write=True")


def visibility_bias(owner):
    """Additive bias [1, 1, Q, Q]: a query sees shared keys (owner 0) and keys of its own branch."""
    visible = (owner[:, None] == owner[None, :]) | (owner[None, :] == 0)  # [Q, K]
    return torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))[None, None]


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_packed_isolated_branches_equal_separate_forwards(layout):
    """MC5: [prefix | branch 1 | branch 2 | suffix] with repeated positions and an additive mask isolating the
    branches equals one forward per branch under the same visibility (shared context does not see branches)."""
    g = torch.Generator().manual_seed(9)
    prefix, suffix = torch.randint(0, 90, (7,), generator=g), torch.randint(0, 90, (5,), generator=g)
    branches = [torch.randint(0, 90, (4,), generator=g) for _ in range(2)]
    packed = torch.cat([prefix, *branches, suffix])[None]
    rope = torch.cat([torch.arange(11), torch.arange(7, 16)])[None]  # branch positions repeat 7..10
    owner = torch.tensor([0] * 7 + [1] * 4 + [2] * 4 + [0] * 5)
    alone_owner = torch.tensor([0] * 7 + [1] * 4 + [0] * 5)
    outs = {}
    with torch.no_grad():
        for name, model in zip(("32", "64"), pair(layout)):
            out = model.raw_forward(packed, rope, attn_bias=visibility_bias(owner)).logits[0]
            outs[name] = []
            for k, branch in enumerate(branches):
                alone = torch.cat([prefix, branch, suffix])[None]
                ref = model.raw_forward(alone, torch.arange(16)[None], attn_bias=visibility_bias(alone_owner)).logits[0]
                outs[name].append((torch.cat([out[:7], out[7 + 4 * k: 11 + 4 * k], out[15:]]), ref))
    for k, ((got, ref32), (_, ref64)) in enumerate(zip(outs["32"], outs["64"])):
        assert_within_rounding(got, ref32, ref64, f"packed branch {k} vs its own forward")


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_left_padded_batch_equals_rows_alone(layout):
    """M2: padding is honoured in forward, prefill and cached forwards."""
    m32, m64 = pair(layout)
    rows = [random_canvas(m32, 1, n, seed=n)[0] for n in (13, 5, 9)]
    x, mask = left_pad([r.tolist() for r in rows], m32.special.pad_id)
    outs = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            batch = model(x, mask).logits
            _, cache = model.prefill(x, mask)
            cached = model.forward_cached(x[:, -1:], torch.full((3, 1), 12), cache).logits
            outs[name] = []
            for i, row in enumerate(rows):
                _, row_cache = model.prefill(row[None])
                last = model.forward_cached(row[None, -1:], torch.tensor([[len(row) - 1]]), row_cache).logits[0]
                outs[name].append((batch[i, 13 - len(row):], model(row[None]).logits[0], cached[i], last))
    for (batch, alone32, cached, last32), (_, alone64, _, last64) in zip(outs["32"], outs["64"]):
        assert_within_rounding(batch, alone32, alone64, "padded row vs the row alone")
        assert_within_rounding(cached, last32, last64, "padded cached query vs the row's own cache")


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_attention_probabilities(layout):
    """MC6: per-layer probabilities [B, H, Q, Lk], rows sum to 1, zero on padding, same output as SDPA."""
    m32, m64 = pair(layout)
    x, mask = left_pad([random_canvas(m32, 1, n, seed=n)[0].tolist() for n in (11, 6)], m32.special.pad_id)
    with torch.no_grad():
        weighted = {name: model(x, mask, output_attentions=True) for name, model in (("32", m32), ("64", m64))}
        plain = {name: model(x, mask).logits for name, model in (("32", m32), ("64", m64))}
    assert len(weighted["32"].attentions) == m32.cfg.num_layers
    for w32, w64 in zip(weighted["32"].attentions, weighted["64"].attentions):
        assert w32.shape == (2, m32.cfg.num_heads, 11, 11)
        assert_close_measured(w32.sum(-1), torch.ones(()), tolerance(w32.sum(-1), w64.sum(-1)), "probability sums")
        assert (w32[1, :, :, :5] == 0).all()
    assert_within_rounding(weighted["32"].logits, plain["32"], plain["64"], "explicit softmax vs SDPA")


def test_dream_query_positions_score_the_shifted_tokens():
    """M3: for Dream, the query at position i - 1 scores token i; forward() realigns accordingly."""
    m32, m64 = pair("dream")
    x = random_canvas(m32, 1, 15, seed=3)
    tokens_at = torch.tensor([[0, 5, 14]])
    outs = {}
    with torch.no_grad():
        for name, model in (("32", m32), ("64", m64)):
            aligned = model(x).logits
            _, cache = model.prefill(x)
            queries = model.query_positions(tokens_at)
            assert queries.tolist() == [[0, 4, 13]]
            outs[name] = (model.forward_cached(x.gather(1, queries), queries, cache).logits, aligned[:, [0, 5, 14]])
    assert_within_rounding(outs["32"][0], outs["32"][1], outs["64"][1], "shifted queries vs aligned logits")
    raw = torch.arange(6.0).view(1, 3, 2)
    assert realign_shifted(raw, 1).tolist() == [[[0, 1], [0, 1], [2, 3]]]


@pytest.mark.parametrize("bad, message", [
    (dict(tokens=torch.zeros(1, 2, dtype=torch.long), positions=torch.tensor([[1, 1]])), "repeats a position"),
    (dict(tokens=torch.zeros(1, 1, dtype=torch.long), positions=torch.tensor([[9]])),
     r"positions must lie in \[0, 9\)"),
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
