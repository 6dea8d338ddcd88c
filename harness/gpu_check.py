"""The device check: Tier E decoder identities on a device, then per-forward costs of a full-size shape.

    python -m veridec.harness.gpu_check --device cuda --out results/gpu   # on a GPU machine (~2 minutes)
    python -m veridec.harness.gpu_check --device cpu --shape tiny          # the same script, CPU-sized

1. Tier E on the device (float64 tiny models, LLaDA and Dream layouts, every preset): optimized without cache
   == reference (commit order and canvas); one-layer prefix/dual caches == reference; padded batch == rows.
2. Timing on a model of the requested shape with random bf16 weights (``llada-8b``: 32 layers, hidden 4096,
   32 heads, MLP 12288, vocab 126464): one full forward of prompt + gen positions vs one dual-cache block step
   (block queries against the cache), median of repeated, synchronized runs; prints their ratio. Then one
   FastGuide sparse recomputation (two windows of radius 2) vs one full forward at canvas 256 + 128, batch 1
   and 4 (spec/guidance.md GF3).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.models.interface import SpecialTokens
from veridec.models.transformer import BidirectionalTransformer, TransformerConfig
from veridec.optimized.parallel import decode as optimized
from veridec.reference.parallel import decode as reference
from veridec.rules.presets import PRESETS

from .workloads import BLOCK

SHAPES = {
    "llada-8b": dict(vocab_size=126464, hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=32,
                     intermediate_size=12288, rope_theta=500000.0),
    "tiny": dict(vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=96),
}


def tier_e(device: torch.device) -> dict[str, bool]:
    """Every preset on both layouts: the three Tier E identities, on ``device``."""
    results = {}
    sizes = dict(dtype=torch.float64, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)
    for family in ("llada", "dream"):
        two, one = (never_predicts_mask(random_model(family, 0, num_layers=n, **sizes).to(device)) for n in (2, 1))
        prompt = torch.randint(0, 90, (3, 5), generator=torch.Generator().manual_seed(0)).to(device)
        mask = torch.ones_like(prompt)
        mask[1, :3] = 0
        for name, rule in PRESETS.items():
            kw = dict(rule=rule, gen_length=8, block_length=4)
            ref = reference(two, prompt, mask, **kw)
            ok = same(ref, optimized(two, prompt, mask, cache="none", **kw))
            ref1 = reference(one, prompt, mask, **kw)
            caches = ("prefix",) if name.startswith("klass") else ("prefix", "dual")  # P12's KLASS exception
            ok &= all(same(ref1, optimized(one, prompt, mask, cache=c, **kw)) for c in caches)
            alone = optimized(two, prompt[1:2, 3:], cache="dual", **kw)
            ok &= torch.equal(optimized(two, prompt, mask, cache="dual", **kw).canvas[1, 3:], alone.canvas[0])
            results[f"{family}/{name}"] = bool(ok)
    return results


def same(a, b) -> bool:
    return compare_traces(a.trace, b.trace).same_commit_order and torch.equal(a.canvas, b.canvas)


def shaped_model(shape: str, device: torch.device, dtype: torch.dtype) -> BidirectionalTransformer:
    """Random weights built directly on the device (no float64 CPU copy of an 8B model)."""
    cfg = TransformerConfig(**SHAPES[shape])
    special = SpecialTokens(mask_id=cfg.vocab_size - 1, eos_id=cfg.vocab_size - 2, eot_id=cfg.vocab_size - 3,
                            pad_id=cfg.vocab_size - 2)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = BidirectionalTransformer(cfg, special, "llada", 0)
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.02) if param.dim() > 1 else param.fill_(1.0)
    return model.eval()


@torch.no_grad()
def timing(shape: str, device: torch.device, prompt: int, gen: int, block: int, repeats: int) -> dict:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = shaped_model(shape, device, dtype)
    x = torch.randint(0, model.special.mask_id, (1, prompt + gen), device=device)
    _, cache = model.prefill(x)
    positions = torch.arange(prompt, prompt + block, device=device)[None]

    def median_seconds(fn) -> float:
        fn()  # warm-up
        times = []
        for _ in range(repeats):
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    full = median_seconds(lambda: model(x))
    dual = median_seconds(lambda: model.forward_cached(x[:, prompt:prompt + block], positions, cache))
    report = {"shape": shape, "dtype": str(dtype), "prompt": prompt, "gen": gen, "block": block,
              "full_forward_ms": round(1e3 * full, 3), "dual_block_step_ms": round(1e3 * dual, 3),
              "ratio": round(full / dual, 2)}
    for batch in (1, 4):  # FastGuide: one sparse recomputation (two windows of radius 2) vs one full forward
        xb = x[:, :prompt + 128].repeat(batch, 1)  # seed 000's canvas: 256 prompt + 128 generated
        _, cache_b = model.prefill(xb)
        window = torch.cat([torch.arange(prompt + 40, prompt + 45), torch.arange(prompt + 60, prompt + 65)])
        window = window[None].expand(batch, -1).to(device)
        full_b = median_seconds(lambda: model(xb))
        sparse_b = median_seconds(lambda: model.forward_cached(xb.gather(1, window), window, cache_b))
        report[f"fastguide_batch{batch}"] = {"full_forward_ms": round(1e3 * full_b, 3),
                                             "sparse_recomputation_ms": round(1e3 * sparse_b, 3),
                                             "sparse_over_full": round(sparse_b / full_b, 4)}
    return report


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llada-8b")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--gen", type=int, default=256)
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="write gpu_check.json here")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    exact = tier_e(device)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "tier_e": exact, "tier_e_all_pass": all(exact.values()),
              "timing": timing(args.shape, device, args.prompt, args.gen, args.block, args.repeats)}
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    return 0 if report["tier_e_all_pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
