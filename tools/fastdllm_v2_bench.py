"""Fast-dLLM v2 measured (issue 45; spec/fastdllm_v2.md V2.8, V2.12): on one random model of the fastdllm_v2 layout,
in one run and one process, at each sub-block size: veridec's reference (a full block-causal forward per step), its
prefix-cached decoder and its block cache, and, with ``--official``, the published ``generate`` of the checkpoint's
``modeling.py`` (loaded by ``Fast_dLLM_QwenForCausalLM.from_pretrained`` from the same weights written as a
checkpoint), without and with ``use_block_cache``: model calls, query positions, wall clock, generated tokens per
second. Also the exactness rows: the prefix cache against the reference (tier E: commit order, tokens, largest
logit difference at the commits) and the block cache against the prefix cache (tier A: token match, the drift),
and veridec's outputs against the published ones (greedy, one row, a prompt not of whole blocks).

    python -m tools.fastdllm_v2_bench --out benchmarks/fastdllm-v2            # veridec's decoders (minutes)
    python -m tools.fastdllm_v2_bench --official UPSTREAM --out benchmarks/fastdllm-v2   # with the published loop
    python -m tools.fastdllm_v2_bench --tiny                                   # seconds

``UPSTREAM``: the folder tools/golden/fastdllm_v2.py takes (``modeling.py``, ``configuration.py``); the published
modelling needs transformers 4.53, so run this in that environment (veridec installed there too).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.files import write_text_atomic
from veridec.models import random_model, save_pretrained
from veridec.optimized.fastdllm_v2 import generate as cached
from veridec.reference.fastdllm_v2 import generate as reference
from veridec.throughput import device_name

SIZES = dict(num_layers=4, hidden_size=256, num_heads=8, num_kv_heads=2, intermediate_size=512, vocab_size=4096)
TINY = dict(num_layers=1, hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=32)
SETTINGS = dict(block_size=32, threshold=0.9, temperature=0.0)


def timed(run) -> tuple[object, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def measured(decoded, seconds: float, length: int) -> dict:
    counters = decoded.trace.counters
    tokens = decoded.canvas.shape[1] - length
    return {"model_calls": counters.model_calls, "query_positions": counters.query_positions,
            "seconds": round(seconds, 4), "tokens": tokens, "tokens_per_second": round(tokens / seconds, 2)}


def veridec_row(model, prompt, new: int, small: int) -> tuple[dict, dict]:
    """Reference, prefix cache and block cache at sub-block size ``small``; their rows and canvases."""
    settings = dict(max_new_tokens=new, small_block_size=small, stop_token=model.vocab_size - 1, **SETTINGS)
    slow, slow_s = timed(lambda: reference(model, prompt, record_logits=True, **settings))
    fast, fast_s = timed(lambda: cached(model, prompt, record_logits=True, **settings))
    block, block_s = timed(lambda: cached(model, prompt, use_block_cache=True, **settings))
    exact = compare_traces(slow.trace, fast.trace, slow.canvas, fast.canvas)
    drift = compare_traces(fast.trace, block.trace, fast.canvas, block.canvas)
    length = prompt.shape[1]
    row = {"small_block_size": small, "reference": measured(slow, slow_s, length),
           "prefix_cache": measured(fast, fast_s, length), "block_cache": measured(block, block_s, length),
           "exactness": {"prefix_vs_reference": {"tier": "E", "commit_order_match": exact.commit_order_match_rate,
                                                  "token_match": exact.token_match_rate,
                                                  "max_logit_error": exact.max_logit_error},
                         "block_vs_prefix": {"tier": "A", "commit_order_match": drift.commit_order_match_rate,
                                              "token_match": drift.token_match_rate}}}
    return row, {"prefix_cache": fast.canvas, "block_cache": block.canvas}


def published_rows(official: Path, model, prompt, new: int, small: int, canvases: dict) -> dict:
    """The published generate on the same weights, without and with its block cache: calls (forward counted),
    query positions (the widths fed), seconds, tokens/s, and whether its tokens equal veridec's."""
    from tools.golden.fastdllm_v2 import Calls, load_official, load_official_model

    with tempfile.TemporaryDirectory() as folder:
        save_pretrained(model, folder)
        published = load_official_model(load_official(official), Path(folder)).float()
    found = {}
    for name, block_cache in (("published", False), ("published_block_cache", True)):
        calls = Calls(published)
        with torch.no_grad():
            out, seconds = timed(lambda: published.generate(  # noqa: B023 - called at once
                prompt, max_new_tokens=new, mask_id=model.special.mask_id, small_block_size=small,
                stop_token=model.vocab_size - 1, use_block_cache=block_cache, **SETTINGS))
        calls.remove()
        widths = [int(call[1:]) for call in calls.calls]
        tokens = out.shape[1] - prompt.shape[1]
        ours = canvases["block_cache" if block_cache else "prefix_cache"]
        found[name] = {"model_calls": len(widths), "query_positions": sum(widths) * prompt.shape[0],
                       "seconds": round(seconds, 4), "tokens": tokens, "tokens_per_second": round(tokens / seconds, 2),
                       "tokens_equal_veridec": bool(torch.equal(out, ours[:, :out.shape[1]]))}
    return found


def run(sizes: dict, prompt_length: int, new: int, smalls, official: Path | None) -> dict:
    torch.manual_seed(0)
    model = random_model("fastdllm_v2", seed=0, **sizes)
    with torch.no_grad():
        head = model.embed.weight if model.lm_head is None else model.lm_head.weight  # [V, hidden]
        head.mul_(30.0)  # confident enough that a step often commits several tokens at threshold 0.9
        head[model.vocab_size - 1] = 0  # the stop token's logit 0: never the argmax, the decodes run to the end
    prompt = torch.randint(0, 90, (1, prompt_length), generator=torch.Generator().manual_seed(1))
    veridec_row(model, prompt[:, :3], SETTINGS["block_size"], 8)  # warm-up: torch's first calls are slow
    rows = []
    for small in smalls:
        row, canvases = veridec_row(model, prompt, new, small)
        if official is not None:
            row.update(published_rows(official, model, prompt, new, small, canvases))
        rows.append(row)
    return {"config": {**sizes, "prompt_length": prompt_length, "max_new_tokens": new, **SETTINGS,
                       "torch": torch.__version__, "threads": torch.get_num_threads(),
                       "device": device_name(model.device), "dtype": str(model.dtype)}, "rows": rows}


def markdown(report: dict) -> str:
    lines = ["# Fast-dLLM v2: reference, prefix cache, block cache and the published generate", "",
             f"Config: `{json.dumps(report['config'])}` (`python -m tools.fastdllm_v2_bench`).", "",
             "| sub-block | decoder | model calls | query positions | seconds | tokens/s | note |",
             "|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        exactness = row["exactness"]
        notes = {"prefix_cache": f"tier E vs reference: {exactness['prefix_vs_reference']}",
                 "block_cache": f"tier A vs prefix cache: {exactness['block_vs_prefix']}"}
        for name in ("reference", "prefix_cache", "block_cache", "published", "published_block_cache"):
            if name in row:
                m = row[name]
                note = notes.get(name, f"tokens equal veridec's: {m['tokens_equal_veridec']}" if "published" in name
                                 else "")
                lines.append(f"| {row['small_block_size']} | {name} | {m['model_calls']} | {m['query_positions']} | "
                             f"{m['seconds']} | {m['tokens_per_second']} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", type=Path, default=None, help="the published modeling.py's folder")
    parser.add_argument("--out", type=Path, default=None, help="writes OUT.json and OUT.md")
    parser.add_argument("--tiny", action="store_true", help="a one-layer model, one sub-block size: seconds")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report = run(TINY, 10, 32, (8,), args.official) if args.tiny else \
        run(SIZES, 40, 128, (4, 8, 16, 32), args.official)
    if args.out is not None:
        write_text_atomic(args.out.with_suffix(".json"), json.dumps(report, indent=2) + "\n")
        write_text_atomic(args.out.with_suffix(".md"), markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
