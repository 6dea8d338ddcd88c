"""DiffusionGemma's encoder cache measured (spec/diffusiongemma.md DG2): the reference (the encoder over the whole
prefix at every step) against the cached decoder (the prompt and each finished canvas encoded once) and
transformers' own ``generate``, in one run on one model: the outputs checked equal first (same seed, same
tokens), then model calls, query positions, wall clock, and tokens per second counted as the tokens of finished
canvases per second of the whole decode (never a per-token latency: a canvas lands at once).

    python -m tools.diffusiongemma_bench --out benchmarks/diffusiongemma   # a random model, hidden 256 (minutes)
    python -m tools.diffusiongemma_bench --tiny                            # the shipped checkpoint (seconds)
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from veridec.files import write_text_atomic
from veridec.models.diffusiongemma import load_shipped_diffusiongemma, random_diffusiongemma
from veridec.optimized.diffusiongemma import generate as cached
from veridec.reference.diffusiongemma import generate as reference

SIZES = dict(vocab_size=4096, hidden_size=256, intermediate_size=512, moe_intermediate_size=256,
             num_hidden_layers=4, layer_types=["sliding_attention"] * 3 + ["full_attention"], sliding_window=64,
             max_position_embeddings=1024, head_dim=64, global_head_dim=64, num_attention_heads=4)
SETTINGS = dict(max_denoising_steps=8, stability_threshold=1, confidence_threshold=0.005)


def _decode(name: str, model, prompt, max_new_tokens: int, repeats: int):
    """(best wall seconds, sequences, decoder calls, query positions or None) of ``repeats`` seeded decodes."""
    best, out, calls, queries = float("inf"), None, None, None
    for _ in range(repeats):
        torch.manual_seed(0)
        start = time.perf_counter()
        if name == "official":
            out = model.hf.generate(prompt, max_new_tokens=max_new_tokens, **SETTINGS).sequences
        else:
            decoded = (reference if name == "reference" else cached)(model, prompt, max_new_tokens=max_new_tokens,
                                                                     **SETTINGS)
            out, counters = decoded.canvas, decoded.trace.counters
            calls, queries = counters.model_calls, counters.query_positions
        best = min(best, time.perf_counter() - start)
    return best, out, calls, queries


def measure(model, prompt, max_new_tokens: int, repeats: int) -> dict:
    rows = {}
    for name in ("official", "cached", "reference"):
        seconds, out, calls, queries = _decode(name, model, prompt, max_new_tokens, repeats)
        rows[name] = {"seconds": seconds, "model_calls": calls, "query_positions": queries, "out": out}
    for name in ("cached", "reference"):
        if not torch.equal(rows[name]["out"], rows["official"]["out"]):
            raise RuntimeError(f"{name}'s tokens differ from the official generate's: nothing is measured")
    tokens = rows["official"]["out"].shape[0] * (rows["official"]["out"].shape[1] - prompt.shape[1])
    for row in rows.values():
        del row["out"]
        row["tokens_per_second"] = tokens / row["seconds"]
    rows["ratios"] = {"reference_over_cached_wall": rows["reference"]["seconds"] / rows["cached"]["seconds"],
                      "official_over_cached_wall": rows["official"]["seconds"] / rows["cached"]["seconds"],
                      "reference_over_cached_queries": rows["reference"]["query_positions"]
                      / rows["cached"]["query_positions"]}
    rows["finished_tokens"] = tokens
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the shipped checkpoint, seconds")
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    model = load_shipped_diffusiongemma() if args.tiny else random_diffusiongemma(seed=0, canvas_length=64,
                                                                                  initializer_range=0.05, **SIZES)
    length = args.max_new_tokens or 4 * model.canvas_length
    prompt = torch.randint(4, model.vocab_size, (1, 32), generator=torch.Generator().manual_seed(0), device="cpu")
    prompt[:, 0] = 2
    result = {"model": "shipped" if args.tiny else SIZES, "canvas_length": model.canvas_length,
              "max_new_tokens": length, "settings": SETTINGS, "prompt_length": prompt.shape[1],
              "torch": torch.__version__, **measure(model, prompt, length, args.repeats)}
    print(json.dumps(result, indent=1, default=str))
    if args.out:
        write_text_atomic(f"{args.out}.json", json.dumps(result, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
