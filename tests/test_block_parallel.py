"""veridec's parallel rules inside blocks of a block-diffusion model (spec/block_diffusion.md BD11): the cached,
batched decoder against the reference row by row, the one-block case against spec/parallel.md's reference decoder
(an independent decode loop), a negative control, and the settings refused by name. Tiny random SDAR models."""

import functools

import pytest
import torch

from veridec.models import random_model
from veridec.optimized.block_parallel import parallel_generate as cached_generate
from veridec.reference.block_diffusion import parallel_generate as reference_generate
from veridec.reference.parallel import decode as parallel_decode
from veridec.rules.parallel import KLASS, Quota
from veridec.rules.presets import PRESETS, preset

RULES = sorted(name for name, rule in PRESETS.items() if not getattr(rule, "needs_attention", False))
PROMPT_LENGTHS = (2, 4, 7, 9)  # shorter than a block, whole blocks of 4, neither


@functools.lru_cache(maxsize=None)
def _model(dtype=torch.float64, seed=3):
    return random_model("sdar", seed, dtype=dtype)


def _prompts(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, model.special.mask_id, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def _batch(model, prompts):
    """Left-padded [B, P] prompts and their attention mask."""
    width, pad = max(map(len, prompts)), model.special.pad_id
    x = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])  # [B, P]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # [B, P]
    return x, mask


def _rows_differing(model, prompts, **settings) -> list[int]:
    """Rows of the cached batch whose canvas or commit order differs from the reference decode of that row alone."""
    x, mask = _batch(model, prompts)
    batch = cached_generate(model, x, mask, **settings)
    differing = []
    for row, prompt in enumerate(prompts):
        alone = reference_generate(model, torch.tensor([prompt]), **settings)
        pad = x.shape[1] - len(prompt)
        canvas = batch.canvas[row, pad:pad + alone.canvas.shape[1]]
        order = [[p - pad for p in step.positions[row]] for step in batch.trace.steps if step.positions[row]]
        if not torch.equal(canvas, alone.canvas[0]) or order != [step.positions[0] for step in alone.trace.steps]:
            differing.append(row)
    return differing


@pytest.mark.parametrize("block_length", [4, 8])
@pytest.mark.parametrize("name", RULES)
def test_a_padded_batch_equals_each_row_alone(name, block_length):
    model = _model()
    assert _rows_differing(model, _prompts(model), rule=preset(name), gen_length=12, block_length=block_length) == []


# Rules whose decisions depend on the block's own bookkeeping: a quota schedule over the block's steps (3 steps over
# 4 masks: 2, 1, 1, so a step counted from the decode's start gives a later block 1 at its first step), and
# KLASS with every step stable (a huge KL threshold) needing two stable steps, so its memory of a position decides:
# a memory kept at the wrong canvas positions lets the next block commit everything at its first step.
BOOKKEEPING = {"quota": Quota(steps_per_block=3), "klass-two-stable-steps": KLASS(confidence=0.0, kl_threshold=1e9,
                                                                                    history=2)}


@pytest.mark.parametrize("name", sorted(BOOKKEEPING))
def test_a_batch_keeps_each_blocks_own_bookkeeping(name):
    model = _model()
    assert _rows_differing(model, _prompts(model), rule=BOOKKEEPING[name], gen_length=12, block_length=4) == []


@pytest.mark.parametrize("fn", [cached_generate, reference_generate])
def test_klass_memory_starts_fresh_in_each_block(fn):
    """Each block's first step has no stable position yet: it commits only its top-ranked candidate (fallback)."""
    model = _model()
    decoded = fn(model, torch.tensor([_prompts(model)[1]]), rule=BOOKKEEPING["klass-two-stable-steps"],
                 gen_length=12, block_length=4)
    first_steps = [next(s for s in decoded.trace.steps if s.block == block)
                   for block in sorted({s.block for s in decoded.trace.steps})]
    assert len(first_steps) == 3 and all(len(s.positions[0]) == 1 for s in first_steps)


def test_a_batch_in_float32_equals_each_row_alone():
    model = _model(torch.float32)
    assert _rows_differing(model, _prompts(model, 1), rule=preset("fastdllm"), gen_length=10, block_length=4) == []


def test_a_row_stops_after_the_block_holding_a_stop_id_as_alone():
    model = _model()
    prompts = _prompts(model)
    free = reference_generate(model, torch.tensor([prompts[0]]), rule=preset("conf-hq"), gen_length=16,
                              block_length=4)
    stop = int(free.canvas[0, len(prompts[0])])  # the first generated token
    stopped = reference_generate(model, torch.tensor([prompts[0]]), rule=preset("conf-hq"), gen_length=16,
                                 block_length=4, stopping_criteria_idx=[stop])
    assert stopped.trace.steps[-1].block == 0 and (stopped.canvas[0, 4:] == model.special.mask_id).all()
    assert _rows_differing(model, prompts, rule=preset("conf-hq"), gen_length=16, block_length=4,
                           stopping_criteria_idx=[stop]) == []


def test_one_sampled_row_equals_its_reference_decode():
    model = _model()
    prompt = torch.tensor([_prompts(model)[2]])
    runs = [fn(model, prompt, rule=preset("factor"), gen_length=9, block_length=4, temperature=1.0,
               generator=torch.Generator().manual_seed(5)) for fn in (cached_generate, reference_generate)]
    assert torch.equal(runs[0].canvas, runs[1].canvas)
    assert [s.positions for s in runs[0].trace.steps] == [s.positions for s in runs[1].trace.steps]


def test_one_row_makes_the_block_calls_of_bd5():
    """Prefill of the whole prompt blocks, one call per step, one store per block; queries b per call."""
    model = _model()
    prompt = torch.tensor([_prompts(model)[3]])  # 9 tokens, blocks of 4: two whole prompt blocks
    cached = cached_generate(model, prompt, rule=preset("sequential"), gen_length=7, block_length=4)
    reference = reference_generate(model, prompt, rule=preset("sequential"), gen_length=7, block_length=4)
    blocks = len({step.block for step in reference.trace.steps})
    assert cached.trace.counters.model_calls == 1 + len(reference.trace.steps) + blocks
    assert cached.trace.counters.query_positions == 8 + 4 * (len(reference.trace.steps) + blocks)
    assert cached.trace.counters.full_forwards == 0


@pytest.mark.parametrize("name", ["sequential", "fastdllm", "klass-hq", "eb-hq"])
def test_one_block_is_the_parallel_decode_of_that_canvas(name):
    """P + gen_length = b: one block, attention within it bidirectional; spec/parallel.md's reference decoder
    (its own loop, candidates, bookkeeping) commits the same positions and tokens."""
    model = _model()
    prompt = torch.tensor([_prompts(model)[2]])  # 7 tokens
    blocks = reference_generate(model, prompt, rule=preset(name), gen_length=9, block_length=16)
    plain = parallel_decode(model, prompt, rule=preset(name), gen_length=9, block_length=9)
    assert torch.equal(blocks.canvas, plain.canvas)
    assert [s.positions for s in blocks.trace.steps] == [s.positions for s in plain.trace.steps]


def test_padding_seen_by_real_queries_is_caught():
    """Negative control: forward_blocks without its per-row first positions lets a row's queries see the padding
    blocks before it; the batch-vs-alone comparison must flag a padded row."""
    model = _model()
    original = type(model).forward_blocks

    def leaky(self, tokens, start, cache, block_size, *, store, first_real=None):
        return original(self, tokens, start, cache, block_size, store=store)

    model.forward_blocks = leaky.__get__(model)
    try:
        assert _rows_differing(model, _prompts(model), rule=preset("conf-hq"), gen_length=12, block_length=4)
    finally:
        del model.forward_blocks


@pytest.mark.parametrize("fn", [cached_generate, reference_generate])
@pytest.mark.parametrize("settings, named", [
    (dict(rule=preset("dapd-hq")), "attention"), (dict(rule="fastdllm"), "rule"),
    (dict(rule=preset("fastdllm"), temperature=-1.0), "temperature"),
    (dict(rule=preset("fastdllm"), block_length=0), "block_length"),
    (dict(rule=preset("fastdllm"), gen_length=0), "gen_length"),
    (dict(rule=preset("fastdllm"), remasking="best"), "remasking"),
    (dict(rule=preset("fastdllm"), ties="highest"), "ties"),
    (dict(rule=preset("fastdllm"), stopping_criteria_idx="eos"), "stopping_criteria_idx"),
    (dict(rule=preset("fastdllm"), gen_length=5000), "max_length")])
def test_settings_are_refused_by_name(fn, settings, named):
    with pytest.raises(ValueError, match=named):
        fn(_model(), torch.tensor([[1, 2, 3]]), **settings)


@pytest.mark.parametrize("cache", [None, "none", "dual"])
def test_the_parallel_decoders_refuse_an_unknown_ties_by_name(cache):
    """check_sampling, which the block decoders share with spec/parallel.md's: ties lowest or torch only."""
    from veridec.optimized.parallel import decode as optimized_decode

    model, prompt = _model(), torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="ties"):
        if cache is None:
            parallel_decode(model, prompt, rule=preset("fastdllm"), gen_length=4, block_length=4, ties="highest")
        else:
            optimized_decode(model, prompt, rule=preset("fastdllm"), cache=cache, gen_length=4, block_length=4,
                             ties="highest")
