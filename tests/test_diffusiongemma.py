"""DiffusionGemma (spec/diffusiongemma.md): the rule's parts held to transformers' own classes, the refusals (DG1.4,
DG7.2), the official defects (DG9), batch rows (DG6.4), and both decoders against the live official ``generate``
in the benchmark's check (DG8.1)."""

from __future__ import annotations

import pytest
import torch

from veridec.models.diffusiongemma import random_diffusiongemma
from veridec.optimized import diffusiongemma as optimized
from veridec.reference import diffusiongemma as reference



# ------------------------------------------------------------------------------ the rule's parts, held to the official
from hypothesis import given, settings, strategies as st  # noqa: E402
from transformers.models.diffusion_gemma import generation_diffusion_gemma as official  # noqa: E402

from veridec.rules import diffusiongemma as rule  # noqa: E402

CANVAS = st.integers(1, 6)


@given(st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.01, 2.0), st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_the_temperature_schedule_is_the_official_processor(steps, t_min, spread, seed):
    """DG3.2: the step with r steps remaining divides by t_min + (t_max - t_min) r / N, bit for bit, r = N .. 1."""
    params = rule.DGParams(max_denoising_steps=steps, t_min=t_min, t_max=t_min + spread)
    processor = official.LinearTemperatureScheduleLogitsProcessor(t_min, t_min + spread, steps)
    logits = torch.randn((2, 3, 5), generator=torch.Generator().manual_seed(seed), device="cpu")
    for remaining in range(steps, 0, -1):
        expected = processor(None, logits, cur_step=torch.tensor(remaining, dtype=torch.int32, device="cpu"))
        assert torch.equal(rule.processed_logits(logits, remaining, params), expected)


def test_the_last_step_is_not_at_t_min():
    """DG3.2, DG9.1: the schedule never reaches t_min: the last step (r = 1) runs at t_min + (t_max - t_min) / N."""
    params = rule.DGParams(max_denoising_steps=4, t_min=0.4, t_max=0.8)
    assert rule.temperature(1, params, "cpu").item() == pytest.approx(0.5)
    assert rule.temperature(4, params, "cpu").item() == pytest.approx(0.8)


def _official_accept(logits, bound):
    sampler = official.EntropyBoundSampler(official.EntropyBoundSamplerConfig(entropy_bound=bound), logits.shape[1],
                                           logits.shape[2], 1)
    current = torch.zeros(logits.shape[:2], dtype=torch.long, device="cpu")
    sampler.accept_canvas(current, current + 1, logits, 1)
    return sampler.accepted_token_mask


@given(st.integers(1, 3), CANVAS, st.integers(2, 6), st.sampled_from((0.02, 0.1, 0.5, 2.0)), st.integers(0, 2**31 - 1),
       st.booleans())
@settings(max_examples=60, deadline=None)
def test_acceptance_is_the_official_entropy_bound(batch, length, vocab, bound, seed, tied):
    """DG3.4: the accepted positions equal EntropyBoundSampler.accept_canvas's (ties among equal entropies: rows
    of repeated logits, broken as torch.sort breaks them on both sides)."""
    logits = 3 * torch.randn((batch, length, vocab), generator=torch.Generator().manual_seed(seed), device="cpu")
    if tied:
        logits[:, ::2] = logits[:, :1].clone()
    accepted = rule.accepted_positions(rule.token_entropy(logits), bound)
    assert torch.equal(accepted, _official_accept(logits, bound))
    assert accepted.any(dim=-1).all()  # DG3.4: the lowest entropy is always accepted


def test_the_entropy_bound_is_not_strict():
    """DG3.4: a prefix whose entropies before the last sum to exactly the bound is accepted (<=), as officially;
    a strict comparison would stop one short. Entropies 0.05, 0.05, 0.3 (float32): sums before each 0, 0.05, 0.1."""
    entropy = torch.tensor([[0.05, 0.3, 0.05]], dtype=torch.float32, device="cpu")
    assert rule.accepted_positions(entropy, 0.1).tolist() == [[True, True, True]]
    assert rule.accepted_positions(entropy, 0.0999).tolist() == [[True, False, True]]


def test_renoising_is_the_official_renoise_canvas():
    """DG3.5: accepted positions keep the draw, every other takes a fresh uniform token (one randint [B, L])."""
    logits = 3 * torch.randn((2, 6, 9), generator=torch.Generator().manual_seed(3), device="cpu")
    sampler = official.EntropyBoundSampler(official.EntropyBoundSamplerConfig(entropy_bound=0.5), 6, 9, 1)
    current = torch.zeros((2, 6), dtype=torch.long, device="cpu")
    drawn = torch.full((2, 6), 8, dtype=torch.long, device="cpu")
    torch.manual_seed(5)
    expected = sampler.renoise_canvas(sampler.accept_canvas(current, drawn, logits, 1), 1)
    accepted = rule.accepted_positions(rule.token_entropy(logits), 0.5)
    torch.manual_seed(5)
    noise = rule.draw_noise((2, 6), 9, None, "cpu")
    assert torch.equal(rule.renoise(torch.where(accepted, drawn, current), accepted, noise), expected)


@given(st.integers(0, 3), st.sampled_from((0.05, 0.5, 3.0)), st.lists(st.integers(0, 2), min_size=1, max_size=7),
       st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_the_stop_test_is_the_official_criterion(k, threshold, pattern, seed):
    """DG4.1-DG4.3: step by step the same verdicts as StableAndConfidentStoppingCriteria, over argmax canvases
    drawn from three so that repeats happen, and logits scaled so both sides of the confidence bound occur."""
    params = rule.DGParams(stability_threshold=k, confidence_threshold=threshold)
    criterion = official.StableAndConfidentStoppingCriteria(k, threshold)
    generator = torch.Generator().manual_seed(seed)
    canvases = torch.randint(0, 3, (3, 2, 4), generator=generator, device="cpu")
    state = rule.new_stop_state(params, 2, 4, "cpu")
    for choice in pattern:
        logits = 8 * torch.randn((2, 4, 5), generator=generator, device="cpu")
        ours, state = rule.stop_test(state, canvases[choice], logits, params)
        assert torch.equal(ours, criterion(canvases[choice], logits))


def test_stability_k_means_k_plus_one_identical_canvases():
    """DG4.2 (vllm#45965): with k = 1 the first repeat of a canvas stops the row, i.e. at its second identical
    argmax canvas; the first canvas alone never stops (the history starts at -1)."""
    params = rule.DGParams(stability_threshold=1, confidence_threshold=10.0)
    canvas = torch.tensor([[1, 2]], device="cpu")
    logits = torch.zeros((1, 2, 3), device="cpu")
    state = rule.new_stop_state(params, 1, 2, "cpu")
    first, state = rule.stop_test(state, canvas, logits, params)
    second, _ = rule.stop_test(state, canvas, logits, params)
    assert first.tolist() == [False] and second.tolist() == [True]


@given(st.lists(st.lists(st.integers(0, 4), min_size=4, max_size=4), min_size=1, max_size=3), st.data())
@settings(max_examples=60, deadline=None)
def test_finalize_canvas_is_the_official_one(rows, data):
    """DG5: EOS / max-length finishing and padding after a canvas equal the official _finalize_canvas."""
    eos = data.draw(st.sampled_from((None, 1, [1, 3])))
    pad = data.draw(st.sampled_from((None, 0)))
    before = torch.tensor(data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows))), device="cpu")
    prefix = torch.full((len(rows), 2), 4, dtype=torch.long, device="cpu")
    sequences = torch.cat([prefix, torch.tensor(rows, device="cpu")], dim=1)
    max_length = data.draw(st.sampled_from((6, 10)))
    config = official.DiffusionGemmaGenerationConfig(eos_token_id=eos, pad_token_id=pad)
    from transformers.generation import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList

    criteria = StoppingCriteriaList([MaxLengthCriteria(max_length)] + ([EosTokenCriteria(eos)] if eos is not None
                                                                          else []))
    eos_tensor = None if eos is None else torch.tensor(eos, device="cpu")
    expected, finished = official.DiffusionGemmaGenerationMixin._finalize_canvas(
        sequences.clone(), before.clone(), config, criteria, 4, eos_tensor)
    params = rule.params_from({}, {"eos_token_id": eos, "pad_token_id": pad})
    ours, ours_finished = rule.finalize_canvas(sequences.clone(), before.clone(), 4, max_length, params)
    assert torch.equal(ours, expected) and torch.equal(ours_finished, finished)


# -------------------------------------------------------------------------------------------------------- refusals
import json  # noqa: E402
import sys  # noqa: E402

from veridec.models import random_model  # noqa: E402
from veridec.models.diffusiongemma import (DiffusionGemmaUnavailable, UniformStateModelError,  # noqa: E402
                                           diffusion_gemma_classes, load_diffusiongemma)
from veridec.models.shipped import ASSETS  # noqa: E402

SHIPPED_DG = ASSETS / "diffusiongemma"
BAD_SETTINGS = [
    ({"max_denoising_steps": 0}, "max_denoising_steps must be an integer >= 1"),
    ({"max_new_tokens": -3}, "max_new_tokens must be an integer >= 1"),
    ({"entropy_bound": 0.0}, "entropy_bound must lie in (0, inf)"),
    ({"t_min": -0.1}, "t_min must lie in [0, inf)"),
    ({"t_min": 0.8, "t_max": 0.8}, "t_max must be > t_min"),
    ({"stability_threshold": -1}, "stability_threshold must be an integer >= 0"),
    ({"stability_threshold": 1.5}, "stability_threshold must be an integer >= 0"),
    ({"confidence_threshold": 0.0}, "confidence_threshold must lie in (0, inf)"),
    ({"eos_token_id": 99}, "eos_token_id must lie in [0, 31]"),
    ({"pad_token_id": -1}, "pad_token_id must lie in [0, 31]"),
    ({"max_new_tokens": 10_000}, "exceed the model's max_position_embeddings"),
    ({"cache_implementation": "offloaded"}, "cache_implementation must be one of ['dynamic', 'static']"),
]


@pytest.fixture(scope="module")
def shipped():
    torch.set_num_threads(1)
    return load_diffusiongemma(SHIPPED_DG)


@pytest.mark.parametrize(("settings", "message"), BAD_SETTINGS)
def test_bad_settings_are_refused_by_name(shipped, settings, message):
    """DG7.2: each setting out of range is refused naming it and its range, by both decoders."""
    for decode in (reference.generate, optimized.generate):
        with pytest.raises(ValueError, match=re_escape(message)):
            decode(shipped, torch.tensor([[2, 5]]), **settings)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_a_mask_predictor_is_refused_by_the_uniform_state_decoders():
    """DG1.4: a mask predictor (LLaDA layout) handed to this sampler is refused, naming what it is."""
    for decode in (reference.generate, optimized.generate):
        with pytest.raises(ValueError, match="must be a uniform-state model"):
            decode(random_model("llada"), torch.tensor([[2, 5]]))


def test_a_diffusiongemma_model_is_refused_by_the_mask_samplers(shipped):
    """DG1.4: the mask samplers read ``model.special`` first; a uniform-state model refuses it by name."""
    from veridec.reference import dream, llada

    with pytest.raises(UniformStateModelError, match="uniform-state model"):
        llada.generate(shipped, torch.tensor([[2, 5]]), steps=2, gen_length=2, block_length=2)
    with pytest.raises(UniformStateModelError, match="no mask token"):
        dream.diffusion_generate(shipped, torch.tensor([[2, 5]]), max_new_tokens=2, steps=2)


def test_bad_prompts_are_refused(shipped):
    for prompt, mask, message in [(torch.tensor([[2, 99]]), None, "token ids must lie in"),
                                  (torch.tensor([2, 5]), None, "LongTensor \\[B, P\\]"),
                                  (torch.tensor([[2, 5]]), torch.tensor([[0, 0]]), "a real token in every row")]:
        with pytest.raises(ValueError, match=message):
            optimized.generate(shipped, prompt, mask)


def test_a_checkpoint_without_the_diffusiongemma_fields_is_refused(tmp_path):
    """DG1.2: config.json must say model_type diffusion_gemma and set canvas_length; weights must be safetensors."""
    config = json.loads((SHIPPED_DG / "config.json").read_text())
    for change, message in [({"model_type": "llada"}, "model_type must be 'diffusion_gemma'"),
                            ({"canvas_length": None}, "canvas_length must be an integer >= 1")]:
        folder = tmp_path / message[:5]
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(ValueError, match=message):
            load_diffusiongemma(folder)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        load_diffusiongemma(tmp_path / "empty")


def test_a_generation_config_with_bad_fields_is_refused(tmp_path, shipped):
    """DG7.1-DG7.2: the checkpoint's generation config is read like the call's settings and refused alike."""
    shipped.generation = {**shipped.generation, "sampler_config": {"entropy_bound": -1.0}}
    try:
        with pytest.raises(ValueError, match="entropy_bound must lie in"):
            optimized.generate(shipped, torch.tensor([[2, 5]]))
    finally:
        shipped.generation = json.loads((SHIPPED_DG / "generation_config.json").read_text())


def test_a_transformers_without_diffusiongemma_is_named(monkeypatch):
    """DG1.1: the error names the version needed and the installed one."""
    monkeypatch.setitem(sys.modules, "transformers.models.diffusion_gemma", None)
    with pytest.raises(DiffusionGemmaUnavailable, match="needs transformers >= 5.24"):
        diffusion_gemma_classes()


def test_every_test_the_spec_names_exists():
    """spec/diffusiongemma.md: each clause's named test is a function of the named file."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    named = set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", (root / "spec" / "diffusiongemma.md").read_text()))
    assert len(named) >= 20
    missing = [f"{f}::{t}" for f, t in named if f"def {t}(" not in (root / f).read_text()]
    assert not missing, missing


def test_the_official_defects_still_raise(shipped):
    """DG9.3, DG9.6, DG9.8: transformers' generate fails as the spec types it (a fixed release fails this test)."""
    ids, kwargs = torch.tensor([[2, 5], [0, 2]]), dict(max_new_tokens=16, max_denoising_steps=1)
    with pytest.raises(AttributeError, match="has no attribute 'shape'"):  # DG9.8
        shipped.hf.generate(ids[:1], attention_mask=None, **kwargs)
    with pytest.raises(AttributeError, match="no attribute 'entropy_bound'"):  # DG9.6
        shipped.hf.generate(ids[:1], stability_threshold=-1, **kwargs)
    eager = load_diffusiongemma(SHIPPED_DG)
    eager.hf.config._attn_implementation = "eager"
    eager.hf.config.text_config._attn_implementation = "eager"
    with pytest.raises(TypeError, match="floating point input type"):  # DG9.3
        eager.hf.generate(ids, attention_mask=torch.tensor([[1, 1], [0, 1]]), **kwargs)


# ------------------------------------------------------------------------------------------------- batch rows
SAMPLED = dict(max_denoising_steps=8, confidence_threshold=0.05)


def _row_one(decode, model, first_row, seed):
    """Row 1's generation (trailing PAD dropped) in a batch whose row 0 is ``first_row``."""
    torch.manual_seed(seed)
    row = decode(model, torch.tensor([first_row, [2, 9, 10, 11]], device="cpu"), **SAMPLED).canvas[1].tolist()
    while row and row[-1] == 0:
        row.pop()
    return row


def test_a_row_does_not_depend_on_another_rows_tokens(shipped, monkeypatch):
    """DG6.4: in a batch of rows of one length, a row's draws keep their places in the stream whatever the other
    rows hold (DG3.3), so changing row 0's prompt leaves row 1's sampled decode as it was (the rule is shared, so
    the cached decoder stands for both). Negative control: the stop test of row 0 applied to every row moves row 1
    (on seed 5 of these)."""
    decode, seeds = optimized.generate, range(6)
    assert all(_row_one(decode, shipped, [2, 5, 6, 7], s) == _row_one(decode, shipped, [2, 13, 14, 15], s)
               for s in seeds)
    original = rule.stop_test
    monkeypatch.setattr(rule, "stop_test", lambda state, argmax, processed, p: (
        lambda out: (out[0][:1].expand_as(out[0]), out[1]))(original(state, argmax, processed, p)))
    assert any(_row_one(decode, shipped, [2, 5, 6, 7], s) != _row_one(decode, shipped, [2, 13, 14, 15], s)
               for s in seeds)


SAME_LENGTH = [[2, 5, 6, 7], [2, 13, 14, 15], [2, 9, 10, 11]]  # rows of one length: no padding, no rounding


def _row_decode(out, row: int, width: int) -> tuple[list[int], list[tuple]]:
    """A row's generation (trailing PAD dropped) and its events (kind, own step, position, old, new) before
    ``width`` (a finished row runs on, padded, while another row is unfinished: DG6.4)."""
    tokens = out.canvas[row].tolist()
    while tokens and tokens[-1] == 0:
        tokens.pop()
    return tokens, [(e.kind, e.step, e.position, e.old, e.new) for e in out.trace.events
                    if e.row == row and e.position < width]


def _batch_against_alone(decode, model, seed: int, generators) -> list[bool]:
    """Per row: does the batch (``generators(seed, rows)``) decode the row as it decodes alone (seed + row)?"""
    batch = decode(model, torch.tensor(SAME_LENGTH, device="cpu"), generator=generators(seed, len(SAME_LENGTH)),
                   max_new_tokens=32, **SAMPLED)
    alone = [decode(model, torch.tensor([row], device="cpu"), generator=torch.Generator().manual_seed(seed + b),
                    max_new_tokens=32, **SAMPLED) for b, row in enumerate(SAME_LENGTH)]
    return [_row_decode(batch, b, out.canvas.shape[1]) == _row_decode(out, 0, out.canvas.shape[1])
            for b, out in enumerate(alone)]


def test_per_row_generators_make_a_batch_row_its_lone_decode(shipped):
    """DG6.5: with one generator per row (seeded seed + row) every row of a batch decodes as it does alone with
    its generator, events and tokens, in both decoders (rows finish at different steps and canvases). Negative
    control: one shared stream (seeded as row 0's) moves some row (DG6.4: equal only in law)."""
    per_row = lambda seed, rows: [torch.Generator().manual_seed(seed + b) for b in range(rows)]  # noqa: E731
    one = lambda seed, rows: torch.Generator().manual_seed(seed)  # noqa: E731
    for decode in (reference.generate, optimized.generate):
        assert all(all(_batch_against_alone(decode, shipped, seed, per_row)) for seed in range(3))
    assert not all(all(_batch_against_alone(optimized.generate, shipped, seed, one)) for seed in range(3))


@pytest.mark.parametrize("live", [[True, False, True], [False, True, False]])
def test_a_stopped_row_draws_no_noise(live):
    """DG6.5: with one generator per row, a live row draws its canvas's noise ``randint(0, V, (L,))`` from its own
    generator and a row stopped within the canvas draws nothing: its noise is zeros and its generator is where it
    was (its stream stays in step with its lone decode)."""
    generators = [torch.Generator().manual_seed(10 + b) for b in range(3)]
    noise = rule.draw_noise((3, 6), 9, generators, "cpu", torch.tensor(live))
    for b, is_live in enumerate(live):
        fresh = torch.Generator().manual_seed(10 + b)
        own = torch.randint(0, 9, (6,), generator=fresh) if is_live else torch.zeros(6, dtype=torch.long)
        assert torch.equal(noise[b], own) and torch.equal(generators[b].get_state(), fresh.get_state())


def test_bad_generator_lists_are_refused(shipped):
    """DG6.5: a list of generators needs one per row, each a torch.Generator; refused by name in both decoders."""
    prompt = torch.tensor(SAME_LENGTH[:2], device="cpu")
    for decode in (reference.generate, optimized.generate):
        with pytest.raises(ValueError, match=r"generator: a list of generators needs one per prompt row \(2\), got 1"):
            decode(shipped, prompt, generator=[torch.Generator()])
        with pytest.raises(ValueError, match=r"generator: a list of generators needs one per prompt row \(2\), got 3"):
            decode(shipped, prompt, generator=[torch.Generator() for _ in range(3)])
        with pytest.raises(ValueError, match=r"generator\[1\] must be a torch.Generator"):
            decode(shipped, prompt, generator=(torch.Generator(), 7))


def test_the_benchmark_checks_outputs_before_timing(shipped):
    """DG8.1 live, tools/diffusiongemma_bench.py: both decoders equal transformers' generate run live on the shipped
    model (measure refuses to time otherwise), and the reference computes more query positions than the cached
    decoder."""
    from tools.diffusiongemma_bench import measure

    prompt = torch.tensor([[2, 5, 6, 7]], device="cpu")
    result = measure(shipped, prompt, 16, repeats=1)
    assert result["ratios"]["reference_over_cached_queries"] > 1
    assert result["finished_tokens"] == 16


def test_the_tiny_checkpoint_writer_round_trips(tmp_path):
    """DG1.2: write_tiny_diffusiongemma writes a folder load_diffusiongemma reads back to the same model: every
    weight bit for bit, the canvas length, the generation config."""
    from veridec.models.diffusiongemma import write_tiny_diffusiongemma

    generation = {"max_denoising_steps": 3, "eos_token_id": 1}
    folder = write_tiny_diffusiongemma(tmp_path / "tiny", seed=3, canvas_length=8, generation=generation)
    loaded, built = load_diffusiongemma(folder), random_diffusiongemma(seed=3, canvas_length=8)
    assert loaded.canvas_length == 8 and loaded.generation == generation
    ours, theirs = built.hf.state_dict(), loaded.hf.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert not torch.equal(ours["lm_head.weight"], random_diffusiongemma(seed=4).hf.state_dict()["lm_head.weight"])
