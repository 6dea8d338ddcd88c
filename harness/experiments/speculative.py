"""Speculative decoding on the default model (``veridec experiment speculative``): seed 001 Tables 2/4/5-shaped.

Every configuration decodes the same held-out corpus prompts one at a time (speculation takes batch size 1).
Columns: tokens per model call, model calls (steps) and query positions per prompt, latency per prompt,
speedups vs vanilla (sequential greedy, no cache) and vs Fast-dLLM threshold 0.9 with the dual cache, whether
the output equals the base decoder's (commit order), and the share of time spent building drafts (Table 5).
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import torch

from veridec.compare import compare_traces
from veridec.files import write_text_atomic
from veridec.models.shipped import load_model
from veridec.optimized.parallel import decode as optimized_decode
from veridec.optimized.speculative import decode as speculative_decode
from veridec.reference.parallel import decode as reference_decode
from veridec.rules.parallel import Threshold, TopK

from ..distributed import Group
from ..records import weights_sha256
from ..units import Unit, run_recorded
from ..workloads import BLOCK, prompts_for, single_prompts

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


def run(out: Path, quick: bool = False, seed: int = 0, quiet: bool = False, group: Group = Group(),
        fresh: bool = False) -> dict | None:
    """The report (rank 0; other ranks of a torchrun: None). Each prompt is a unit (every configuration decodes
    it, so its latencies are measured in one process), recorded in ``out``/speculative.records.jsonl."""
    n, gen = (3, 64) if quick else (8, 128)
    model = load_model("default", dtype=torch.float32)
    meta = {"quick": quick, "seed": seed, "prompts": n, "gen_length": gen, "block_length": BLOCK}
    padded, mask = prompts_for("default", model, n, seed)
    warm, weights = WarmUp(model), weights_sha256(model)
    units = [Unit({"model": "default", "weights": weights, "prompt": i},
                  partial(decode_prompt, model, prompt, gen, warm))
             for i, prompt in enumerate(single_prompts(padded, mask))]
    per_prompt = run_recorded(units, out, "speculative", {"experiment": "speculative", **meta}, group, fresh, quiet)
    if per_prompt is None:
        return None
    report = {**meta, "rows": summarize(per_prompt, n)}
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "speculative.json", json.dumps(report, indent=2))
    write_text_atomic(out / "speculative.md", to_markdown(report))
    return report


class WarmUp:
    """One short decode before a process times its first prompt (allocations and kernels warm up)."""

    def __init__(self, model):
        self.model, self.done = model, False

    def __call__(self, prompt) -> None:
        if not self.done:
            base_decode("vanilla", self.model, prompt, 32)
            self.done = True


def decode_prompt(model, prompt, gen: int, warm: WarmUp) -> dict:
    """Every configuration's decode of one prompt: its counters, seconds, draft seconds and inter-block tokens,
    and (speculative forms) whether it kept its base's commit order and its token match."""
    warm(prompt)
    results, decoded = {}, {}
    for name, base, spec in configurations():
        timings = {}
        start = time.perf_counter()
        if spec is None:
            out = base_decode(name, model, prompt, gen)
        else:
            out = speculative_decode(model, prompt, gen_length=gen, block_length=BLOCK, stats=timings, **spec)
        seconds = time.perf_counter() - start
        decoded[name] = out
        row = {"calls": out.trace.counters.model_calls, "positions": out.trace.counters.query_positions,
               "tokens": out.trace.tokens_committed(), "seconds": seconds,
               "draft_seconds": timings.get("draft_seconds", 0.0), "ahead": timings.get("lookahead_tokens", 0)}
        if spec is not None:
            comparison = compare_traces(decoded[base].trace, out.trace, decoded[base].canvas, out.canvas)
            row |= {"same_commit_order": comparison.same_commit_order, "token_match": comparison.token_match_rate}
        results[name] = row
    return results


def summarize(per_prompt: list[dict], n: int) -> dict:
    """The table's rows from every prompt's results (sums over prompts, then the speedups)."""
    results = {}
    for name, base, spec in configurations():
        each = [prompt[name] for prompt in per_prompt]
        total = lambda field: sum(row[field] for row in each)  # noqa: E731
        seconds = total("seconds")
        results[name] = {"base": base, "tokens_per_call": round(total("tokens") / total("calls"), 3),
                         "model_calls_per_prompt": round(total("calls") / n, 2),
                         "positions_per_prompt": round(total("positions") / n, 1),
                         "latency_s": round(seconds / n, 4),
                         "identical_to_base": all(row["same_commit_order"] for row in each) if spec else None,
                         "token_match_vs_base": round(total("token_match") / n, 4) if spec else None,
                         "inter_block_tokens": total("ahead") if spec else None,
                         "draft_overhead_pct": round(100 * total("draft_seconds") / seconds, 2) if spec else None}
    vanilla, fast = results["vanilla (sequential, no cache)"], results["Fast-dLLM 0.9 (DC)"]
    for row in results.values():
        row["speedup_vs_vanilla"] = round(vanilla["latency_s"] / row["latency_s"], 2)
        row["speedup_vs_fastdllm_dc"] = round(fast["latency_s"] / row["latency_s"], 2)
        row["calls_reduction_vs_base"] = round(results[row["base"]]["model_calls_per_prompt"]
                                               / row["model_calls_per_prompt"], 3) if row["base"] else None
    return results


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
