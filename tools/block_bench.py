"""Block diffusion's cache measured (issue 25; spec/block_diffusion.md BD8): the reference (a full block-causal
forward of the canvas up to the current block every step) against the cached decoder (the finished blocks' keys and
values written once) on one random SDAR-layout model, in one run, at each block size: model calls, query positions,
wall clock and tokens per second (``veridec.throughput``), the outputs checked equal first.

    python -m tools.block_bench --out benchmarks/block-diffusion   # gen 256, blocks 4, 8, 32 (a few minutes)
    python -m tools.block_bench --tiny                             # seconds: what tests/test_block_bench.py runs
    python -m tools.block_bench --rule fastdllm --out benchmarks/block-parallel   # a parallel rule inside blocks

``--rule PRESET``: veridec's parallel rule inside blocks (spec/block_diffusion.md BD11) instead of SDAR's sampler.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.models import random_model
from veridec.optimized.block_diffusion import block_diffusion_generate as cached
from veridec.optimized.block_parallel import parallel_generate as cached_parallel
from veridec.reference.block_diffusion import block_diffusion_generate as reference
from veridec.reference.block_diffusion import parallel_generate as reference_parallel
from veridec.rules.presets import PRESETS, preset
from veridec.throughput import Throughput, device_name, generated_tokens

SIZES = dict(num_layers=4, hidden_size=512, num_heads=8, num_kv_heads=8, intermediate_size=1024, vocab_size=8192)
TINY = dict(num_layers=1, hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=32)
SETTINGS = dict(temperature=0.0, remasking_strategy="low_confidence_dynamic", confidence_threshold=0.9)


def measure(decoder, model, prompt, gen_length: int, block_length: int, rule: str | None = None
            ) -> tuple[dict, torch.Tensor]:
    """One decode by ``decoder``: SDAR's sampler (``SETTINGS``, steps = block length) or, with ``rule``, a
    parallel rule inside blocks."""
    settings = dict(rule=preset(rule)) if rule else dict(denoising_steps=block_length, **SETTINGS)
    start = time.perf_counter()
    decoded = decoder(model, prompt, gen_length=gen_length, block_length=block_length, **settings)
    seconds = time.perf_counter() - start
    counters = decoded.trace.counters
    speed = Throughput(generated_tokens(decoded.canvas, prompt.shape[1], model.special.eos_id, model.special.mask_id),
                       seconds, counters.model_calls, device_name(model.device), str(model.dtype).removeprefix(
                           "torch."), prompt.shape[0])
    return {**speed.to_dict(), "query_positions": counters.query_positions,
            "full_forwards": counters.full_forwards}, decoded.canvas


def run(sizes: dict, prompt_length: int, gen_length: int, blocks: list[int], seed: int = 0,
        rule: str | None = None) -> dict:
    model = random_model("sdar", seed, **sizes)
    prompt = torch.randint(0, 90, (1, prompt_length), generator=torch.Generator().manual_seed(seed))
    slow, quick = (reference_parallel, cached_parallel) if rule else (reference, cached)
    measure(quick, model, prompt, block_length=blocks[0], gen_length=blocks[0], rule=rule)  # warm up
    measure(slow, model, prompt, block_length=blocks[0], gen_length=blocks[0], rule=rule)
    rows = []
    for block in blocks:
        ours, slow_canvas = measure(slow, model, prompt, gen_length, block, rule)
        fast, fast_canvas = measure(quick, model, prompt, gen_length, block, rule)
        if not torch.equal(slow_canvas, fast_canvas):
            raise AssertionError(f"block {block}: the cached decoder's output differs from the reference's")
        rows.append({"block_length": block, "reference": ours, "cached": fast,
                     "speedup": round(ours["seconds"] / fast["seconds"], 2),
                     "query_positions_ratio": round(ours["query_positions"] / fast["query_positions"], 2)})
    decoder = {"rule": rule} if rule else {**SETTINGS, "denoising_steps": "block_length"}
    return {"config": {**sizes, "family": "sdar", "prompt_length": prompt_length, "gen_length": gen_length,
                       **decoder, "torch": torch.__version__, "threads": torch.get_num_threads()}, "rows": rows}


def markdown(result: dict) -> str:
    config = result["config"]
    lines = ["# Block diffusion: reference vs cached (`python -m tools.block_bench`)", "",
             f"Random SDAR-layout model ({config['num_layers']} layers, hidden {config['hidden_size']}, vocab "
             f"{config.get('vocab_size', 100)}), prompt {config['prompt_length']}, gen {config['gen_length']}, "
             + (f"the parallel rule `{config['rule']}` inside blocks (BD11); " if "rule" in config else
                "greedy low_confidence_dynamic 0.9, steps = block length; ")
             + f"torch {config['torch']}, "
             f"{config['threads']} thread(s); outputs equal on both paths. Speeds are from one run on a shared "
             "machine: compare the ratios.", "",
             "| block | reference calls | cached calls | query positions (ref / cached) | reference tok/s | "
             "cached tok/s | speedup |", "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        ref, fast = row["reference"], row["cached"]
        lines.append(f"| {row['block_length']} | {ref['model_calls']} | {fast['model_calls']} | "
                     f"{ref['query_positions']} / {fast['query_positions']} ({row['query_positions_ratio']}x) | "
                     f"{ref['tokens_per_second']} | {fast['tokens_per_second']} | {row['speedup']}x |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a tiny model, gen 16, blocks 2 and 4")
    parser.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    parser.add_argument("--rule", choices=sorted(name for name, rule in PRESETS.items()
                                                 if not getattr(rule, "needs_attention", False)), default=None,
                        help="a parallel rule inside blocks (BD11) instead of SDAR's sampler")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    result = run(TINY, 5, 16, [2, 4], rule=args.rule) if args.tiny else run(SIZES, 64, 256, [4, 8, 32],
                                                                                rule=args.rule)
    if args.out:
        write_text_atomic(args.out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
        write_text_atomic(args.out.with_suffix(".md"), markdown(result))
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
