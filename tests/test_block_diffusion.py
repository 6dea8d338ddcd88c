"""Block diffusion (spec/block_diffusion.md BD2-BD8): the reference and the cached, batched decoder held against the
spec oracle (tests/oracles/block_diffusion.py, written from the spec alone), on tiny random SDAR models in float64."""

import functools

import pytest
import torch

from oracles.block_diffusion import committed, decode, schedule
from veridec.models import random_model
from veridec.optimized.block_diffusion import block_diffusion_generate as cached_generate
from veridec.reference.block_diffusion import block_diffusion_generate as reference_generate

SIZES = dict(hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)
STRATEGIES = ("sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded")

# (block_length, denoising_steps, prompt length, gen_length): block sizes 1, 2, 4; steps below, at and above the
# block; prompts that are and are not whole blocks (and shorter than one block: no prefill).
GEOMETRIES = [(1, 1, 3, 4), (1, 2, 4, 3), (2, 1, 3, 5), (2, 3, 4, 5), (4, 2, 5, 7), (4, 3, 8, 6), (4, 6, 3, 7),
              (4, 4, 4, 4)]
SAMPLINGS = [dict(temperature=0.0), dict(temperature=1.0), dict(temperature=0.7, top_k=5),
             dict(temperature=1.5, top_p=0.8), dict(temperature=1.0, top_k=1),
             dict(temperature=0.5, top_k=3, top_p=0.9), dict(temperature=0.0, top_k=2, top_p=0.5),
             dict(temperature=3.0)]


def _cases():
    """Every strategy over the geometries, two sampling settings each, ties and stop ids alternating."""
    cases = []
    for s_index, strategy in enumerate(STRATEGIES):
        for g_index, (b, S, P, G) in enumerate(GEOMETRIES):
            for shift in (0, 4):
                i = len(cases)
                cases.append(dict(
                    strategy=strategy, b=b, S=S, P=P, G=G, sampling=(g_index + s_index + shift) % len(SAMPLINGS),
                    ties="torch" if i % 2 else "lowest", stop=i % 3 == 0, global_rng=i % 5 == 0, seed=SEEDS[i % 2],
                    threshold=(0.85, 0.1, 0.03)[i % 3], eb=(1.0, 12.0)[i % 2]))
    for strategy in ("low_confidence_static", "low_confidence_dynamic"):  # exact ties (every q = 1.0) under topk
        cases.append(dict(strategy=strategy, b=4, S=2, P=5, G=7, sampling=4, ties="torch", stop=False,
                          global_rng=False, seed=SEEDS[0], threshold=0.85, eb=1.0))
    return cases


SEEDS = (14, 20)  # models that give the mask token some 5% of the mass: drawn masks happen (BD6.2)
CASES = _cases()


@functools.lru_cache(maxsize=None)
def _model(seed):
    return random_model("sdar", seed, dtype=torch.float64, num_layers=2, **SIZES)


def _settings(case):
    return dict(gen_length=case["G"], block_length=case["b"], denoising_steps=case["S"],
                remasking_strategy=case["strategy"], confidence_threshold=case["threshold"],
                eb_threshold=case["eb"] if case["strategy"] == "entropy_bounded" else None, ties=case["ties"],
                **SAMPLINGS[case["sampling"]])


def _run(fn, model, prompt, case, settings, **kw):
    """One decode with the case's randomness: the same seed for every decoder, through a generator or torch's
    global stream."""
    if case["global_rng"]:
        torch.manual_seed(11)
        return fn(model, prompt, model.special.mask_id, **settings, **kw)
    return fn(model, prompt, model.special.mask_id, generator=torch.Generator().manual_seed(11), **settings, **kw)


def _stop_ids(model, prompt, settings, case):
    """A stop id that fires: a token of the second decoded block absent from the first's generated tokens, else one
    of the first's (BD5.5), and a token id the decode never writes."""
    b, P = case["b"], len(prompt)
    canvas = _run(decode, model, prompt, case, settings).canvas
    first_end = (P // b + 1) * b
    first = [t for t in canvas[P:first_end] if t != model.special.mask_id]
    second = [t for t in canvas[first_end:first_end + b] if t not in first and t != model.special.mask_id]
    never = next(t for t in range(model.vocab_size) if t not in canvas and t != model.special.mask_id)
    return [(second or first)[0], never]


@functools.lru_cache(maxsize=None)
def _decoded(index):
    """(settings, oracle, reference, cached) of one case."""
    case = CASES[index]
    model = _model(case["seed"])
    prompt = [(7 * j + case["seed"]) % 90 + 1 for j in range(case["P"])]
    settings = _settings(case)
    if case["stop"]:
        settings["stopping_criteria_idx"] = _stop_ids(model, prompt, settings, case)
    oracle = _run(decode, model, prompt, case, settings)
    reference = _run(reference_generate, model, torch.tensor([prompt]), case, settings)
    cached = _run(cached_generate, model, torch.tensor([prompt]), case, settings)
    return settings, oracle, reference, cached


def _commits(decoded, mask_id, row=0):
    """Per step, the positions of one row the trace records: those that left the mask (a drawn mask token is no
    commit, BD6.2, and is not recorded)."""
    assert all(t != mask_id for step in decoded.trace.steps for t in step.tokens[row])
    return [sorted(step.positions[row]) for step in decoded.trace.steps]


def _ids(case):
    return "{strategy}-b{b}S{S}P{P}-{sampling}-{ties}{stop}".format(**{**case, "stop": "-stop" if case["stop"] else ""})


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_reference_equals_the_oracle(strategy):
    """BD2-BD6: the reference's canvas and per-step commits equal the spec oracle's over every strategy, greedy and
    sampled (top-k, top-p, exact ties at top_k=1), ties lowest and torch, block sizes 1, 2, 4, steps below and above
    the block, prompts that are and are not whole blocks, with and without a stop id."""
    compared = 0
    for index, case in enumerate(CASES):
        if case["strategy"] != strategy:
            continue
        _, oracle, reference, _ = _decoded(index)
        compared += 1
        mask_id = _model(case["seed"]).special.mask_id
        assert reference.canvas.tolist() == [oracle.canvas], _ids(case)
        assert _commits(reference, mask_id) == committed(oracle.writes, mask_id), _ids(case)
    assert compared >= 8


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_cached_decoder_equals_the_reference_and_makes_bd5_6_calls(strategy):
    """BD8.1, BD5.6: one row through the cached decoder gives the reference's canvas and trace, in the prefill (iff
    P >= b), per block its denoising forwards and one store, each over the b positions of its blocks."""
    compared = 0
    for index, case in enumerate(CASES):
        if case["strategy"] != strategy:
            continue
        _, oracle, reference, cached = _decoded(index)
        assert torch.equal(cached.canvas, reference.canvas), _ids(case)
        assert [s.positions for s in cached.trace.steps] == [s.positions for s in reference.trace.steps], _ids(case)
        assert [s.tokens for s in cached.trace.steps] == [s.tokens for s in reference.trace.steps], _ids(case)
        compared += 1
        b, P = case["b"], case["P"]
        denoising, blocks = sum(oracle.steps_per_block), len(oracle.steps_per_block)
        counters = cached.trace.counters
        assert counters.model_calls == (P >= b) + denoising + blocks, _ids(case)
        assert counters.query_positions == b * (P // b + denoising + blocks), _ids(case)
    assert compared >= 8


def test_the_cases_reach_every_branch():
    """BD5.5, BD6.2, BD6.5: the cases above draw mask tokens, step past the schedule, stop early and meet exact ties,
    so the comparisons hold the branches that decide them."""
    drawn_mask = past_schedule = stopped = tied = False
    for index, case in enumerate(CASES):
        settings, oracle, _, _ = _decoded(index)
        mask_id = _model(case["seed"]).special.mask_id
        drawn_mask |= any(t == mask_id for step in oracle.writes for _, t in step)
        past_schedule |= max(oracle.steps_per_block) > case["S"]
        stopped |= "stopping_criteria_idx" in settings and mask_id in oracle.canvas[-case["b"]:]
        tied |= SAMPLINGS[case["sampling"]].get("top_k") == 1 and case["ties"] == "torch" and case["S"] < case["b"]
    assert (drawn_mask, past_schedule, stopped, tied) == (True, True, True, True)


def _padded_batch(prompts, pad_id):
    width = max(len(p) for p in prompts)
    x = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return x, attention_mask


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_a_padded_batch_equals_each_row_alone(sampled):
    """BD8.2: three left-padded rows (prompts of 3, 5 and 8 tokens, block 4) through the cached decoder equal each
    row decoded alone by the reference (with one generator per row when sampled, one row stopping early); the output
    puts each row's canvas after its padding as given, masks after, and the trace's positions in that layout."""
    model = _model(SEEDS[0])
    mask_id, pad_id = model.special.mask_id, model.special.pad_id
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6, 7, 8]]
    settings = dict(gen_length=10, block_length=4, denoising_steps=3)
    if sampled:
        settings.update(temperature=1.0, top_k=5, remasking_strategy="low_confidence_dynamic",
                        confidence_threshold=0.3)
        # Row 1's stop id: a token of its second decoded block that is not in its first (BD5.5).
        row1 = reference_generate(model, torch.tensor([prompts[1]]), mask_id, **settings,
                                  generator=torch.Generator().manual_seed(21)).canvas[0].tolist()
        settings["stopping_criteria_idx"] = [next(t for t in row1[8:12] if t not in row1[5:8])]
    else:
        settings.update(temperature=0.0, remasking_strategy="low_confidence_static")
    x, attention_mask = _padded_batch(prompts, pad_id)
    generator = [torch.Generator().manual_seed(20 + i) for i in range(3)] if sampled else None
    batch = cached_generate(model, x, mask_id, attention_mask=attention_mask, generator=generator, **settings)
    alone = [reference_generate(model, torch.tensor([p]), mask_id, **settings,
                                generator=torch.Generator().manual_seed(20 + i) if sampled else None)
             for i, p in enumerate(prompts)]
    if sampled:
        assert mask_id in alone[1].canvas[0, -4:].tolist()  # the stop fired in row 1
    width = max(x.shape[1] - len(p) + a.canvas.shape[1] for p, a in zip(prompts, alone))
    assert batch.canvas.shape == (3, width)
    for row, (prompt, single) in enumerate(zip(prompts, alone)):
        pad, T = x.shape[1] - len(prompt), single.canvas.shape[1]
        assert batch.canvas[row, :pad].tolist() == [pad_id] * pad
        assert torch.equal(batch.canvas[row, pad:pad + T], single.canvas[0])
        assert batch.canvas[row, pad + T:].tolist() == [mask_id] * (width - pad - T)
        in_batch = [c for c in _commits(batch, mask_id, row) if c]
        assert in_batch == [[p + pad for p in c] for c in _commits(single, mask_id) if c]


BAD_SETTINGS = [
    ("gen_length", dict(gen_length=0)),
    ("block_length", dict(block_length=0)),
    ("denoising_steps", dict(denoising_steps=0)),
    ("temperature", dict(temperature=-0.5)),
    ("top_k", dict(top_k=-1)),
    ("top_p", dict(top_p=0.0)),
    ("top_p", dict(top_p=1.5)),
    ("confidence_threshold", dict(confidence_threshold=float("nan"))),
    ("confidence_threshold", dict(confidence_threshold=float("inf"))),
    ("eb_threshold", dict(remasking_strategy="entropy_bounded")),
    ("eb_threshold", dict(remasking_strategy="entropy_bounded", eb_threshold=0.0)),
    ("stopping_criteria_idx", dict(stopping_criteria_idx=5)),
]


def test_settings_are_refused_by_name():
    """BD2: each bad setting raises a ValueError naming it, in the reference and the cached decoder (and the
    oracle)."""
    model = _model(0)
    prompt = torch.tensor([[1, 2, 3]])
    for name, bad in BAD_SETTINGS:
        settings = {**dict(gen_length=4, block_length=2, denoising_steps=2), **bad}
        for fn in (reference_generate, cached_generate):
            with pytest.raises(ValueError, match=name):
                fn(model, prompt, model.special.mask_id, **settings)
        with pytest.raises(ValueError, match=name):
            decode(model, [1, 2, 3], model.special.mask_id, **settings)


def test_an_unknown_loop_is_refused_by_name():
    """BD10: ``loop`` names one of the cached decoder's hooks (the intended decode, the official one)."""
    model = _model(0)
    with pytest.raises(ValueError, match=r"loop must be one of \['intended', 'official'\], got 'published'"):
        cached_generate(model, torch.tensor([[1, 2, 3]]), model.special.mask_id, gen_length=4, block_length=2,
                        denoising_steps=2, loop="published")


@pytest.mark.parametrize("b, S, expected", [(4, 1, [4]), (4, 2, [2, 2]), (4, 3, [2, 1, 1]), (5, 3, [2, 2, 1]),
                                             (6, 4, [2, 2, 1, 1]), (3, 5, [1, 1, 1, 0, 0]), (1, 1, [1]),
                                             (2, 3, [1, 1, 0])])
def test_the_schedule(small_model, b, S, expected):
    """BD3, BD6.3: n_s = floor(b / S) + [s < b mod S]; a sequential greedy decode of a model that never predicts the
    mask commits n_s positions at step s, left to right, in every block, and in the partly prompt-filled first one
    min(n_s, masks left)."""
    assert schedule(b, S) == expected
    model = small_model("sdar", 3, predicts_mask=False)
    mask_id = model.special.mask_id
    settings = dict(gen_length=2 * b, block_length=b, denoising_steps=S, temperature=0.0,
                    remasking_strategy="sequential")
    nonzero = [n for n in expected if n]
    for P in (b, b + 1):
        prompt = list(range(1, P + 1))
        T = -(-(P + 2 * b) // b) * b
        steps = []
        for block in range(P // b, T // b):
            masks = b - (P - block * b if block * b < P else 0)
            for n in nonzero:
                if masks:
                    steps.append(min(n, masks))
                    masks -= min(n, masks)
        for fn in (reference_generate, cached_generate):
            decoded = fn(model, torch.tensor([prompt]), mask_id, **settings)
            commits = _commits(decoded, mask_id)
            assert [len(c) for c in commits] == steps
            flat = [p for c in commits for p in c]
            assert flat == list(range(P, P + len(flat)))


# ---------------------------------------------------------------------------------------------------------------
# Negative controls: each comparison above is able to fail.
# ---------------------------------------------------------------------------------------------------------------

def _committed_run(fn, model, settings, seed=11):
    mask_id = model.special.mask_id
    prompt = [4, 9, 2, 7]
    g = torch.Generator().manual_seed(seed)
    if fn is decode:
        out = decode(model, prompt, mask_id, generator=g, **settings)
        return out.canvas, committed(out.writes, mask_id)
    out = fn(model, torch.tensor([prompt]), mask_id, generator=g, **settings)
    return out.canvas[0].tolist(), _commits(out, mask_id)


def test_negative_control_ties():
    """BD6.5, SQ0.4: at top_k=1 every confidence is 1.0; ties="torch" then picks other positions than "lowest", so
    an oracle run under one setting differs from a reference run under the other (and agrees under the same)."""
    model = _model(0)
    base = dict(gen_length=8, block_length=4, denoising_steps=2, temperature=1.0, top_k=1,
                remasking_strategy="low_confidence_static")
    oracle_lowest = _committed_run(decode, model, dict(base, ties="lowest"))
    oracle_torch = _committed_run(decode, model, dict(base, ties="torch"))
    for fn in (reference_generate, cached_generate):
        assert _committed_run(fn, model, dict(base, ties="torch")) == oracle_torch
        assert _committed_run(fn, model, dict(base, ties="lowest")) == oracle_lowest
        assert _committed_run(fn, model, dict(base, ties="torch"))[1] != oracle_lowest[1]
    assert oracle_lowest[1][:2] == [[4, 5], [6, 7]] and oracle_torch[1][:2] == [[6, 7], [4, 5]]


def test_negative_control_confidence_threshold():
    """BD5.2: a greedy dynamic decode commits every mask above the threshold at once; with the threshold under the
    confidences the reference commits whole blocks per step where the oracle at 0.85 follows the schedule."""
    model = _model(0)
    base = dict(gen_length=8, block_length=4, denoising_steps=4, temperature=0.0,
                remasking_strategy="low_confidence_dynamic")
    oracle = _committed_run(decode, model, dict(base, confidence_threshold=0.85))
    low = _committed_run(reference_generate, model, dict(base, confidence_threshold=-1.0))
    assert low != oracle
    assert [len(c) for c in oracle[1]] == [1] * 8 and [len(c) for c in low[1]] == [4, 4]
    assert _committed_run(decode, model, dict(base, confidence_threshold=-1.0)) == low


def test_negative_control_sampling():
    """BD4: the oracle's filters and draws are seen by the comparison: another top_p, top_k, temperature or seed
    changes the reference's canvas."""
    model = _model(1)
    base = dict(gen_length=8, block_length=2, denoising_steps=2, temperature=1.0, top_k=5, top_p=0.9)
    oracle = _committed_run(decode, model, base)
    assert _committed_run(reference_generate, model, base) == oracle
    for change in (dict(top_p=0.3), dict(top_k=2), dict(temperature=2.0)):
        assert _committed_run(reference_generate, model, dict(base, **change))[0] != oracle[0], change
    assert _committed_run(reference_generate, model, base, seed=12)[0] != oracle[0]


def test_negative_control_stop():
    """BD5.5: a stop id that fires leaves the later blocks masked, so a decode without it differs."""
    model = _model(0)
    mask_id = model.special.mask_id
    base = dict(gen_length=8, block_length=2, denoising_steps=2, temperature=0.0)
    full = _committed_run(decode, model, base)
    stop = dict(base, stopping_criteria_idx=[full[0][4]])
    stopped = _committed_run(reference_generate, model, stop)
    assert stopped == _committed_run(decode, model, stop)
    assert stopped != full and stopped[0][6:] == [mask_id] * 6


def test_the_verify_check_passes_and_catches_a_row_that_differs(monkeypatch):
    """`veridec verify`'s block-diffusion/cached-batch-equals-reference on both model sizes; its negative control:
    a cached decoder whose third row starts its generation one token off fails it, naming the rows."""
    from veridec.harness.checks import block_diffusion
    from veridec.harness.checks.registry import VerifyContext

    context = VerifyContext(model=_model(SEEDS[0]), higher=None)
    cases, passed, _, _, detail = block_diffusion.cached_batch_equals_reference(context)
    assert (cases, passed) == (16, True), detail

    def one_off(*args, **kwargs):
        decoded = cached_generate(*args, **kwargs)
        decoded.canvas[2, 9] = (decoded.canvas[2, 9] + 1) % 90  # row 2's first generated token (3 pads, 6 prompt)
        return decoded

    monkeypatch.setattr(block_diffusion, "cached_generate", one_off)
    cases, passed, _, _, detail = block_diffusion.cached_batch_equals_reference(context)
    assert not passed and detail == ("rows differ: tiny/greedy/row 2, tiny/sampled/row 2, wider/greedy/row 2, "
                                     "wider/sampled/row 2")


def test_the_verify_check_catches_rows_drawn_from_row_zeros_generator(monkeypatch):
    """A cached decoder that draws every row as row 0's generator would (its state copied per row) passes where
    every row is seeded alike; the check seeds rows apart, so the sampled rows 1-3 differ."""
    from veridec.harness.checks import block_diffusion
    from veridec.harness.checks.registry import VerifyContext

    def row_zero_draws(*args, generator, **kwargs):
        copies = [torch.Generator().set_state(generator[0].get_state()) for _ in generator]
        return cached_generate(*args, generator=copies, **kwargs)

    monkeypatch.setattr(block_diffusion, "cached_generate", row_zero_draws)
    _, passed, _, _, detail = block_diffusion.cached_batch_equals_reference(
        VerifyContext(model=_model(SEEDS[0]), higher=None))
    assert not passed and "tiny/sampled/row 1" in detail and "greedy" not in detail, detail
