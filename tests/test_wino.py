"""WINO (spec/wino.md): the rule against the spec oracle (tests/oracles/wino.py, written from the spec alone), the
reference decoder against the oracle on a tiny model and against the official decoder's golden recordings
(tests/golden/wino.json, recorded by tools/golden/wino.py), and each golden check's negative control."""

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from veridec.events import Event, first_divergence, replay, visible_changes
from veridec.rules.common import top_k_indices
from veridec.optimized.wino import generate as optimized_generate
from veridec.reference.wino import generate
from veridec.rules import wino as rule
from veridec.rules.wino import WinoParams, forward_layout, max_accept, wino_step

from oracles import wino as oracle

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "wino.json").read_text())
MASK = 97


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The recorded checkpoints, their content hashes and special ids checked first."""
    from tools.golden.checkpoints import load_checkpoints

    return load_checkpoints(GOLDEN, GOLDEN_DIR, tmp_path_factory.mktemp("checkpoints"))


def test_max_accept():
    """WN4.1: the exact floor equals the official float32 product's for every n up to 10^5."""
    n = torch.arange(100_001)
    official = (n * 0.7).int().clamp(5, 20)  # int64 * 0.7 runs in float32, as in decoding_wino
    assert official.dtype == torch.int32 and (n * 0.7).dtype == torch.float32
    assert [max_accept(int(k)) for k in n[:200]] == official[:200].tolist()
    assert all(max_accept(int(k)) == oracle.max_accept(int(k)) for k in range(0, 100_001, 7))
    assert ((7 * n) // 10).clamp(5, 20).tolist() == official.tolist()


def test_the_forward_layout():
    """WN2 against the official positions and attention masks recorded at the first forward of every block
    layout the golden cases met, and against the oracle's."""
    assert len(GOLDEN["layouts"]) > 40
    for layout in GOLDEN["layouts"]:
        positions, width = layout["positions"], layout["length"] - _main_length(layout["positions"])
        main, start = len(positions) - width, positions[len(positions) - width]
        params = WinoParams(main - start, width)  # the block starts the generation: same layout
        ours, bias = forward_layout(start, params, 0)
        assert ours.tolist() == positions
        assert ["".join("1" if v == 0 else "0" for v in row) for row in bias.tolist()] == layout["sees"]
    for prompt_len, gen, width, block in [(3, 8, 4, 1), (1, 6, 2, 2), (2, 4, 4, 0)]:
        positions, sees = oracle.forward_layout(prompt_len, gen, width, block)
        ours, bias = forward_layout(prompt_len, WinoParams(gen, width), block)
        assert ours.tolist() == positions and (bias == 0).tolist() == sees


def _main_length(positions):
    return next(i for i in range(1, len(positions)) if positions[i] != positions[i - 1] + 1)


@st.composite
def step_inputs(draw):
    prompt_len, width, blocks = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    gen, block, vocab = width * blocks, draw(st.integers(0, blocks - 1)), draw(st.integers(2, 6))
    n, start = prompt_len + gen + width, prompt_len + block * width
    mask = vocab - 1
    canvas = [draw(st.integers(0, vocab - 2)) for _ in range(start)] + [mask] * (n - start)
    verified = sorted(draw(st.sets(st.integers(0, width - 1), max_size=width)))
    for j in verified:
        canvas[start + j] = draw(st.integers(0, vocab - 1))
    pool = [i for i in range(start + width) if canvas[i] == mask]
    assume(pool)
    candidates = sorted(draw(st.sets(st.sampled_from(pool), min_size=1)))
    logits = [[draw(st.floats(-4, 4).map(lambda v: round(v, 2))) for _ in range(vocab)] for _ in range(n)]
    return dict(prompt_len=prompt_len, gen=gen, width=width, block=block, canvas=canvas, verified=verified,
                candidates=candidates, logits=logits, last=draw(st.integers(1, 30)), mask=mask,
                threshold=draw(st.sampled_from([0.0, 0.2, 0.3, 0.5, 0.8])),
                threshold_back=draw(st.sampled_from([0.2, 0.5, 0.9, 1.0])),
                temperature=draw(st.sampled_from([0.0, 0.0, 0.7, 1.0])), seed=draw(st.integers(0, 2**16)))


@settings(max_examples=80)
@given(step_inputs())
def test_one_step_matches_the_oracle(case):
    """WN4 and WN5's order: commits, revocations, the new canvas, M, U and last, against the oracle, the Gumbel
    uniforms handed to the oracle as the generator draws them. Steps within 1e-9 of a decision are skipped
    (the two softmaxes sum in another order)."""
    c, n = case, len(case["canvas"])
    params = WinoParams(c["gen"], c["width"], c["temperature"], c["threshold"], c["threshold_back"])
    canvas, logits = torch.tensor(c["canvas"]), torch.tensor(c["logits"], dtype=torch.float64)
    candidates = torch.zeros(n, dtype=torch.bool)
    candidates[c["candidates"]] = True
    verified = torch.zeros(c["width"], dtype=torch.bool)
    verified[c["verified"]] = True
    start = c["prompt_len"] + c["block"] * c["width"]
    uniforms = torch.rand((1, n, logits.shape[1]), dtype=torch.float64,
                          generator=torch.Generator().manual_seed(c["seed"]))
    ours = wino_step(logits, canvas, candidates, verified, c["last"], start=start, params=params, mask_id=c["mask"],
                     generator=torch.Generator().manual_seed(c["seed"]))
    assume(ours.margin > 1e-9)
    theirs = oracle.step(c["logits"], c["canvas"], c["candidates"], c["verified"], c["last"],
                         prompt_len=c["prompt_len"], gen_length=c["gen"], block_length=c["width"], block=c["block"],
                         threshold=c["threshold"], threshold_back=c["threshold_back"],
                         temperature=c["temperature"], gumbel_uniforms=uniforms[0].tolist(), mask_id=c["mask"])
    assert [(p, t) for p, t, _ in ours.commits] == [(p, t) for p, t, _ in theirs["committed"]]
    assert [(p, t) for p, t, _ in ours.revokes] == [(p, t) for p, t, _ in theirs["revoked"]]
    for mine, other in zip(ours.commits + ours.revokes, theirs["committed"] + theirs["revoked"]):
        assert mine[2] == pytest.approx(other[2], rel=1e-12, abs=1e-15)
    assert ours.canvas.tolist() == theirs["canvas"] and ours.last == theirs["last"]
    assert ours.candidates.nonzero()[:, 0].tolist() == theirs["candidates"]
    assert ours.verified.nonzero()[:, 0].tolist() == theirs["verified"]
    assert ours.max_accept == theirs["max_accept"]


HALF = [0.0, 0.0, -math.inf, -math.inf]  # float64 softmax (1/2, 1/2, 0, 0), exactly: token 0 at confidence 1/2
THIRD = [0.0, 0.0, 0.0, -math.inf]  # token 0 at 1/3
FIRM = [5.0, -5.0, -math.inf, -math.inf]  # token 0 at about 1


def _edge_step(rows, canvas, candidates, verified, last, threshold, threshold_back):
    """One step with mask 3 on a prompt of 2, gen 4 in one block of 4 (start 2, slots at 6..9)."""
    logits = torch.tensor(rows, dtype=torch.float64)
    mask = torch.zeros(len(canvas), dtype=torch.bool)
    mask[candidates] = True
    slots = torch.zeros(4, dtype=torch.bool)
    slots[verified] = True
    params = WinoParams(4, 4, threshold=threshold, threshold_back=threshold_back)
    ours = wino_step(logits, torch.tensor(canvas), mask, slots, last, start=2, params=params, mask_id=3)
    theirs = oracle.step(rows, canvas, candidates, verified, last, prompt_len=2, gen_length=4, block_length=4,
                         block=0, threshold=threshold, threshold_back=threshold_back, mask_id=3)
    assert [p for p, _, _ in ours.revokes] == [p for p, _, _ in theirs["revoked"]]
    assert [p for p, _, _ in ours.commits] == [p for p, _, _ in theirs["committed"]]
    return [p for p, _, _ in ours.commits], [p for p, _, _ in ours.revokes]


def test_thresholds_are_strict_and_revocations_capped():
    """WN4.4-4.5 at their edges, where the float64 softmax is exact. A draft at exactly the threshold is not
    drafted and a verified token at exactly threshold_back is not revoked (both tests strict); when as many slots
    fail as drafts were accepted last step, only last - 1 are revoked, the weakest first, ties to the lowest
    slot; a step with one draft revokes nothing."""
    fresh = [1, 4, 3, 3, 3, 3, 3, 3, 3, 3]
    drafts, _ = _edge_step([FIRM, FIRM, HALF, HALF, FIRM, FIRM] + [FIRM] * 4, fresh, [2, 3, 4, 5], [], 30, 0.5, 0.9)
    assert drafts == [4, 5]  # 1/2 is not above 1/2
    # prompt [1, mask]: M = {1, 5}, both firm (a = 2); block positions 2, 3, 4 hold token 0, verified by slots 0-2
    held = [1, 3, 0, 0, 0, 3, 3, 3, 3, 3]
    rows = [FIRM] * 6 + [HALF, THIRD, HALF, FIRM]
    assert _edge_step(rows, held, [1, 5], [0, 1, 2], 30, 0.5, 0.5) == ([1, 5], [3])  # only 1/3 < 1/2
    assert _edge_step(rows, held, [1, 5], [0, 1, 2], 4, 0.5, 0.75) == ([1, 5], [3, 2, 4])  # 3 fail, last 4
    assert _edge_step(rows, held, [1, 5], [0, 1, 2], 3, 0.5, 0.75) == ([1, 5], [3, 2])  # last 3: the 2 weakest
    assert _edge_step(rows, held, [1, 5], [0, 1, 2], 1, 0.5, 0.75) == ([1, 5], [])  # last 1: none
    one = [FIRM, HALF] + [FIRM] * 3 + [HALF] + rows[6:]
    assert _edge_step(one, held, [1, 5], [0, 1, 2], 30, 0.6, 0.75) == ([1], [])  # none pass: the best (lowest
    # of two at 1/2) alone, a = 1: nothing revoked though slot 1 fails


def _oracle_forward(model):
    def forward(tokens, positions, sees):
        bias = torch.zeros(len(tokens), len(tokens), dtype=torch.float64)
        bias[~torch.tensor(sees)] = -math.inf
        out = model.raw_forward(torch.tensor([tokens]), torch.tensor([positions]), attn_bias=bias[None, None])
        return out.logits[0].tolist()

    return forward


@pytest.mark.parametrize("checkpoint", ["llada", "llada-proposes-mask"])
def test_decode_matches_the_oracle(models, checkpoint):
    """The whole decode (WN1-WN6) against the oracle's, which builds its own layout for the model: canvas,
    forward count, events in order; and the WN6 bound on every block (forwards <= candidates at its start)."""
    model = models[checkpoint]
    for prompt, gen, width, threshold, back in [([5, 6], 8, 4, 0.2, 0.95), ([7], 12, 12, 0.4, 0.99),
                                                ([1, 2, 3], 16, 8, 0.6, 0.9), ([4, MASK, 9], 6, 2, 0.2, 0.5)]:
        ours = generate(model, torch.tensor([prompt]), gen, width, threshold=threshold, threshold_back=back)
        theirs = oracle.decode(_oracle_forward(model), prompt, gen_length=gen, block_length=width,
                               threshold=threshold, threshold_back=back, mask_id=MASK)
        assert ours.canvas[0].tolist() == theirs["canvas"] and ours.forwards[0] == theirs["forwards"]
        assert [(e.kind, e.step, e.position, e.old, e.new) for e in ours.events] == [e[:5] for e in theirs["events"]]
        assert ours.forwards[0] <= len(prompt) + gen  # WN6 summed over blocks
        assert ours.counters.full_forwards == ours.forwards[0]


def _replay(model, case):
    torch.manual_seed(case["seed"])
    return generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch")


def _mismatches(models, first: bool = False):
    """Golden cases (away from a near tie) where veridec's reference differs from the official outcome or
    raises (WN6's bound); ``first``: stop at the first."""
    wrong = []
    for case in GOLDEN["cases"]:
        official = case["official"]
        assert official["status"] == "ok", case["id"]  # WN6: the official loop always ended
        try:
            result = _replay(models[case["checkpoint"]], case)
        except RuntimeError:
            same = False
        else:
            forwards = official["forwards"]
            same = (result.canvas[0].tolist() == official["output"] and result.forwards[0] == official["steps"]
                    == forwards and visible_changes(result.events, forwards) == official["changes"])
        if not same and not case["near_tie"]:
            wrong.append(case["id"])
            if first:
                break
    return wrong


def test_golden_cases(models):
    """Every recorded official decode (temperature 0 and sampled, both checkpoints, masks in prompts): the same
    output, forward count and per-forward changes (commits and revocations), except near ties."""
    cases = GOLDEN["cases"]
    assert len(cases) >= 100 and sum(not c["near_tie"] for c in cases) >= 100
    revocations = sum(new == c["settings"]["mask_id"] for c in cases for s in c["official"]["changes"]
                      for _, _, new in s)
    assert revocations > 100 and sum(c["settings"]["temperature"] > 0 for c in cases) > 10
    assert _mismatches(models) == []


def _cap_keeps_last(back, last, params):
    failing = int((back < params.threshold_back).sum())
    count = failing if failing < last else last  # WN4.5 says last - 1
    return top_k_indices(back, count, params.ties, largest=False)


@pytest.mark.parametrize("broken", ["cap-keeps-last", "accept-max-19", "accept-min-4", "accept-share-8",
                                    "revocations-never"])
def test_golden_cases_catch_broken_rules(models, monkeypatch, broken):
    """Negative controls: one-line changes of WN3-WN4 each make some golden case differ."""
    if broken == "cap-keeps-last":
        monkeypatch.setattr(rule, "_revocations", _cap_keeps_last)
    elif broken == "accept-max-19":
        monkeypatch.setattr(rule, "ACCEPT_MAX", 19)
    elif broken == "accept-min-4":
        monkeypatch.setattr(rule, "ACCEPT_MIN", 4)
    elif broken == "accept-share-8":
        monkeypatch.setattr(rule, "ACCEPT_SHARE", (8, 10))
    else:
        monkeypatch.setattr(rule, "_revocations", lambda back, last, params: back.new_zeros(0, dtype=torch.long))
    assert _mismatches(models, first=True)


def test_events_replay_to_the_canvas(models):
    """WN5: events applied in order to prompt + masks give the output; first_divergence is None on equal
    decodes and names the step of a changed event (its negative control)."""
    result = generate(models["llada"], torch.tensor([[5, 6]]), 12, 12, threshold=0.2, threshold_back=0.99)
    assert any(e.kind == "revoke" for e in result.events)
    assert replay(result.events, [5, 6] + [MASK] * 12) == result.canvas[0].tolist()
    assert first_divergence(result.events, list(result.events)) is None
    changed = list(result.events)
    i = next(k for k, e in enumerate(changed) if e.kind == "revoke")
    e = changed[i]
    changed[i] = Event("revoke", e.step, e.row, e.position + 1, e.old, e.new, e.confidence)
    assert first_divergence(result.events, changed).startswith(f"row 0, step {e.step}:")
    assert first_divergence(result.events, changed[: i - 1 if i else 0]) is not None
    with pytest.raises(ValueError, match="finds token"):
        replay([Event("revoke", 0, 0, 0, 7, MASK, 0.1)], [5, 6])
    with pytest.raises(ValueError, match="kind must be one of"):
        Event("erase", 0, 0, 0, 1, 2, 0.0)


def test_bad_arguments_are_refused_by_name(models):
    model, prompt = models["llada"], torch.tensor([[5, 6]])
    for kwargs, name in [(dict(gen_length=6, block_length=4), "gen_length"), (dict(threshold=1.5), "threshold"),
                         (dict(threshold_back=-0.1), "threshold_back"), (dict(temperature=-1.0), "temperature"),
                         (dict(ties="first"), "ties"), (dict(gen_length=0, block_length=1), "gen_length")]:
        with pytest.raises(ValueError, match=name):
            generate(model, prompt, **{"gen_length": 8, "block_length": 4, **kwargs})
    with pytest.raises(ValueError, match="prompt must be"):
        generate(model, torch.tensor([5, 6]), 8, 4)
    from veridec.models import random_model
    from veridec.oracles import HMMOracle

    with pytest.raises(ValueError, match="LLaDA layout"):
        generate(random_model("dream", seed=0), prompt, 8, 4)  # Dream's logit shift
    with pytest.raises(ValueError, match="HMMOracle is not one"):
        generate(HMMOracle.random(3, 8, seed=0), prompt, 8, 4)


def _event_keys(result):
    return sorted((e.row, e.step, e.kind, e.position, e.old, e.new) for e in result.events)


def test_the_batched_decoder_is_the_reference(models):
    """WN8, cache="none": every golden case (one row, sampled ones included) gives the reference's events and
    output; three rows in one batch at temperature 0 give each row's reference decode, confidences to rounding."""
    for case in GOLDEN["cases"][::4]:
        ours = _replay(models[case["checkpoint"]], case)
        torch.manual_seed(case["seed"])
        fast = optimized_generate(models[case["checkpoint"]], torch.tensor(case["prompt"]), **case["settings"],
                                  ties="torch")
        assert fast.canvas.tolist() == ours.canvas.tolist() and fast.events == ours.events, case["id"]
        assert fast.counters == ours.counters
    rows = torch.tensor([[5, 6, 7], [8, 9, 10], [11, 5, MASK]])
    for threshold, back in [(0.2, 0.95), (0.4, 0.99), (0.6, 0.9)]:
        ours = generate(models["llada"], rows, 16, 8, threshold=threshold, threshold_back=back)
        fast = optimized_generate(models["llada"], rows, 16, 8, threshold=threshold, threshold_back=back)
        assert fast.canvas.tolist() == ours.canvas.tolist() and fast.forwards == ours.forwards
        assert _event_keys(fast) == _event_keys(ours)
        assert sorted(e.confidence for e in fast.events) == pytest.approx(sorted(e.confidence for e in ours.events),
                                                                           rel=1e-12)
        assert any(e.kind == "revoke" for e in ours.events)


def test_the_prefix_cache_is_cheaper_and_not_exact(models):
    """WN8, cache="prefix": fewer query positions than the full forwards, events that rebuild its own output,
    and (the exactness check's negative control) some golden case where it leaves the reference's output."""
    differ, queries = 0, [0, 0]
    for case in GOLDEN["cases"][::4]:
        model, prompt = models[case["checkpoint"]], torch.tensor(case["prompt"])
        full = _replay(model, case)
        torch.manual_seed(case["seed"])
        cached = optimized_generate(model, prompt, **case["settings"], cache="prefix")
        start = case["prompt"][0] + [case["settings"]["mask_id"]] * case["settings"]["gen_length"]
        assert replay(cached.events, start) == cached.canvas[0].tolist()
        differ += cached.canvas.tolist() != full.canvas.tolist()
        queries[0] += full.counters.query_positions
        queries[1] += cached.counters.query_positions
        assert cached.counters.full_forwards == case["settings"]["gen_length"] // case["settings"]["block_length"]
    assert differ > 0 and queries[1] < queries[0]
    with pytest.raises(ValueError, match="cache must be one of"):
        optimized_generate(models["llada"], torch.tensor([[5]]), 4, 4, cache="dual")
