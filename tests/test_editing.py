"""LLaDA2.1's editing sampler (spec/editing.md): the rule against the spec oracle (tests/oracles/editing.py,
written from the spec alone), the reference decoder against the oracle and against the official sampler's
golden recordings (tests/golden/editing.json, recorded by tools/golden/editing.py), with negative controls."""

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracles import editing as oracle

from veridec.decoding import DecodeStalled
from veridec.events import replay, step_events, visible_changes
from veridec.optimized import editing as optimized_editing
from veridec.reference import editing as reference_editing
from veridec.reference.editing import generate
from veridec.rules import editing as rule
from veridec.models.transformer import block_causal_bias
from veridec.rules.editing import EditParams, edit_step, filter_logits

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "editing.json").read_text())
MASK = 97


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The recorded checkpoints, their content hashes and special ids checked first."""
    from tools.golden.checkpoints import load_checkpoints

    return load_checkpoints(GOLDEN, GOLDEN_DIR, tmp_path_factory.mktemp("checkpoints"))


def test_the_block_causal_bias():
    """ED2 against the oracle's attention."""
    for length, width in [(6, 2), (9, 3), (4, 4), (5, 1)]:
        assert (block_causal_bias(length, width) == 0).tolist() == oracle.sees(length, width)


@settings(max_examples=60)
@given(st.lists(st.integers(-3, 3).map(float), min_size=2, max_size=7), st.sampled_from([0.0, 0.5, 1.0, 2.0]),
       st.sampled_from([None, 1, 2, 3, 10]), st.sampled_from([None, 0.3, 0.5, 0.9, 1.0]))
def test_the_filtered_law_matches_the_oracle(logits, temperature, top_k, top_p):
    """ED3: top-k keeps ties at the k-th value; top-p drops a token once the mass before it exceeds top_p."""
    ours = torch.tensor(logits, dtype=torch.float64)
    if temperature:
        ours = torch.softmax(filter_logits(ours / temperature, top_k, top_p), dim=-1)
    else:
        ours = torch.softmax(ours, dim=-1)
    assert ours.tolist() == pytest.approx(oracle.filtered_probs(logits, temperature, top_k, top_p), abs=1e-12)


@st.composite
def block_steps(draw):
    width, vocab = draw(st.integers(1, 6)), draw(st.integers(3, 6))
    mask = vocab - 1
    block = [draw(st.sampled_from([mask, mask, *range(vocab - 1)])) for _ in range(width)]
    is_prompt = [draw(st.booleans()) and block[i] != mask for i in range(width)]
    logits = [[draw(st.integers(-8, 8).map(lambda v: v / 4)) for _ in range(vocab)] for _ in range(width)]
    return dict(block=block, is_prompt=is_prompt, logits=logits, mask=mask, temperature=draw(
        st.sampled_from([0.0, 0.0, 0.7])), top_k=draw(st.sampled_from([None, 2])), top_p=draw(
        st.sampled_from([None, 0.8])), threshold=draw(st.sampled_from([0.2, 0.4, 0.6, 0.9])),
        editing_threshold=draw(st.sampled_from([0.2, 0.5, 0.9])), num_to_transfer=draw(st.integers(1, 3)),
        seed=draw(st.integers(0, 2**16)))


def ties_to_lowest_index(transferred: list[tuple], within: float = 1e-9) -> list[tuple[int, int]]:
    """Transfers in order, each run of confidences within ``within`` of its first put in index order: two
    summation orders can split an exact tie by an ulp either way (temperature 0.7 over [0, 1.75, 0, 1.5] and
    over [0.25, -0.75, -1, 0] give one probability), and the spec breaks a tie to the lowest index."""
    ordered, run = [], []
    for index, token, confidence in transferred:
        if run and abs(confidence - run[0][2]) > within:
            ordered += sorted(run)
            run = []
        run.append((index, token, confidence))
    return [(i, t) for i, t, _ in ordered + sorted(run)]


def test_ties_to_lowest_index_reorders_only_near_ties():
    assert ties_to_lowest_index([(3, 3, 0.4116513751852822), (0, 3, 0.41165137518528216), (1, 0, 0.25)]) == [
        (0, 3), (3, 3), (1, 0)]
    assert ties_to_lowest_index([(3, 3, 0.5), (0, 3, 0.4), (1, 0, 0.4)]) == [(3, 3), (0, 3), (1, 0)]


@settings(max_examples=100)
@given(block_steps())
def test_one_step_matches_the_oracle(case):
    """ED4 against the oracle: the new block, the transfers in order (near ties in index order), the edits;
    sampled steps hand the oracle the drawn tokens. Steps within 1e-9 of a decision are skipped (two softmaxes,
    two summation orders)."""
    c = case
    params = EditParams(8, len(c["block"]), c["temperature"], c["top_p"], c["top_k"], c["threshold"],
                        c["editing_threshold"], 1, c["num_to_transfer"])
    ours = edit_step(torch.tensor(c["logits"], dtype=torch.float64), torch.tensor(c["block"]),
                     torch.tensor(c["is_prompt"]), params=params, mask_id=c["mask"],
                     generator=torch.Generator().manual_seed(c["seed"]))
    assume(ours.margin > 1e-9)
    drawn = None
    if c["temperature"]:
        drawn = rule.propose(torch.tensor(c["logits"], dtype=torch.float64), params,
                             torch.Generator().manual_seed(c["seed"]))[0].tolist()
    theirs = oracle.step(c["logits"], c["block"], c["is_prompt"], mask_id=c["mask"], temperature=c["temperature"],
                         top_k=c["top_k"], top_p=c["top_p"], threshold=c["threshold"],
                         editing_threshold=c["editing_threshold"], num_to_transfer=c["num_to_transfer"], drawn=drawn)
    assert ours.tokens.tolist() == theirs["tokens"] and ours.had_masks == theirs["had_masks"]
    assert ties_to_lowest_index(ours.commits) == ties_to_lowest_index(theirs["transferred"])
    assert [e[:3] for e in ours.edits] == [e[:3] for e in theirs["edited"]]


def test_thresholds_are_strict():
    """ED4 at its edges, where the float64 softmax is exact (two equal logits: p = 1/2). A mask at exactly the
    threshold is not in H; a placed token at exactly editing_threshold is not edited; just above, it is."""
    half, firm = [0.0, 0.0, -math.inf], [6.0, -6.0, -math.inf]  # mask id 2
    params = EditParams(8, 3, threshold=0.5, editing_threshold=0.5, num_to_transfer=1)
    step = edit_step(torch.tensor([half, half, firm], dtype=torch.float64), torch.tensor([2, 2, 2]),
                     torch.zeros(3, dtype=torch.bool), params=params, mask_id=2)
    assert [i for i, _, _ in step.commits] == [2]  # only the firm one passes; it is enough (num_to_transfer 1)
    placed = torch.tensor([1, 1, 2])  # token 1 placed twice; the model now prefers token 0 at 1/2 there
    kept = edit_step(torch.tensor([half, half, firm], dtype=torch.float64), placed, torch.tensor([True, False, False]),
                     params=params, mask_id=2)
    assert kept.edits == []
    lower = EditParams(8, 3, threshold=0.5, editing_threshold=0.49, num_to_transfer=1)
    edited = edit_step(torch.tensor([half, half, firm], dtype=torch.float64), placed,
                       torch.tensor([True, False, False]), params=lower, mask_id=2)
    assert [e[:3] for e in edited.edits] == [(1, 1, 0)]  # position 0 is the prompt's: never edited


def test_an_edit_to_the_mask_token_is_recorded_as_a_revocation():
    """ED4's events: commits by decreasing q, then edits by position; an edit whose new token is the mask is a
    ``revoke``, any other an ``edit`` (whatever the old token), at canvas positions (block offset + position)."""
    placed = torch.tensor([1, 1, 2])  # mask id 2; the model prefers the mask at 0, token 0 at 1, token 1 at 2
    logits = torch.tensor([[-6.0, -6.0, 6.0], [6.0, -6.0, -6.0], [-6.0, 6.0, -6.0]], dtype=torch.float64)
    step = edit_step(logits, placed, torch.zeros(3, dtype=torch.bool), params=EditParams(8, 3), mask_id=2)
    events = step_events(4, 1, 2, step.commits, edits=step.edits, offset=6)
    assert [(e.kind, e.step, e.row, e.position, e.old, e.new) for e in events] == [
        ("commit", 4, 1, 8, 2, 1), ("revoke", 4, 1, 6, 1, 2), ("edit", 4, 1, 7, 1, 0)]


def _oracle_forward(model):
    def forward(tokens, positions, sees):
        bias = torch.zeros(len(tokens), len(tokens), dtype=torch.float64)
        bias[~torch.tensor(sees)] = -math.inf
        return model.raw_forward(torch.tensor([tokens]), torch.tensor([positions]),
                                 attn_bias=bias[None, None]).logits[0].tolist()

    return forward


def test_decode_matches_the_oracle(models):
    """ED1-ED5 at temperature 0 against the oracle's decode (its own attention for the model): canvas, forwards,
    events in order; and the events rebuild the canvas from prompt + masks."""
    model = models["llada"]
    for prompt, settings_ in [([5, 6, 7], dict(max_new_tokens=8, block_size=4, threshold=0.5, editing_threshold=0.5,
                                               max_post_steps=4, num_to_transfer=1)),
                              ([5, MASK, 7, 8, 9], dict(max_new_tokens=6, block_size=3, threshold=0.8,
                                                        editing_threshold=0.3, max_post_steps=2, num_to_transfer=2)),
                              ([1], dict(max_new_tokens=5, block_size=2, threshold=0.3, editing_threshold=0.9,
                                         max_post_steps=0, num_to_transfer=1))]:
        ours = generate(model, torch.tensor([prompt]), **settings_)
        theirs = oracle.decode(_oracle_forward(model), prompt, mask_id=MASK, **settings_)
        assert ours.canvas[0].tolist() == theirs["canvas"] and ours.forwards[0] == theirs["forwards"]
        assert [(e.kind, e.step, e.position, e.old, e.new) for e in ours.events] == [e[:5] for e in theirs["events"]]
        start = prompt + [MASK] * (ours.canvas.shape[1] - len(prompt))
        assert replay(ours.events, start) == ours.canvas[0].tolist()


def _outcome(model, case):
    """veridec's reference on a golden case, in the recorded form: (status, canvas, forwards, changes)."""
    torch.manual_seed(case["seed"])
    try:
        result = generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch")
        status = "ok"
    except DecodeStalled as stalled:
        result, status = stalled.trace, "endless"
    canvas = result.canvas[0].tolist() if status == "ok" else None
    return status, canvas, result.forwards[0], visible_changes(result.events, result.forwards[0])


def _mismatches(models, first: bool = False, sampled_only: bool = False) -> list[int]:
    wrong = []
    for case in GOLDEN["cases"]:
        if sampled_only and not case["settings"]["temperature"]:
            continue
        official = case["official"]
        status, canvas, forwards, changes = _outcome(models[case["checkpoint"]], case)
        same = (status, canvas, forwards) == (official["status"], official.get("canvas"), official["forwards"])
        if not same or changes[: len(official["changes"])] != official["changes"]:
            wrong.append(case["id"])
            if first:
                break
    return wrong


def test_golden_cases(models):
    """Every recorded run of the official sampler (greedy and sampled with top-k / top-p, both checkpoints,
    masks in prompts, early stops, two endless runs capped): the same outcome, canvas, forward count and
    per-forward changes (commits, edits, revocations)."""
    cases = GOLDEN["cases"]
    assert len(cases) >= 100 and sum(c["official"]["status"] == "endless" for c in cases) >= 1
    edits = sum(old != MASK and new != MASK for c in cases for s in c["official"]["changes"] for _, old, new in s)
    assert edits > 100 and sum(c["settings"]["temperature"] > 0 for c in cases) >= 20
    assert _mismatches(models) == []


@pytest.mark.parametrize("broken", ["bidirectional", "no-filter", "no-edits", "edits-the-prompt"])
def test_golden_cases_catch_broken_samplers(models, monkeypatch, broken):
    """Negative controls: each one-point change of ED2-ED4 makes some golden case differ."""
    if broken == "bidirectional":
        monkeypatch.setattr(reference_editing, "block_causal_bias",
                            lambda length, width, device=None: torch.zeros(length, length, dtype=torch.float64))
    elif broken == "no-filter":
        monkeypatch.setattr(rule, "filter_logits", lambda logits, top_k, top_p: logits)
    else:
        real = rule.edit_step

        def broken_step(logits, block, is_prompt, **kw):
            if broken == "edits-the-prompt":
                return real(logits, block, torch.zeros_like(is_prompt), **kw)
            step = real(logits, block, is_prompt, **kw)
            undone = torch.where(block != kw["mask_id"], block, step.tokens)  # edits dropped
            return step._replace(tokens=undone, edits=[])

        monkeypatch.setattr(reference_editing, "edit_step", broken_step)
    assert _mismatches(models, first=True, sampled_only=broken == "no-filter")


def test_bad_arguments_are_refused_by_name(models):
    model, prompt = models["llada"], torch.tensor([[5, 6]])
    for kwargs, name in [(dict(block_size=0), "block_size"), (dict(threshold=1.5), "threshold"),
                         (dict(editing_threshold=-0.1), "editing_threshold"), (dict(top_p=0.0), "top_p"),
                         (dict(top_k=0), "top_k"), (dict(num_to_transfer=0), "num_to_transfer"),
                         (dict(max_post_steps=-1), "max_post_steps"), (dict(max_new_tokens=0), "max_new_tokens")]:
        with pytest.raises(ValueError, match=name):
            generate(model, prompt, **kwargs)
    with pytest.raises(ValueError, match="one row"):
        generate(model, torch.tensor([[5, 6], [7, 8]]))


def _keys(result, row: int = 0) -> list:
    return sorted((e.step, e.kind, e.position, e.old, e.new) for e in result.events if e.row == row)


def _replay_reference(model, case):
    torch.manual_seed(case["seed"])
    return generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch")


@pytest.mark.parametrize("cache", optimized_editing.CACHES)
def test_the_optimized_decoder_is_the_reference_on_golden_cases(models, cache):
    """ED8: every golden case that ends (sampled ones included: one row draws in the reference's order) gives the
    reference's events, canvas and forwards, without and with the block cache; the block cache computes fewer
    query positions, the uncached decoder as many as the reference; the two endless cases stall alike."""
    queries, stalled = [0, 0], 0
    for case in GOLDEN["cases"]:
        model = models[case["checkpoint"]]
        try:
            ours = _replay_reference(model, case)
        except DecodeStalled:
            torch.manual_seed(case["seed"])
            with pytest.raises(DecodeStalled, match="max_forwards"):
                optimized_editing.generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch",
                                           cache=cache)
            stalled += 1
            continue
        torch.manual_seed(case["seed"])
        fast = optimized_editing.generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch",
                                          cache=cache)
        assert fast.canvas.tolist() == ours.canvas.tolist() and fast.forwards == ours.forwards, case["id"]
        assert _keys(fast) == _keys(ours), case["id"]
        queries[0] += ours.counters.query_positions
        queries[1] += fast.counters.query_positions
    assert stalled == 2
    assert queries[1] == queries[0] if cache == "none" else queries[1] < 0.6 * queries[0]


def _row_cases():
    """Batches of 2-4 rows sharing a prompt length (masks and EOS in prompts, EOS stops drawn)."""
    rng = torch.Generator().manual_seed(7)
    draw = lambda options: options[int(torch.randint(len(options), (1,), generator=rng))]  # noqa: E731
    for _ in range(40):
        rows, length = draw([2, 3, 4]), draw([1, 2, 4, 6])
        prompt = torch.tensor([[draw([5, 6, 7, 8, 9, MASK, 89]) for _ in range(length)] for _ in range(rows)])
        yield prompt, dict(max_new_tokens=draw([3, 8, 12]), block_size=draw([1, 3, 4]),
                           threshold=draw([0.2, 0.5, 0.9]), editing_threshold=draw([0.1, 0.3, 0.6]),
                           max_post_steps=draw([0, 1, 3]), num_to_transfer=draw([1, 2]),
                           eos_early_stop=draw([False, True]))


def test_batched_rows_decode_as_each_row_alone(models):
    """ED8: each row of a batch gets its own reference decode (events, canvas, forwards) wherever that decode's
    smallest decision margin exceeds 1e-9 (a batch of other rows changes the matmuls' rounding, ~1e-7 in the
    logits, ~1e-16 in the probabilities of these models); rows that stop at an EOS leave the batch while others
    go on (the EOS here is token 89, which this checkpoint proposes often)."""
    model = copy.copy(models["llada"])
    model.special = dataclasses.replace(model.special, eos_id=89)
    compared = early = 0
    for prompt, settings_ in _row_cases():
        alone = [generate(model, row[None], **settings_) for row in prompt]
        for cache in optimized_editing.CACHES:
            fast = optimized_editing.generate(model, prompt, **settings_, cache=cache)
            for r, ours in enumerate(alone):
                if min(ours.margins[0], default=math.inf) > 1e-9:
                    compared += 1
                    assert fast.canvas[r].tolist() == ours.canvas[0].tolist() and fast.forwards[r] == ours.forwards[0]
                    assert _keys(fast, r) == _keys(ours)
        ended = [MASK in ours.canvas[0, prompt.shape[1]:].tolist() for ours in alone]
        early += settings_["eos_early_stop"] and any(ended) and not all(ended)
    assert compared >= 200 and early >= 5


def test_the_optimized_decoder_refuses_bad_arguments(models):
    with pytest.raises(ValueError, match="cache must be one of"):
        optimized_editing.generate(models["llada"], torch.tensor([[5]]), 4, 2, cache="dual")
    with pytest.raises(ValueError, match="threshold"):
        optimized_editing.generate(models["llada"], torch.tensor([[5]]), threshold=2.0)


@pytest.mark.parametrize("post, queries, calls", [(0, [4, 4, 2, 4, 2], 5), (1, [4, 2, 2, 2, 2, 2, 2, 2], 8)])
def test_the_block_cache_recomputes_from_the_first_changed_block(models, post, queries, calls):
    """ED8's counters by hand: prompt 3, blocks of 2, 5 new tokens (canvas 8, blocks 1-3), one commit per step
    (threshold 1 is never exceeded) and no edits (editing_threshold 1). The first forward computes [0, 4) (a full
    forward). With max_post_steps 0 a block ends at the step that fills it, so the next block's first forward
    starts at the changed block (4 queries); with 1 the post-step forward saw the final block, so every later
    forward computes its own block only (2 queries)."""
    seen = []
    model = models["llada"]

    class Logged:
        def __getattr__(self, name):
            return getattr(model, name)

        def raw_forward(self, tokens, rope_pos, **options):
            seen.append(tokens.shape[1])
            return model.raw_forward(tokens, rope_pos, **options)

    out = optimized_editing.generate(Logged(), torch.tensor([[5, 6, 7]]), max_new_tokens=5, block_size=2,
                                     threshold=1.0, editing_threshold=1.0, max_post_steps=post)
    assert seen == queries and out.counters.query_positions == sum(queries)
    assert (out.counters.model_calls, out.counters.full_forwards) == (calls, 1)
    assert out.canvas[0].tolist() == generate(model, torch.tensor([[5, 6, 7]]), max_new_tokens=5, block_size=2,
                                              threshold=1.0, editing_threshold=1.0,
                                              max_post_steps=post).canvas[0].tolist()


def test_a_block_that_ends_at_its_forward_limit_is_not_stalled(models):
    """ED5-ED6: with max_forwards 1 and max_post_steps 0, blocks of one mask end after their one forward (the
    post-step test comes before the limit); both decoders finish, one forward per block, and agree."""
    settings = dict(max_new_tokens=4, block_size=1, threshold=0.5, editing_threshold=0.9, max_post_steps=0,
                    max_forwards=1)
    prompt = torch.tensor([[5, 6]])
    ours = generate(models["llada"], prompt, **settings)
    assert ours.forwards == [4] and MASK not in ours.canvas[0].tolist()
    for cache in optimized_editing.CACHES:
        fast = optimized_editing.generate(models["llada"], prompt, **settings, cache=cache)
        assert fast.canvas.tolist() == ours.canvas.tolist() and fast.forwards == ours.forwards
    with pytest.raises(DecodeStalled, match="max_forwards"):  # one forward short of a block of two masks
        optimized_editing.generate(models["llada"], prompt, **{**settings, "block_size": 2, "threshold": 1.0})


def test_the_edit_rule_runs_on_a_block_diffusion_model():
    """ED1, ED8 on the SDAR layout (spec/models.md M10: block diffusion, no logit shift): the reference, the batched
    decoder and the block cache give the same canvas and the same events."""
    from veridec.models import random_model

    for seed in (0, 2):
        model = random_model("sdar", seed=seed, dtype=torch.float64)
        prompt = torch.tensor([[5, 17, 3, 22, 9]])
        settings = dict(max_new_tokens=12, block_size=4, threshold=0.2, editing_threshold=0.05, max_post_steps=4)
        ours = reference_editing.generate(model, prompt, **settings)
        assert ours.events
        for cache in ("none", "block"):
            fast = optimized_editing.generate(model, prompt, cache=cache, **settings)
            assert torch.equal(fast.canvas, ours.canvas)
            assert [e.key() for e in fast.events] == [e.key() for e in ours.events]


def test_equal_confidences_transfer_in_index_order():
    """ED4's order among exact ties (the property test puts near ties in index order on both sides): three
    masks with one row of logits each, all above the threshold, transfer lowest index first."""
    same = [2.0, 0.0, 0.0, -math.inf]  # mask id 3
    step = edit_step(torch.tensor([same, [0.0, 0.0, 0.0, -math.inf], same, same], dtype=torch.float64),
                     torch.tensor([3, 3, 3, 3]), torch.zeros(4, dtype=torch.bool),
                     params=EditParams(8, 4, threshold=0.5, num_to_transfer=1), mask_id=3)
    assert [i for i, _, _ in step.commits] == [0, 2, 3]
