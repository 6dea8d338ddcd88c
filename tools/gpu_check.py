"""The device check: Tier E decoder identities on a device, then per-forward costs of a full-size shape.

    python -m tools.gpu_check --device cuda --out results/gpu   # on a GPU machine (~3 minutes)
    python -m tools.gpu_check --device cpu --shape tiny          # the same script, CPU-sized

1. Tier E on the device (float64 tiny models, LLaDA and Dream layouts, every preset): optimized without cache
   == reference (commit order and canvas); one-layer prefix/dual caches == reference; padded batch == rows.
   Speculative decoding (SP3) == its base decoder, without cache and with the dual cache; FastGuide with windows
   covering the canvas == exact recomputation (GF4), greedy and sampled with a generator on the device.
   Then the same float64 decodes on the CPU and on the device: the commit orders agree (reported; a near tie
   within the two devices' rounding could part them, so this is a count, not a gate). Then ``veridec check`` on
   the device (a checkout's examples/): the from-scratch Fast-dLLM and Dream decoders pass tier E, a broken
   one is caught; tier S passes the Dream sampler (sampled on the device) and catches a law-changing variant.
2. The bf16 tolerance path at LLaDA-8B's widths (2 layers, random weights): the bf16 forward against the float32
   forward of the same weights on the device gives the measured tolerance for two bf16 computations
   (numerics.tolerance); a dual-cache block step in bf16 must stay within it of the bf16 full forward (a gate).
   Also reported: how many positions' top-1 margin exceeds the error and how many argmaxes agree. (Measured
   here only: ``veridec verify`` still measures rounding against a float64 copy.)
3. Timing on a model of the requested shape with random bf16 weights (``llada-8b``: 32 layers, hidden 4096,
   32 heads, MLP 12288, vocab 126464): one full forward of prompt + gen positions vs one dual-cache block step
   (block queries against the cache), median of repeated, synchronized runs; prints their ratio. Then one
   FastGuide sparse recomputation (two windows of radius 2) vs one full forward at canvas 256 + 128, batch 1
   and 4 (spec/guidance.md GF3). ``--compile reduce-overhead`` also times the dual block step under
   ``torch.compile(fullgraph=True)`` (CUDA graphs; spec/models.md MC7), or reports why it did not compile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.files import write_text_atomic
from veridec.guidance import GuidanceParams, LinearReward
from veridec.guidance.fastguide import FastGuideParams
from veridec.models import random_model
from veridec.models.interface import SpecialTokens
from veridec.models.tiny import never_predicts_mask
from veridec.models.transformer import BidirectionalTransformer, TransformerConfig
from veridec.numerics import max_abs, tolerance
from veridec.optimized.fastguide import generate as fastguide_sparse
from veridec.optimized.parallel import decode as optimized
from veridec.optimized.speculative import decode as speculative
from veridec.reference.fastguide import generate as fastguide_exact
from veridec.reference.parallel import decode as reference
from veridec.rules.parallel import LocalLeap, Threshold, TopK
from veridec.rules.presets import PRESETS

from veridec.harness.workloads import BLOCK

SHAPES = {
    "llada-8b": dict(vocab_size=126464, hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=32,
                     intermediate_size=12288, rope_theta=500000.0),
    "llada-8b-2-layers": dict(vocab_size=126464, hidden_size=4096, num_layers=2, num_heads=32, num_kv_heads=32,
                              intermediate_size=12288, rope_theta=500000.0),
    "tiny": dict(vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=96),
}


def tier_e(device: torch.device) -> dict[str, bool]:
    """Every preset on both layouts: the three Tier E identities, on ``device``."""
    results = {}
    for layout in ("llada", "dream"):
        two, one = (never_predicts_mask(random_model(layout, 0, num_layers=n, **SIZES).to(device)) for n in (2, 1))
        prompt = torch.randint(0, 90, (3, 5), generator=torch.Generator().manual_seed(0), device="cpu").to(device)
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
            results[f"{layout}/{name}"] = bool(ok)
    return results


SIZES = dict(dtype=torch.float64, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)


def tier_e_speculative(device: torch.device) -> dict[str, bool]:
    """SP3 on the device: a 2x3 draft tree reproduces its base decoder (reference / dual cache) exactly."""
    results = {}
    for layout in ("llada", "dream"):
        model = random_model(layout, 1, num_layers=2, **SIZES).to(device)
        prompt = torch.randint(0, 90, (1, 5), generator=torch.Generator().manual_seed(1), device="cpu").to(device)
        for rule in (TopK(1), Threshold(0.1), LocalLeap(0.2, 2, 0.05)):
            kw = dict(rule=rule, gen_length=12, block_length=6)
            for cache, base in (("none", reference(model, prompt, **kw)),
                                ("dual", optimized(model, prompt, cache="dual", **kw))):
                spec = speculative(model, prompt, cache=cache, width=2, depth=3, **kw)
                results[f"speculative/{layout}/{cache}/{rule.name}"] = same(base, spec)
    return results


def tier_e_fastguide(device: torch.device) -> dict[str, bool]:
    """GF4 on the device: windows covering the canvas make sparse recomputation exact, greedy and sampled."""
    results = {}
    for layout in ("llada", "dream"):
        model = random_model(layout, 2, num_layers=2, **SIZES).to(device)
        g = torch.Generator().manual_seed(2)
        weights = torch.randn(model.vocab_size, 6, generator=g, dtype=torch.float64, device="cpu")  # [V, 6]
        reward = LinearReward(weights.to(device),
                              torch.randn(6, generator=g, dtype=torch.float64, device="cpu").to(device))
        prompt = torch.randint(0, 90, (2, 4), generator=g, device="cpu").to(device)
        for greedy in (True, False):
            kw = dict(gen_length=8, params=FastGuideParams(k=3, tau=0.02, window=12, greedy=greedy),
                      guidance=GuidanceParams(steps=1))
            runs = [decode(model, prompt, reward, ["", ""], generator=torch.Generator(device).manual_seed(0), **kw)
                    for decode in (fastguide_exact, fastguide_sparse)]
            results[f"fastguide/{layout}/{'greedy' if greedy else 'sampled'}"] = same(*runs)
    return results


def cross_device(device: torch.device) -> dict[str, int]:
    """Every preset's float64 decode on the CPU and on the device: how many agree (commit order and canvas)."""
    agree = total = 0
    for layout in ("llada", "dream"):
        model = never_predicts_mask(random_model(layout, 3, num_layers=2, **SIZES))
        prompt = torch.randint(0, 90, (2, 5), generator=torch.Generator().manual_seed(3), device="cpu")
        on_device = never_predicts_mask(random_model(layout, 3, num_layers=2, **SIZES).to(device))
        for rule in PRESETS.values():
            kw = dict(rule=rule, gen_length=8, block_length=4)
            cpu, dev = reference(model, prompt, **kw), reference(on_device, prompt.to(device), **kw)
            agree += compare_traces(cpu.trace, dev.trace).same_commit_order and torch.equal(cpu.canvas,
                                                                                            dev.canvas.cpu())
            total += 1
    return {"decodes": total, "agree": agree}


@torch.no_grad()
def bf16_rounding(device: torch.device, shape: str, length: int = 512) -> dict:
    """The bf16 forward against the float32 forward of the same weights, on a model of ``shape``; the tolerance
    that measured error gives two bf16 computations (numerics.tolerance), held by a dual-cache block step
    against the bf16 full forward at the block's positions."""
    model = shaped_model(shape, device, torch.float32)
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, model.special.mask_id, (1, length), generator=g, device="cpu").to(device)  # [1, L]
    high = model(x).logits  # [1, L, V] float32
    model = model.to(torch.bfloat16)
    low = model(x).logits  # [1, L, V] bf16
    tol = tolerance(low, high)
    start, end = length // 2, length // 2 + BLOCK
    _, cache = model.prefill(x)
    block = torch.arange(start, end, device=device)[None]  # [1, BLOCK]
    cached = model.forward_cached(x[:, start:end], block, cache).logits  # [1, BLOCK, V]
    top2 = high.topk(2, dim=-1).values  # [1, L, 2]
    decided = top2[..., 0] - top2[..., 1] > 2 * max_abs(low, high)  # where the greedy choice cannot flip
    agree = low.argmax(-1) == high.argmax(-1)
    return {"shape": shape, "positions": length, "max_logit_error": max_abs(low, high),
            "bf16_pair_tolerance": tol, "cached_block_vs_full_error": max_abs(cached, low[:, start:end]),
            "cached_block_within_tolerance": max_abs(cached, low[:, start:end]) <= tol,
            "positions_decided": int(decided.sum()), "argmax_agree": int(agree.sum()),
            "argmax_agree_where_decided": int((agree & decided).sum())}


def foreign_decoders(device: torch.device) -> dict[str, bool] | str:
    """EC1 / ST2 on the device with the examples of a checkout: each entry True when the check says what it
    must (pass or catch); a string when there are no examples (an installed package)."""
    from veridec.testing import check_decoder, load_check_model, load_candidate  # the top floor, imported on demand

    examples = Path(__file__).resolve().parents[1] / "examples"
    if not (examples / "dream_sampler.py").exists():
        return f"skipped: no examples/ beside the package ({examples})"
    load = lambda name: load_candidate(f"{examples}/{name}")
    llada, dream = load_check_model("tiny-llada", device), load_check_model("tiny-dream", device)
    dual = dict(against="fastdllm", cache="dual", model=llada, max_examples=30)
    one_token = {"max_new_tokens": 1, "steps": 1, "alg": "origin", "temperature": 0.7, "top_k": 5}
    return {
        "fastdllm_dual/E": check_decoder(load("fastdllm_dual.py:generate"), **dual).passed,
        "fastdllm_dual_broken.stale_cache/E caught": not check_decoder(
            load("fastdllm_dual_broken.py:stale_cache"), **dual).passed,
        "dream_sampler/E": check_decoder(load("dream_sampler.py:diffusion_generate"), "dream", model=dream,
                                         max_examples=30).passed,
        "dream_sampler/S": check_decoder(load("dream_sampler.py:diffusion_generate"), "dream", model=dream,
                                         tier="S", max_examples=1, samples=300).passed,
        "temperature_applied_twice/S caught": not check_decoder(
            load("dream_sampler_variants.py:temperature_applied_twice"), "dream", model=dream, tier="S",
            max_examples=1, samples=600, case={"prompt": [[79]], "attention_mask": None, "seed": 0,
                                               "settings": one_token}).passed,
    }


def same(a, b) -> bool:
    return compare_traces(a.trace, b.trace).same_commit_order and torch.equal(a.canvas, b.canvas)


def shaped_model(shape: str | dict, device: torch.device, dtype: torch.dtype) -> BidirectionalTransformer:
    """Random weights built directly on the device (no float64 CPU copy of an 8B model); ``shape`` names one
    of SHAPES or gives TransformerConfig's sizes."""
    cfg = TransformerConfig(**(SHAPES[shape] if isinstance(shape, str) else shape))
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
def timing(shape: str, device: torch.device, prompt: int, gen: int, block: int, repeats: int,
           compile_mode: str | None = None) -> dict:
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
    dual = median_seconds(lambda: model.forward_cached(x[:, prompt:prompt + block], positions, cache, check=False))
    report = {"shape": shape, "dtype": str(dtype), "prompt": prompt, "gen": gen, "block": block,
              "full_forward_ms": round(1e3 * full, 3), "dual_block_step_ms": round(1e3 * dual, 3),
              "ratio": round(full / dual, 2)}
    if compile_mode:
        report["compiled_block_step"] = compiled_step(model, x[:, prompt:prompt + block], positions, cache,
                                                      compile_mode, median_seconds)
    for batch in (1, 4):  # FastGuide: one sparse recomputation (two windows of radius 2) vs one full forward
        xb = x[:, :prompt + 128].repeat(batch, 1)  # seed 000's canvas: 256 prompt + 128 generated
        _, cache_b = model.prefill(xb)
        window = torch.cat([torch.arange(prompt + 40, prompt + 45, device=device),
                            torch.arange(prompt + 60, prompt + 65, device=device)])
        window = window[None].expand(batch, -1).to(device)
        full_b = median_seconds(lambda: model(xb))
        sparse_b = median_seconds(lambda: model.forward_cached(xb.gather(1, window), window, cache_b))
        report[f"fastguide_batch{batch}"] = {"full_forward_ms": round(1e3 * full_b, 3),
                                             "sparse_recomputation_ms": round(1e3 * sparse_b, 3),
                                             "sparse_over_full": round(sparse_b / full_b, 4)}
    return report


def compiled_step(model, tokens, positions, cache, mode: str, median_seconds) -> dict:
    """The dual block step under torch.compile(fullgraph=True, mode): compile seconds, step time, and its
    largest difference from the eager step (MC7: one graph, no host synchronisation)."""
    step = torch.compile(lambda t, p: model.forward_cached(t, p, cache, check=False).logits, fullgraph=True,
                         mode=mode)
    try:
        started = time.perf_counter()
        got = step(tokens, positions)
        sync(tokens.device)
        seconds = time.perf_counter() - started
        want = model.forward_cached(tokens, positions, cache, check=False).logits
        return {"mode": mode, "compile_s": round(seconds, 1), "step_ms": round(1e3 * median_seconds(
            lambda: step(tokens, positions)), 3), "max_diff_vs_eager": max_abs(got, want)}
    except Exception as error:  # reported, not hidden: the JSON says why the step did not compile
        return {"mode": mode, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llada-8b")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--gen", type=int, default=256)
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="write gpu_check.json here")
    parser.add_argument("--compile", default=None, choices=["default", "reduce-overhead"],
                        help="also time the dual block step under torch.compile(fullgraph=True, mode=...)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    device = torch.device(args.device)
    exact = {**tier_e(device), **tier_e_speculative(device), **tier_e_fastguide(device)}
    foreign = foreign_decoders(device)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "tier_e": exact, "tier_e_all_pass": all(exact.values()),
              "cross_device": cross_device(device) if device.type != "cpu" else None, "foreign_decoders": foreign}
    print(json.dumps(report, indent=1), flush=True)
    report["bf16_rounding"] = bf16_rounding(device, "llada-8b-2-layers" if args.shape == "llada-8b" else args.shape,
                                            length=min(512, args.prompt + args.gen))
    report["timing"] = timing(args.shape, device, args.prompt, args.gen, args.block, args.repeats, args.compile)
    passed = report["tier_e_all_pass"] and report["bf16_rounding"]["cached_block_within_tolerance"] and (
        isinstance(foreign, str) or all(foreign.values()))
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out / "gpu_check.json", json.dumps(report, indent=1))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
