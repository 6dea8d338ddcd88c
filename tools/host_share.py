"""Host share of a decode step (issue 26): how much of an optimized Fast-dLLM decode is the model's forwards,
and how much the work around them (the rule, the trace's margins, the logit checks), before and after the cut.

    python -m tools.host_share --out benchmarks                  # benchmarks/host-share.json and .md (~10 min)
    python -m tools.host_share --models default --repeats 1      # a quick look, printed only
    /tmp/golden-venv/bin/python -m tools.host_share --fastdllm /tmp/official/fastdllm/llada \
        --source "NVlabs/Fast-dLLM 24cc59e llada/" --out benchmarks     # and the official code, same run

Configurations: Fast-dLLM's threshold rule (0.9) on the optimized decoders with cache none, prefix and dual;
prompt 64 (random tokens), gen 256, block 32, batch 1, float32, one thread; on the shipped default model and
on a random LLaDA-layout model of 4 layers, hidden 512 (8 heads, no K/V grouping), MLP 1376, vocab 8192.
Each decode is timed whole (wall clock) and in its model calls (a proxy around the model times every full,
prefill and cached forward); the rest of the decode is the host share: ``take_step`` (the rule, the trace,
the checks; timed apart) and the loop around it.

Two variants run alternately in one process, so their ratio holds on a loaded machine:
- ``before``: the step as of f53ad8f, kept below: the finiteness check (two passes over the whole window's
  logits: ``veridec.decoding.check_logits`` without ``where=``, unchanged since), the proposal and the float64
  softmax over the whole window (a no-cache window is the canvas, a prefix window runs to its end), the
  trace's top-2 margins over the whole window, host reads per row and per committed position; its forwards
  compute the whole window's logits (``narrow_logits=False``);
- ``after``: the shipped step (``veridec.optimized.parallel.take_step``): the columns from the first candidate
  to the block's end only, the finiteness check fused into the step's softmax, margins of the committed
  positions only, one host read for the ranking and one for the trace; and the shipped forwards, which compute
  those columns' logits only (narrowed logits, spec/parallel.md P11).
Both must record the same trace (tokens, commit order, confidences, margins, gaps, counters): the tool exits 1
otherwise. Speeds follow ``veridec.throughput`` (tokens to the first EOS per second, with calls, device, dtype
and batch). ``--fastdllm`` (the official NVlabs/Fast-dLLM llada/ folder, in an environment where it imports:
docs/maintainers.md) also times the official ``generate`` / ``generate_with_prefix_cache`` /
``generate_with_dual_cache`` on the same weights in the same alternation (its model built as
tools/gpu_bench.py builds it; veridec runs ``loop="june2025"`` against the June 2025 loop so the calls agree)
and checks its tokens against veridec's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import veridec.optimized.parallel as loop
import veridec.rules.common as common
import veridec.rules.step as step_module
from veridec.decoding import check_logits
from veridec.files import write_text_atomic
from veridec.models import random_model
from veridec.models.interface import takes_narrow_logits
from veridec.models.shipped import load_model
from veridec.optimized.fastdllm import generate, generate_with_dual_cache, generate_with_prefix_cache
from veridec.rules.parallel import symmetrized_dependency
from veridec.rules.step import parallel_step
from veridec.throughput import device_name, throughput
from veridec.trace import StepRecord, logit_margins

from .gpu_bench import load_official, official_model

SETTINGS = dict(threshold=0.9, gen_length=256, block_length=32, steps=256)
PROMPT_LENGTH = 64
WIDE = dict(num_layers=4, hidden_size=512, num_heads=8, num_kv_heads=8, intermediate_size=1376, vocab_size=8192)
MODELS = {"default": lambda: load_model("default"), "4x512": lambda: random_model("llada", 0, **WIDE)}
DECODERS = {"none": generate, "prefix": generate_with_prefix_cache, "dual": generate_with_dual_cache}


# ------------------------------------------------------------------ the step as of f53ad8f (verbatim)
def ranked_positions_before(ranking: torch.Tensor, selected: torch.Tensor) -> list[list[int]]:
    return [r[s[r]].tolist() for r, s in zip(ranking, selected)]


def record_step_before(trace, block: int, before: torch.Tensor, after: torch.Tensor, mask_id: int,
                       confidence: torch.Tensor, logits: torch.Tensor, order: list[list[int]],
                       record_logits: bool = False, offset: int = 0) -> None:
    margins = logit_margins(logits.float())  # [B, L]
    positions, tokens, confs, margs, gaps, kept_logits = [], [], [], [], [], []
    for row, ranked in enumerate(order):
        committed = [p for p in ranked if before[row, p] == mask_id and after[row, p] != mask_id]
        positions.append([p + offset for p in committed])
        tokens.append(after[row, committed].tolist())
        confs.append(confidence[row, committed].double().tolist())
        margs.append(margins[row, committed].tolist())
        left = (after[row] == mask_id) & torch.isfinite(confidence[row].double())
        weakest = confidence[row, committed].double().min().item() if committed else float("inf")
        strongest_left = confidence[row][left].double().max().item() if left.any() else float("-inf")
        gaps.append(weakest - strongest_left)
        if record_logits:
            kept_logits.append(logits[row, committed].float().tolist())
    trace.steps.append(StepRecord(block, positions, tokens, confs, margs, gaps,
                                  kept_logits if record_logits else None))


def take_step_before(run, x: torch.Tensor, block, step: int, at_start: torch.Tensor, logits: torch.Tensor,
                     attentions, window) -> torch.Tensor:
    check_logits(logits, run.trace.progress, offset=window.start)  # the whole window: no where=, as then
    span = slice(window.start, window.start + logits.shape[1])
    tokens = x[:, span]  # [B, W]
    positions = torch.arange(span.start, span.stop, device=x.device)
    live = loop.masks_in(x, block, run.mask_id).any(dim=1, keepdim=True)  # [B, 1] rows still decoding the block
    candidates = (tokens == run.mask_id) & (positions < block.end)[None] & live
    dependency = symmetrized_dependency(attentions, run.rule, window.rows, window.cols) if run.needs_attention \
        else None
    result = parallel_step(run.rule, logits, tokens, candidates, **run.sampling, offset=window.start,
                           block_step=step, block_masks_at_start=at_start,
                           block_masks=loop.masks_in(x, block, run.mask_id).sum(dim=1), block_length=run.block_length,
                           dependency=dependency, state=run.state)
    record_step_before(run.trace, block.index, tokens, result.x, run.mask_id, result.confidence,
                       result.choice_logits, result.order, run.record_logits, offset=window.start)
    return torch.cat([x[:, :span.start], result.x, x[:, span.stop:]], dim=1)


# ------------------------------------------------------------------ timing
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TimedModel:
    """The model, with the seconds spent in its forwards summed (synchronised on a GPU)."""

    def __init__(self, model):
        self.model, self.seconds = model, 0.0
        self.narrow_logits = takes_narrow_logits(model)  # its forwards pass logit_rows on

    def __getattr__(self, name):
        return getattr(self.model, name)

    def _timed(self, forward, *args, **kwargs):
        sync(self.model.device)
        started = time.perf_counter()
        out = forward(*args, **kwargs)
        sync(self.model.device)
        self.seconds += time.perf_counter() - started
        return out

    def __call__(self, *args, **kwargs):
        return self._timed(self.model, *args, **kwargs)

    def prefill(self, *args, **kwargs):
        return self._timed(self.model.prefill, *args, **kwargs)

    def forward_cached(self, *args, **kwargs):
        return self._timed(self.model.forward_cached, *args, **kwargs)


SHIPPED_STEP, SHIPPED_RANKED = loop.take_step, common.ranked_positions
VARIANTS = {"before": (take_step_before, ranked_positions_before), "after": (SHIPPED_STEP, SHIPPED_RANKED)}


def timed_official(official, cache: str, prompt: torch.Tensor, mask_id: int) -> dict:
    """One decode of the official code: wall seconds, canvas and forward count."""
    generate, model = official
    function = generate.generate if cache == "none" else getattr(generate, f"generate_with_{cache}_cache")
    settings = {key: value for key, value in SETTINGS.items() if key != "loop"}
    sync(prompt.device)
    started = time.perf_counter()
    canvas, calls = function(model, prompt, temperature=0.0, mask_id=mask_id, **settings)
    sync(prompt.device)
    return {"total": time.perf_counter() - started, "canvas": canvas, "calls": int(calls)}


def timed_decode(model, cache: str, prompt: torch.Tensor, variant: str) -> dict:
    """One decode with the step of ``variant``: wall, model and step seconds, its trace and canvas."""
    take_step, ranked = VARIANTS[variant]
    spent = [0.0]

    def timed_step(*args, **kwargs):
        started = time.perf_counter()
        out = take_step(*args, **kwargs)
        sync(prompt.device)
        spent[0] += time.perf_counter() - started
        return out

    timed = TimedModel(model)
    loop.take_step, common.ranked_positions, step_module.ranked_positions = timed_step, ranked, ranked
    try:
        sync(prompt.device)
        started = time.perf_counter()
        settings = {**SETTINGS, "loop": "current"} if cache == "none" else SETTINGS  # the June 2025 loop: cached only
        decoded = DECODERS[cache](timed, prompt, narrow_logits=variant == "after", **settings)
        sync(prompt.device)
        total = time.perf_counter() - started
    finally:
        loop.take_step, common.ranked_positions, step_module.ranked_positions = (SHIPPED_STEP, SHIPPED_RANKED,
                                                                                 SHIPPED_RANKED)
    return {"total": total, "model": timed.seconds, "step": spent[0], "decoded": decoded}


def measure(models: list[str], caches: list[str], repeats: int, fastdllm: Path | None = None,
            source: str | None = None) -> dict:
    rows, same, official_rows = [], {}, []
    loaded = None if fastdllm is None else load_official(fastdllm)
    if loaded is not None and not isinstance(loaded, str):
        SETTINGS["loop"] = "june2025" if loaded[3] == "legacy" else "current"
    for name in models:
        model = MODELS[name]()
        prompt = torch.randint(0, model.special.mask_id, (1, PROMPT_LENGTH),
                               generator=torch.Generator().manual_seed(0), device="cpu").to(model.device)
        DECODERS["dual"](model, prompt, **{**SETTINGS, "gen_length": 32})  # warm-up
        official = None
        if loaded is not None and not isinstance(loaded, str):
            official = (loaded[0], official_model(loaded[1], loaded[2], model))
            timed_official(official, "dual", prompt, model.special.mask_id)  # warm-up
        for cache in caches:
            runs = {variant: [] for variant in VARIANTS}
            theirs = []
            for _ in range(repeats):
                for variant in VARIANTS:  # alternately: a load change hits both
                    runs[variant].append(timed_decode(model, cache, prompt, variant))
                if official is not None:
                    theirs.append(timed_official(official, cache, prompt, model.special.mask_id))
            traces = [runs[variant][0]["decoded"] for variant in VARIANTS]
            same[f"{name}/{cache}"] = (traces[0].trace.to_dict() == traces[1].trace.to_dict()
                                       and torch.equal(traces[0].canvas, traces[1].canvas))
            for variant, measured in runs.items():
                rows.append(summarise(name, cache, variant, measured, model, prompt))
            if theirs:
                official_rows.append(summarise_official(name, cache, theirs, runs["after"], rows[-1], traces[1], model,
                                                        prompt))
            print(json.dumps(rows[-2:] + official_rows[-1:]), flush=True)
    result = {"config": {**SETTINGS, "prompt_length": PROMPT_LENGTH, "batch": 1, "dtype": "float32",
                         "wide_model": WIDE, "repeats": repeats, "threads": torch.get_num_threads(),
                         "torch": torch.__version__, "device": device_name("cpu"),
                         "statistic": "minimum over repeats of each seconds figure"},
              "rows": rows, "same_trace": same}
    if fastdllm is not None:
        result["config"]["official"] = loaded if isinstance(loaded, str) else f"{source or fastdllm} ({loaded[3]} loop)"
        result["official"] = official_rows
    return result


def summarise_official(name: str, cache: str, measured: list[dict], ours: list[dict], after: dict, decoded, model,
                       prompt: torch.Tensor) -> dict:
    """The official decodes against veridec's ``after`` ones: the ratio of the minima, and the range of the
    ratios repeat by repeat (each pair ran back to back, so the range shows how far the load moved them)."""
    total = min(m["total"] for m in measured)
    paired = [theirs["total"] / mine["total"] for theirs, mine in zip(measured, ours)]
    speed = throughput(measured[0]["canvas"], prompt.shape[1], total, model_calls=measured[0]["calls"],
                       eos_id=model.special.eos_id, mask_id=model.special.mask_id, dtype=model.dtype)
    return {"model": name, "cache": cache, "official_s": round(total, 4), "veridec_s": after["total_s"],
            "official_over_veridec": round(total / after["total_s"], 3),
            "paired_range": [round(min(paired), 3), round(max(paired), 3)],
            "same_tokens": bool(torch.equal(measured[0]["canvas"], decoded.canvas)),
            "same_calls": measured[0]["calls"] == decoded.trace.counters.model_calls,
            "throughput": speed.to_dict()}


def summarise(name: str, cache: str, variant: str, measured: list[dict], model, prompt: torch.Tensor) -> dict:
    best = {key: min(m[key] for m in measured) for key in ("total", "model", "step")}  # the least disturbed
    decoded = measured[0]["decoded"]
    calls = decoded.trace.counters.model_calls
    speed = throughput(decoded.canvas, prompt.shape[1], best["total"], model_calls=calls,
                       eos_id=model.special.eos_id, mask_id=model.special.mask_id, dtype=model.dtype)
    rest = best["total"] - best["model"]
    return {"model": name, "cache": cache, "variant": variant, "model_calls": calls,
            "total_s": round(best["total"], 4), "model_s": round(best["model"], 4),
            "step_s": round(best["step"], 4), "loop_s": round(rest - best["step"], 4),
            "host_share": round(rest / best["total"], 4), "step_ms_per_call": round(1e3 * best["step"] / calls, 3),
            "throughput": speed.to_dict()}


def markdown(result: dict) -> str:
    config = result["config"]
    command = "python -m tools.host_share --out benchmarks" + (" --fastdllm OFFICIAL_LLADA" if "official" in config
                                                              else "")
    lines = [f"<!-- {command}; {config['device']}, {config['threads']} thread(s), "
             f"torch {config['torch']}, {config['repeats']} repeat(s), minima; before and after alternate in one "
             "process, so their ratios hold on a shared machine even where the seconds do not -->",
             "# Host share of a decode step (optimized Fast-dLLM, threshold 0.9)", "",
             f"Prompt {config['prompt_length']}, gen {config['gen_length']}, block {config['block_length']}, batch 1, "
             "float32. Host share: the decode's wall time outside the model's forwards (the step: rule, trace, "
             "checks; and the loop), over the decode's wall time. `before`: the step of f53ad8f, whole-window "
             "forwards; `after`: the shipped step and forwards (narrowed logits; the same trace, checked).", "",
             "| model | cache | calls | step ms/call before | after | step cut | host share before | after | "
             "decode s before | after | tokens/s after |", "|---" * 11 + "|"]
    rows = {(r["model"], r["cache"], r["variant"]): r for r in result["rows"]}
    for (name, cache, variant), row in rows.items():
        if variant != "after":
            continue
        old = rows[name, cache, "before"]
        lines.append(f"| {name} | {cache} | {row['model_calls']} | {old['step_ms_per_call']} | "
                     f"{row['step_ms_per_call']} | {old['step_ms_per_call'] / row['step_ms_per_call']:.1f}x | "
                     f"{old['host_share']:.1%} | {row['host_share']:.1%} | {old['total_s']} | {row['total_s']} | "
                     f"{row['throughput']['tokens_per_second']} |")
    lines += ["", "Same trace before and after: " + ", ".join(f"{k} {'yes' if v else 'NO'}"
                                                            for k, v in result["same_trace"].items())]
    if result.get("official"):
        lines += ["", f"## Against the official code ({config['official']}), same weights, same run", "",
                  "Decode seconds (minima over repeats), veridec `after`"
                  + (" with `loop=\"june2025\"`, the official loop's" if config.get("loop") == "june2025" else "")
                  + ".", "",
                  "Paired: the ratio repeat by repeat (lowest, highest).", "",
                  "| model | cache | official s | veridec s | official / veridec | paired | same tokens | same calls |",
                  "|---" * 8 + "|"]
        lines += [f"| {r['model']} | {r['cache']} | {r['official_s']} | {r['veridec_s']} | "
                  f"{r['official_over_veridec']}x | {r['paired_range'][0]}-{r['paired_range'][1]}x | "
                  f"{'yes' if r['same_tokens'] else 'NO'} | "
                  f"{'yes' if r['same_calls'] else 'NO'} |" for r in result["official"]]
    elif "official" in config:
        lines += ["", f"Official code: {config['official']}"]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {sorted(MODELS)}")
    parser.add_argument("--caches", default=",".join(DECODERS), help="comma-separated, of none,prefix,dual")
    parser.add_argument("--repeats", type=int, default=2, help="decodes per variant (the fastest is kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--fastdllm", type=Path, default=None,
                        help="the official llada/ folder: also time the official decoders on the same weights")
    parser.add_argument("--source", default=None, help="where the official files come from (repository commit)")
    parser.add_argument("--out", type=Path, default=None, help="write host-share.json and host-share.md here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    models, caches = args.models.split(","), args.caches.split(",")
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(caches) - set(DECODERS))
    if unknown or args.repeats < 1:
        raise SystemExit(f"unknown models or caches {unknown}, or --repeats < 1")
    torch.set_num_threads(args.threads)
    result = measure(models, caches, args.repeats, args.fastdllm, args.source)
    text = markdown(result)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out / "host-share.json", json.dumps(result, indent=1) + "\n")
        write_text_atomic(args.out / "host-share.md", text)
    return 0 if all(result["same_trace"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
