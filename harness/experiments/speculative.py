"""Speculative decoding on the default model (``veridec experiment speculative``): seed 001 Tables 2/4/5-shaped.

Every configuration decodes the same held-out corpus prompts one at a time (speculation takes batch size 1).
Columns: tokens per model call, model calls (steps) and query positions per prompt, latency per prompt,
speedups vs vanilla (sequential greedy, no cache) and vs Fast-dLLM threshold 0.9 with the dual cache, whether
the output equals the base decoder's (commit order), and the share of time spent building drafts (Table 5).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.files import write_text_atomic
from veridec.models.shipped import load_model
from veridec.optimized.parallel import decode as optimized_decode
from veridec.optimized.speculative import decode as speculative_decode
from veridec.reference.parallel import decode as reference_decode
from veridec.rules.parallel import Threshold, TopK

from ..workloads import BLOCK, progress, prompts_for, single_prompts

SEQUENTIAL, THRESHOLD = TopK(1), Threshold(0.9)


def configurations() -> list[tuple[str, str, dict | None]]:
    """(name, base name, speculative arguments or None for a base decoder)."""
    spec = lambda rule, cache, w, d, alt="position": dict(rule=rule, cache=cache, width=w, depth=d,  # noqa: E731
                                                         alternatives=alt)
    return [
        ("vanilla (sequential, no cache)", None, None),
        ("sequential, dual cache", None, None),
        ("Fast-dLLM 0.9 (DC)", None, None),
        ("chain W1D4, no cache", "vanilla (sequential, no cache)", spec(SEQUENTIAL, "none", 1, 4)),
        ("chain W1D4, dual", "sequential, dual cache", spec(SEQUENTIAL, "dual", 1, 4)),
        ("sequential + W3D3, dual", "sequential, dual cache", spec(SEQUENTIAL, "dual", 3, 3)),
        ("Fast-dLLM + intra W1D1(1)", "Fast-dLLM 0.9 (DC)", spec(THRESHOLD, "dual", 1, 1)),
        ("Fast-dLLM + intra W2D2(3)", "Fast-dLLM 0.9 (DC)", spec(THRESHOLD, "dual", 2, 2)),
        ("Fast-dLLM + intra W3D3(6)", "Fast-dLLM 0.9 (DC)", spec(THRESHOLD, "dual", 3, 3)),
        ("Fast-dLLM + intra W2D2(3) token alternatives", "Fast-dLLM 0.9 (DC)", spec(THRESHOLD, "dual", 2, 2, "token")),
        ("Fast-dLLM + inter W2D2(3), 1 draft block", "Fast-dLLM 0.9 (DC)",
         spec(THRESHOLD, "dual", 2, 2) | {"lookahead": 1}),
        ("Fast-dLLM + inter W2D2(3), 2 draft blocks", "Fast-dLLM 0.9 (DC)",
         spec(THRESHOLD, "dual", 2, 2) | {"lookahead": 2}),
    ]


def base_decode(name: str, model, prompt, gen: int):
    kw = dict(gen_length=gen, block_length=BLOCK)
    if name.startswith("vanilla"):
        return reference_decode(model, prompt, rule=SEQUENTIAL, **kw)
    rule = SEQUENTIAL if name.startswith("sequential") else THRESHOLD
    return optimized_decode(model, prompt, rule=rule, cache="dual", **kw)


def run(out: Path, quick: bool = False, seed: int = 0, quiet: bool = False) -> dict:
    n, gen = (3, 64) if quick else (8, 128)
    model = load_model("default", dtype=torch.float32)
    padded, mask = prompts_for("default", model, n, seed)
    prompts = single_prompts(padded, mask)
    base_decode("vanilla", model, prompts[0], 32)  # warm-up
    results, traces, canvases = {}, {}, {}
    for name, base, spec in progress(configurations(), "speculative", quiet):
        calls = positions = tokens = ahead = 0
        seconds = draft = 0.0
        exact, matches = True, []
        for i, prompt in enumerate(prompts):
            timings = {}
            start = time.perf_counter()
            if spec is None:
                out_i = base_decode(name, model, prompt, gen)
            else:
                out_i = speculative_decode(model, prompt, gen_length=gen, block_length=BLOCK, stats=timings, **spec)
                comparison = compare_traces(traces[base, i], out_i.trace, canvases[base, i], out_i.canvas)
                exact &= comparison.same_commit_order
                matches.append(comparison.token_match_rate)
            seconds += time.perf_counter() - start
            draft += timings.get("draft_seconds", 0.0)
            ahead += timings.get("lookahead_tokens", 0)
            traces[name, i], canvases[name, i] = out_i.trace, out_i.canvas
            calls += out_i.trace.counters.model_calls
            positions += out_i.trace.counters.query_positions
            tokens += out_i.trace.tokens_committed()
        results[name] = {"base": base, "tokens_per_call": round(tokens / calls, 3),
                         "model_calls_per_prompt": round(calls / n, 2),
                         "positions_per_prompt": round(positions / n, 1), "latency_s": round(seconds / n, 4),
                         "identical_to_base": exact if spec else None,
                         "token_match_vs_base": round(sum(matches) / len(matches), 4) if spec else None,
                         "inter_block_tokens": ahead if spec else None,
                         "draft_overhead_pct": round(100 * draft / seconds, 2) if spec else None}
    vanilla, fast = results["vanilla (sequential, no cache)"], results["Fast-dLLM 0.9 (DC)"]
    for row in results.values():
        row["speedup_vs_vanilla"] = round(vanilla["latency_s"] / row["latency_s"], 2)
        row["speedup_vs_fastdllm_dc"] = round(fast["latency_s"] / row["latency_s"], 2)
        row["calls_reduction_vs_base"] = round(results[row["base"]]["model_calls_per_prompt"]
                                               / row["model_calls_per_prompt"], 3) if row["base"] else None
    report = {"quick": quick, "seed": seed, "prompts": n, "gen_length": gen, "block_length": BLOCK, "rows": results}
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "speculative.json", json.dumps(report, indent=2))
    write_text_atomic(out / "speculative.md", to_markdown(report))
    return report


COLUMNS = ("tokens_per_call", "model_calls_per_prompt", "calls_reduction_vs_base", "positions_per_prompt", "latency_s",
           "speedup_vs_vanilla", "speedup_vs_fastdllm_dc", "identical_to_base", "token_match_vs_base",
           "inter_block_tokens", "draft_overhead_pct")


def to_markdown(report: dict) -> str:
    lines = [f"# Speculative decoding ({report['prompts']} prompts one by one, gen {report['gen_length']}, block "
             f"{report['block_length']}, seed {report['seed']}{', quick' if report['quick'] else ''})", "",
             "| configuration | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, row in report["rows"].items():
        lines.append(f"| {name} | " + " | ".join("-" if row[c] is None else str(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"
