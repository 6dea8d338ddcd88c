"""Decoders on the default model at gen lengths 64/128/256: every case of ``tools.baseline``.

    pytest benchmarks/ --benchmark-only

Each case decodes 4 left-padded corpus prompts once (block 32). ``extra_info`` carries the deterministic
counters (what the CI gate holds against benchmarks/baseline.json), the speed (``veridec.throughput``: tokens
to each row's first EOS per second, with model calls, device, dtype and batch), and speedups measured in this
run: vs the sequential reference, and vs the same decoder's reference (no cache).
"""

import pytest
import torch

from veridec.compare import compare_traces
from tools.baseline import DECODERS, GEN_LENGTHS, PROMPTS, SEED, VARIANTS
from veridec.harness.workloads import BLOCK, prompts_for, row_tokens_per_step, run_variant
from veridec.models.shipped import load_model
from veridec.rules.presets import PRESETS
from veridec.throughput import throughput

SECONDS: dict[tuple[str, str, int], float] = {}  # (decoder, variant, gen) -> wall seconds in this run
REFERENCES: dict[tuple[str, int], object] = {}


@pytest.fixture(scope="module")
def setup():
    model = load_model("default", dtype=torch.float32)
    prompt, mask = prompts_for("default", model, PROMPTS, SEED)
    run_variant(model, "reference", PRESETS["sequential"], prompt, mask, 64, BLOCK)  # warm-up
    return model, prompt, mask


def timed(setup, decoder, variant, gen):
    model, prompt, mask = setup
    out, seconds = run_variant(model, variant, PRESETS[decoder], prompt, mask, gen, BLOCK)
    SECONDS[decoder, variant, gen] = seconds
    return out


@pytest.mark.parametrize("gen", GEN_LENGTHS)
@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_decode(benchmark, setup, variant, decoder, gen):
    if ("sequential", "reference", gen) not in SECONDS:
        timed(setup, "sequential", "reference", gen)
    if variant != "reference" and (decoder, gen) not in REFERENCES:
        REFERENCES[decoder, gen] = timed(setup, decoder, "reference", gen)
    out = benchmark.pedantic(timed, args=(setup, decoder, variant, gen), rounds=1, iterations=1)
    reference = REFERENCES.setdefault((decoder, gen), out)
    seconds = SECONDS[decoder, variant, gen]
    model, prompt, _ = setup
    speed = throughput(out.canvas, prompt.shape[1], seconds, model_calls=out.trace.counters.model_calls,
                       eos_id=model.special.eos_id, mask_id=model.special.mask_id, dtype=model.dtype)
    comparison = compare_traces(reference.trace, out.trace, reference.canvas, out.canvas)
    benchmark.extra_info.update(
        full_forwards=out.trace.counters.full_forwards,
        positions_per_prompt=out.trace.counters.query_positions / PROMPTS,
        tokens_per_step=round(row_tokens_per_step(out.trace), 4),
        token_match=round(comparison.token_match_rate, 4),
        **speed.to_dict(),
        speedup_vs_sequential_reference=round(SECONDS["sequential", "reference", gen] / seconds, 2),
        speedup_vs_own_reference=round(SECONDS[decoder, "reference", gen] / seconds, 2))
