"""The GPU benchmark (issues 26 and 47): veridec's optimized decoders, eager and compiled, side by side with the
official NVlabs/Fast-dLLM code on the same random weights, at LLaDA-8B's layer shapes in bf16.

    python -m tools.gpu_bench --device cuda --fastdllm /path/to/Fast-dLLM/llada   # benchmarks/gpu/<device>.json
    python -m tools.gpu_bench $(python -m tools.gpu_bench --print-plan) --fastdllm /path/to/Fast-dLLM/llada  # PLAN
    python -m tools.gpu_bench --tiny --device cpu --compile-backend aot_eager     # CPU-sized (tests/test_gpu_bench.py)

One process, in parts; each part runs under its own time limit (``PART_LIMITS_S``, scaled by ``--limit-scale``,
never past what is left of ``--budget-s``) and is written to the JSON as soon as it ends (finished, timed out,
failed or skipped, and said so), so a killed run keeps what it measured:
1. ``setup``: the model (random weights on the device; ``--layers N``: LLaDA-8B's layer shapes, N layers) and a
   logit scale calibrated so that Fast-dLLM (threshold 0.9, dual cache) commits about ``--target-tokens-per-step``
   tokens per model call (default 3: the real LLaDA-8B's, field notes: 114 tok/s at about 3 tokens per forward);
   the head's weights are scaled, so veridec and the official code see the same logits. Target and measured rate
   are reported (random weights at scale 1 commit one token per step: tokens/s then mean nothing).
2. ``official``: the official modelling built with the same weights, moved to the device and asserted there: a
   run whose official side is not on the device stops with one line (the official ``LLaDAModelLM`` ignores a
   ``torch.device`` context).
3. ``forwards``: ms per full forward, refresh and dual-cache block step, eager and compiled (median of
   ``--repeats``), at N layers and at 1 layer (the same weights): per-layer figures and the 32-layer extrapolation,
   against the 32-layer model's weight-bandwidth bound (``--bandwidth-tbs``, default 4.8 TB/s, an H200).
4. ``decodes b{B} g{G}``: per batch and generation length: veridec eager (dual, prefix) and compiled (dual) and
   the official ``generate_with_dual_cache`` / ``generate_with_prefix_cache``; speeds are ``veridec.throughput``;
   tokens and calls are compared with eager veridec's on one device (the CPU); veridec's dual rows also give a
   32-layer estimate (measured + the missing layers' per-layer ms per call).
5. ``block diffusion``: ``block_diffusion_generate`` and ``parallel_generate`` (Fast-dLLM's rule), eager and
   compiled, batch 1. 6. ``speculation``: draft trees against their base, wall clock. 7. ``syncs``: host
   synchronisations per cached step of an eager dual decode on the device (tools/step_gates.py's counter).
8. ``termination``: what the loop's one host read per step costs (a compiled dual decode with and without it).
9. ``profile``: the profiler's top operators of a block step. 10. ``goals`` (issue 47's), each with its ratio.
``--tiny``: a 2-layer model (vocab 128), prompt 8, batches 1 and 2, gen 16, block 8, a few repeats.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import inspect
import json
import re
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch import nn

from tools.gpu_check import SHAPES, shaped_model
from veridec.files import write_text_atomic
from veridec.models.layouts import LAYOUTS
from veridec.optimized.compiled import compiled
from veridec.optimized.fastdllm import generate_with_dual_cache, generate_with_prefix_cache
from veridec.throughput import device_name, throughput

TINY = dict(vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4, intermediate_size=96,
            rope_theta=500000.0)  # LLaDA-8B's attention (no K/V grouping), small
FULL_LAYERS = SHAPES["llada-8b"]["num_layers"]
ROOT = Path(__file__).resolve().parents[1]
THRESHOLD = 0.9
TARGET_TOKENS_PER_STEP = 3.0  # LLaDA-8B + Fast-dLLM (threshold 0.9, block 32): 114 tok/s at ~3 tokens per forward
TREES = {"W2D2": (2, 2), "chain W1D4": (1, 4)}
# seconds per part at the plan's sizes (an H100/H200, 4 layers, compiled with inductor): a part past its limit is
# stopped and recorded as timed out, the run goes on with the next
PART_LIMITS_S = {"setup": 45, "official": 45, "forwards": 120, "decodes": 75, "block diffusion": 60,
                 "speculation": 30, "syncs": 20, "termination": 30, "profile": 20}
# the documented 8-minute plan (docs/gpus.md): one command; tests/test_gpu_bench.py runs it in its --tiny form
PLAN = ["--device", "cuda", "--layers", "4", "--batches", "1,8", "--gens", "256", "--prompt", "256", "--block", "32",
        "--repeats", "10", "--compile-backend", "inductor", "--compile-mode", "reduce-overhead", "--budget-s", "450"]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def full_weight_bytes(model) -> int:
    """The weight bytes of the model with all of LLaDA-8B's layers (its own when it has them, or when tiny)."""
    layers = len(model.layers)
    per_layer = sum(p.numel() * p.element_size() for p in model.layers[0].parameters())
    target = FULL_LAYERS if model.cfg.hidden_size == SHAPES["llada-8b"]["hidden_size"] else layers
    return weight_bytes(model) + (target - layers) * per_layer


# ------------------------------------------------------------------ parts, limits, the JSON
class PartTimeout(Exception):
    pass


class OfficialNotOnDevice(SystemExit):
    """The run stops here: a comparison with an official side on another device means nothing."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raises ``PartTimeout`` in the main thread after ``seconds`` (SIGALRM; Python code is interrupted between
    bytecodes, a single long kernel or compile step at its end)."""
    def expire(signum, frame):
        raise PartTimeout(f"stopped after its limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Report:
    """The run's JSON, rewritten (atomically) after every part; ``part`` runs one under its limit."""

    def __init__(self, path: Path, budget_s: float, scale: float):
        self.path, self.budget_s, self.scale = path, budget_s, scale
        self.started = time.perf_counter()
        self.result: dict = {"config": {}, "parts": {}}

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.started)

    def part(self, name: str, kind: str, run, *needs):
        """Runs ``run()`` under the part's limit; records its result, or why it has none; returns the result
        (None when it has none). ``needs``: earlier results it cannot run without."""
        limit = min(PART_LIMITS_S[kind] * self.scale, self.left())
        began = time.perf_counter()
        if any(need is None for need in needs):
            result, value = {"skipped": "an earlier part it needs has no result"}, None
        elif limit <= 0:
            result, value = {"skipped": f"the run's budget of {self.budget_s:.0f} s (--budget-s) was spent"}, None
        else:
            try:
                with time_limit(limit):
                    value = run()
                result = value
            except PartTimeout as error:
                result, value = {"timed_out": str(error)}, None
            except OfficialNotOnDevice as error:  # recorded, then the run stops with its one line
                self.result["parts"][name] = {"stopped": str(error)}
                self.write()
                raise
            except Exception as error:  # a part that fails is a finding, the others still run
                result, value = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                                 if str(error) else type(error).__name__}, None
        self.result["parts"][name] = {"seconds": round(time.perf_counter() - began, 2), "limit_s": round(limit, 1),
                                      "result": result}
        self.write()
        print(json.dumps({name: self.result["parts"][name]}, default=str)[:2000], flush=True)
        return value

    def write(self) -> None:
        self.result["seconds"] = round(time.perf_counter() - self.started, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps(self.result, indent=1, default=str) + "\n")


# ------------------------------------------------------------------ the model and its logit scale
def build_model(args, device: torch.device, dtype: torch.dtype):
    """Random weights built on the device, with ``--layers`` layers; the mask and EOS rows of the head zeroed
    (their logit 0 lies below the maximum of the others: random weights never propose them)."""
    shape = dict(TINY if args.tiny else SHAPES["llada-8b"])
    if args.layers:
        shape["num_layers"] = args.layers
    model = shaped_model(shape, device, dtype)
    with torch.no_grad():
        head = model.lm_head.weight if model.lm_head is not None else model.embed.weight
        head[model.special.mask_id].zero_()
        head[model.special.eos_id].zero_()
    return model


def scale_head(model, factor: float) -> None:
    with torch.no_grad():
        (model.lm_head.weight if model.lm_head is not None else model.embed.weight).mul_(factor)


def tokens_per_step(model, args) -> float:
    """Tokens per model call of one eager dual-cache decode of two blocks at batch 1 (the prompt of the first
    batch-1 decode)."""
    prompt = random_prompt(model, 1, args.prompt, seed=1000 + args.gens[0])
    out = generate_with_dual_cache(model, prompt, steps=2 * args.block, gen_length=2 * args.block,
                                   block_length=args.block, threshold=THRESHOLD)
    return out.trace.tokens_committed() / out.trace.counters.model_calls


def calibrate(model, target: float, args, rounds: int = 12) -> dict:
    """Scales the head so that Fast-dLLM commits about ``target`` tokens per step (bisection on log scale);
    returns the scale, the target and the measured rate."""
    low, high, applied, rates = 1.0, 1.0, 1.0, {}

    def set_scale(scale: float) -> float:
        nonlocal applied
        scale_head(model, scale / applied)
        applied = scale
        rates[round(scale, 4)] = rate = tokens_per_step(model, args)
        return rate

    while set_scale(high) < target and high < 1e4:
        low, high = high, high * 4
    for _ in range(rounds):
        middle = (low * high) ** 0.5
        if set_scale(middle) < target:
            low = middle
        else:
            high = middle
    best = min(rates, key=lambda s: abs(rates[s] - target))
    set_scale(best)
    return {"target_tokens_per_step": target, "logit_scale": best, "measured_tokens_per_step": round(rates[best], 3),
            "calibration_decode": f"eager dual, batch 1, prompt {args.prompt}, gen {2 * args.block}",
            "tried": {str(s): round(r, 3) for s, r in sorted(rates.items())}}


def random_prompt(model, batch: int, length: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.special.mask_id - 2, (batch, length), generator=generator).to(model.device)


# ------------------------------------------------------------------ the official code
def load_official(folder: Path | None):
    """(generate module, LLaDAModelLM, LLaDAConfig, loop) from the official llada/ folder, or a message saying
    why not."""
    if folder is None:
        return "skipped: no --fastdllm folder given (the official llada/ folder: generate.py, model/)"
    if not (folder / "generate.py").is_file() or not (folder / "model" / "modeling_llada.py").is_file():
        return f"skipped: {folder} has no generate.py and model/modeling_llada.py"
    try:
        from tools.golden.record import _package

        package = _package("veridec_bench_fastdllm", folder)
        modeling = importlib.import_module(f"{package.__name__}.model.modeling_llada")
        configuration = importlib.import_module(f"{package.__name__}.model.configuration_llada")
        sys.modules["model"] = importlib.import_module(f"{package.__name__}.model")
        sys.modules["model.modeling_llada"] = modeling  # the legacy generate.py's own import
        generate = importlib.import_module(f"{package.__name__}.generate")
    except Exception as error:  # an environment without einops or with another transformers: say so
        return f"skipped: the official code does not import here ({type(error).__name__}: {error})"
    loop = "current" if "factor" in inspect.signature(generate.generate_with_dual_cache).parameters else "legacy"
    return generate, modeling.LLaDAModelLM, configuration.LLaDAConfig, loop


def official_model(model_class, config_class, model):
    """The official modelling with ``model``'s weights (copied under their official names), moved to the model's
    device and dtype and checked there (``place_official``)."""
    layout = LAYOUTS["llada"]
    config = config_class(**layout.from_config(model.cfg, model.special))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(model.dtype)
    try:
        official = model_class(config, init_params=False)  # on the host: it ignores a torch.device context
    finally:
        torch.set_default_dtype(previous)
    state = model.state_dict()
    missing, _ = official.load_state_dict({name: state[internal].cpu() for internal, name in
                                           layout.tensor_names(model.cfg).items()}, strict=False)
    parameters = {name for name, _ in official.named_parameters()}
    if parameters & set(missing):
        raise ValueError(f"official parameters without a veridec weight: {sorted(parameters & set(missing))[:5]}")
    return place_official(official.eval(), model.device)


def place_official(official: nn.Module, device: torch.device) -> nn.Module:
    """``official`` moved to ``device``; stops the run with one line when any of its parameters or buffers is
    elsewhere afterwards."""
    official = official.to(device)
    check_on_device(official, device, "the official model")
    return official


def check_on_device(module: nn.Module, device: torch.device, what: str) -> None:
    elsewhere = sorted({str(t.device) for t in (*module.parameters(), *module.buffers())
                        if not same_device(t.device, device)})
    if elsewhere:
        raise OfficialNotOnDevice(f"gpu_bench: {what} has tensors on {', '.join(elsewhere)}, not on {device}: "
                                  "stopped (a comparison across devices means nothing)")


def same_device(a: torch.device, b: torch.device) -> bool:
    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_output_device(canvas: torch.Tensor, device: torch.device, what: str) -> None:
    if not same_device(canvas.device, device):
        raise OfficialNotOnDevice(f"gpu_bench: {what} returned its canvas on {canvas.device}, not on {device}: "
                                  "stopped (it did not run on the device)")


def official_part(official, model, args) -> tuple:
    """Builds, moves and warms the official model; its warm-up output must be on the device."""
    generate, model_class, config_class, loop = official
    built = official_model(model_class, config_class, model)
    prompt = torch.ones(1, 4, dtype=torch.long, device=model.device)
    out = generate.generate_with_dual_cache(built, prompt, steps=args.block, gen_length=args.block,
                                            block_length=args.block, temperature=0.0, mask_id=model.special.mask_id,
                                            threshold=THRESHOLD)
    check_output_device(out[0], model.device, "the official generate_with_dual_cache")
    return generate, built, loop


# ------------------------------------------------------------------ forwards
def timed(device: torch.device, run) -> tuple[float, object]:
    sync(device)
    started = time.perf_counter()
    out = run()
    sync(device)
    return time.perf_counter() - started, out


def median_ms(device: torch.device, run, repeats: int) -> float:
    run()  # warm-up (and, compiled, the capture)
    run()
    return round(1e3 * statistics.median(timed(device, run)[0] for _ in range(repeats)), 3)


def first_layers(model, layers: int):
    """A view of ``model`` with its first ``layers`` layers only (the same weights, no copy)."""
    view = copy.copy(model)
    view._modules = dict(model._modules)
    view.layers = nn.ModuleList(list(model.layers)[:layers])
    return view


@torch.no_grad()
def step_costs(model, batch: int, length: int, args, compile_options) -> dict:
    """ms per full forward, refresh (with the decode's narrowed logits) and dual block step, eager and compiled."""
    device = model.device
    x = torch.randint(0, model.special.mask_id, (batch, length), device=device)
    start = args.prompt + (length - args.prompt) // args.block // 2 * args.block  # a block mid-generation
    block = x[:, start:start + args.block]
    positions = torch.arange(start, start + args.block, device=device).expand(batch, -1)  # [B, block]
    rows = slice(start, start + args.block)
    costs = {}
    for name, owner in (("eager", model), ("compiled", compiled(model, compile_options) if compile_options else None)):
        if owner is None:
            continue
        _, cache = owner.prefill(x, logit_rows=rows)
        costs[f"{name}_refresh_ms"] = median_ms(device, lambda: owner.prefill(x, logit_rows=rows), args.repeats)
        costs[f"{name}_block_step_ms"] = median_ms(device, lambda: owner.forward_cached(
            block, positions, cache, check=False), args.repeats)
    costs["full_forward_ms"] = median_ms(device, lambda: model(x), args.repeats)
    return costs


def forwards_part(model, batches: list[int], args, compile_options) -> list[dict]:
    """Per batch: the costs at N layers, and (first batch, N > 1) at 1 layer: per layer and extrapolated to 32."""
    layers, rows = len(model.layers), []
    bound_ms = 1e3 * full_weight_bytes(model) / (args.bandwidth_tbs * 1e12)
    for index, batch in enumerate(batches):
        length = args.prompt + args.gens[0]
        row = {"batch": batch, "length": length, "layers": layers, "at_n_layers": step_costs(
            model, batch, length, args, compile_options)}
        if layers > 1 and index == 0:
            one = step_costs(first_layers(model, 1), batch, length, args, compile_options)
            row["per_layer_ms"] = {k: round((row["at_n_layers"][k] - one[k]) / (layers - 1), 4) for k in one}
            full = FULL_LAYERS if not args.tiny else layers
            row["extrapolated_ms"] = {k: round(row["at_n_layers"][k] + (full - layers) * row["per_layer_ms"][k], 3)
                                      for k in one}
            row["extrapolated_layers"] = full
        best = row.get("extrapolated_ms", row["at_n_layers"])
        row["bandwidth_bound_ms"] = round(bound_ms, 4)
        row["over_bound"] = {k: round(v / bound_ms, 2) for k, v in best.items()}
        rows.append(row)
    return rows


# ------------------------------------------------------------------ decodes
def report(seconds: float, canvas: torch.Tensor, calls: int, prompt_length: int, model, reference=None) -> dict:
    """A decode's speed (``veridec.throughput``) and, with ``reference``, its agreement with eager veridec's:
    both canvases compared on the host, whatever device each lives on."""
    speed = throughput(canvas, prompt_length, seconds, model_calls=calls, eos_id=model.special.eos_id,
                       mask_id=model.special.mask_id, dtype=model.dtype)
    row = speed.to_dict()
    row["tokens_per_call"] = round(int((canvas[:, prompt_length:] != model.special.mask_id).sum()) / max(calls, 1), 3)
    row["ms_per_call"] = round(1e3 * seconds / max(calls, 1), 3)  # refreshes and cached steps together
    if reference is not None:
        ours, theirs = canvas.cpu(), reference["canvas"].cpu()
        row["same_tokens"] = bool(torch.equal(ours, theirs))
        row["token_match"] = round(float((ours[:, prompt_length:] == theirs[:, prompt_length:]).double().mean()), 4)
        row["same_calls"] = calls == reference["calls"]
    return row


def estimate_full(row: dict, out, per_layer: dict | None, kind: str, layers_missing: int) -> None:
    """Adds the 32-layer estimate of a veridec dual decode: measured + per-layer ms x missing layers per call."""
    if not per_layer or layers_missing <= 0 or f"{kind}_refresh_ms" not in per_layer:
        return
    counters = out.trace.counters
    cached = counters.model_calls - counters.full_forwards
    extra = layers_missing * (counters.full_forwards * per_layer[f"{kind}_refresh_ms"]
                              + cached * per_layer[f"{kind}_block_step_ms"]) / 1e3
    seconds = row["seconds"] + extra
    row["estimate_32_layers"] = {"seconds": round(seconds, 3), "tokens_per_second": round(row["tokens"] / seconds, 2)}


def veridec_rows(model, prompt, kw, args, compile_options, per_layer, missing) -> tuple[dict, dict]:
    rows, reference = {}, {}
    device = model.device
    for cache, run in (("dual", generate_with_dual_cache), ("prefix", generate_with_prefix_cache)):
        seconds, out = timed(device, lambda: run(model, prompt, **kw))
        reference[cache] = {"canvas": out.canvas, "calls": out.trace.counters.model_calls}
        rows[f"veridec eager {cache}"] = report(seconds, out.canvas, out.trace.counters.model_calls, args.prompt,
                                                model)
        if cache == "dual":
            estimate_full(rows["veridec eager dual"], out, per_layer, "eager", missing)
    if compile_options:
        first, _ = timed(device, lambda: generate_with_dual_cache(model, prompt, compile=compile_options, **kw))
        seconds, out = timed(device, lambda: generate_with_dual_cache(model, prompt, compile=compile_options, **kw))
        row = report(seconds, out.canvas, out.trace.counters.model_calls, args.prompt, model, reference["dual"])
        estimate_full(row, out, per_layer, "compiled", missing)
        rows["veridec compiled dual"] = {**row, "first_decode_s_with_compile": round(first, 2)}
    return rows, reference


def official_rows(official, model, prompt, gen: int, args, reference) -> dict:
    rows = {}
    generate, built, _ = official
    for cache in ("dual", "prefix"):
        function = getattr(generate, f"generate_with_{cache}_cache")
        try:
            seconds, (canvas, calls) = timed(model.device, lambda: function(
                built, prompt, steps=gen, gen_length=gen, block_length=args.block, temperature=0.0,
                remasking="low_confidence", mask_id=model.special.mask_id, threshold=THRESHOLD))
        except (PartTimeout, OfficialNotOnDevice):
            raise
        except Exception as error:  # the legacy official loop takes batch 1 only: a finding, said in its row
            rows[f"official {cache}"] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
            continue
        check_output_device(canvas, model.device, f"the official generate_with_{cache}_cache")
        rows[f"official {cache}"] = report(seconds, canvas, int(calls), args.prompt, model, reference[cache])
    return rows


def decodes_part(model, official, batch: int, gen: int, args, compile_options, forwards) -> dict:
    prompt = random_prompt(model, batch, args.prompt, seed=batch * 1000 + gen)
    legacy = not isinstance(official, (str, type(None))) and official[2] == "legacy"
    kw = dict(steps=gen, gen_length=gen, block_length=args.block, threshold=THRESHOLD,
              loop="june2025" if legacy else "current")
    per_layer = next((f.get("per_layer_ms") for f in forwards or [] if f["batch"] == batch), None)
    missing = (FULL_LAYERS - len(model.layers)) if not args.tiny else 0
    rows, reference = veridec_rows(model, prompt, kw, args, compile_options, per_layer, missing)
    if isinstance(official, str) or official is None:
        rows["official"] = {"skipped": official or "the official part has no result"}
    else:
        rows.update(official_rows(official, model, prompt, gen, args, reference))
    return {"batch": batch, "gen": gen, "prompt": args.prompt, "block": args.block, "threshold": THRESHOLD,
            "layers": len(model.layers), "variants": rows}


# ------------------------------------------------------------------ block diffusion, speculation
BLOCK_DIFFUSION = dict(block_length=4, denoising_steps=4)  # SDAR's block 4, 4 steps


def block_diffusion_part(model, gen: int, args, compile_options) -> dict:
    """Both block-diffusion decoders at batch 1, eager and compiled (the second compiled decode timed)."""
    from veridec.optimized.block_diffusion import block_diffusion_generate
    from veridec.optimized.block_parallel import parallel_generate
    from veridec.rules.presets import preset

    prompt = random_prompt(model, 1, args.prompt, seed=5)
    decoders = {
        "block_diffusion_generate (low_confidence_dynamic 0.9)": lambda compile: block_diffusion_generate(
            model, prompt, gen_length=gen, temperature=0.0, confidence_threshold=THRESHOLD, compile=compile,
            **BLOCK_DIFFUSION),
        "parallel_generate (fastdllm)": lambda compile: parallel_generate(
            model, prompt, rule=preset("fastdllm"), gen_length=gen, block_length=BLOCK_DIFFUSION["block_length"],
            compile=compile)}
    rows = {}
    for name, run in decoders.items():
        seconds, eager = timed(model.device, lambda: run(False))
        rows[f"{name} eager"] = report(seconds, eager.canvas, eager.trace.counters.model_calls, args.prompt, model)
        if compile_options:
            first, _ = timed(model.device, lambda: run(compile_options))
            seconds, out = timed(model.device, lambda: run(compile_options))
            rows[f"{name} compiled"] = {**report(seconds, out.canvas, out.trace.counters.model_calls, args.prompt,
                                                 model, {"canvas": eager.canvas,
                                                         "calls": eager.trace.counters.model_calls}),
                                        "first_decode_s_with_compile": round(first, 2)}
    return {"batch": 1, "gen": gen, **BLOCK_DIFFUSION, "variants": rows}


def speculation_part(model, args, gen: int) -> dict:
    from veridec.optimized.parallel import decode as optimized
    from veridec.optimized.speculative import decode as speculative
    from veridec.rules.fastdllm import FastDLLMParams

    prompt = random_prompt(model, 1, args.prompt, seed=7)
    rule = FastDLLMParams(gen, gen, args.block, threshold=THRESHOLD).rule
    kw = dict(rule=rule, cache="dual", gen_length=gen, block_length=args.block)
    seconds, base = timed(model.device, lambda: optimized(model, prompt, **kw))
    out = {"base": {"seconds": round(seconds, 3), "model_calls": base.trace.counters.model_calls}}
    for name, (width, depth) in TREES.items():
        seconds, spec = timed(model.device, lambda: speculative(model, prompt, width=width, depth=depth, **kw))
        out[name] = {"seconds": round(seconds, 3), "model_calls": spec.trace.counters.model_calls,
                     "same_tokens": bool(torch.equal(spec.canvas.cpu(), base.canvas.cpu())),
                     "wall_over_base": round(seconds / out["base"]["seconds"], 3)}
    return {"batch": 1, "gen": gen, "rule": "fastdllm threshold 0.9, dual cache", **out}


def syncs_part(model, args) -> dict:
    """Host synchronisations per cached step of an eager dual decode on the device (tools/step_gates.py)."""
    from tools.step_gates import syncs_per_cached_step

    prompt = random_prompt(model, 1, args.prompt, seed=3)
    return syncs_per_cached_step(model, prompt, gen_length=2 * args.block, block_length=args.block,
                                 threshold=THRESHOLD)


def steps_per_block(trace) -> Counter:
    """{block index: the steps a decode took in it} (its trace's records)."""
    return Counter(record.block for record in trace.steps)


@contextlib.contextmanager
def scripted_termination(steps_per_block: dict):
    """While active, the optimized loop's termination test (``veridec.optimized.parallel.continues``, one host read
    of two flags per step) is replaced by a schedule known in advance, {block index: steps}: no read, the same
    work (the finiteness flag goes unread: for timing a decode already run with the reads)."""
    from veridec.optimized import parallel

    original = parallel.continues

    def continues(run, x, block, step):
        run.last_step = None
        return step < steps_per_block[block.index]

    parallel.continues = continues
    try:
        yield
    finally:
        parallel.continues = original


def termination_part(model, args, compile_options, repeats: int = 3) -> dict:
    """The cost of the one host read per step between a block's steps (spec/parallel.md P11 "Host reads"): a dual
    decode at batch 1 (compiled when the run compiles) timed as it runs, then with the reads replaced by its own
    schedule (``scripted_termination``); the same tokens and calls are asserted. The difference per cached step
    is the stall a device-side termination could save; a lagged read (the next step launched before the flags are
    read) would pay one speculative forward per block for it: ``lagged_read_projection_s``."""
    device = model.device
    gen = args.gens[0]
    prompt = random_prompt(model, 1, args.prompt, seed=9)
    kw = dict(steps=gen, gen_length=gen, block_length=args.block, threshold=THRESHOLD,
              compile=compile_options or False)
    decode = lambda: generate_with_dual_cache(model, prompt, **kw)  # noqa: E731
    decode()  # compiles (and captures) the decode's shapes
    runs = [timed(device, decode) for _ in range(repeats)]
    with_reads, out = statistics.median(seconds for seconds, _ in runs), runs[-1][1]
    schedule = steps_per_block(out.trace)
    with scripted_termination(schedule):
        runs = [timed(device, decode) for _ in range(repeats)]
    without_reads, unread = statistics.median(seconds for seconds, _ in runs), runs[-1][1]
    if not torch.equal(unread.canvas.cpu(), out.canvas.cpu()) or \
            unread.trace.counters.model_calls != out.trace.counters.model_calls:
        raise AssertionError("the decode without termination reads took other steps than the decode with them")
    calls, blocks = out.trace.counters.model_calls, len(schedule)
    cached_steps = calls - blocks
    step_ms = 1e3 * without_reads / calls
    projection = without_reads + blocks * step_ms / 1e3
    return {"batch": 1, "gen": gen, "compiled": bool(compile_options), "model_calls": calls, "blocks": blocks,
            "cached_steps": cached_steps, "with_reads_s": round(with_reads, 4),
            "without_reads_s": round(without_reads, 4),
            "read_cost_ms_per_cached_step": round(1e3 * (with_reads - without_reads) / max(cached_steps, 1), 4),
            "step_ms": round(step_ms, 4), "lagged_read_projection_s": round(projection, 4),
            "lagged_read_would_save": projection < with_reads}


def profile_part(model, batch: int, length: int, args, compile_options, rows: int = 8) -> dict:
    """The profiler's top operators (self time) of one eager and one compiled dual block step."""
    device = model.device
    x = torch.randint(0, model.special.mask_id, (batch, length), device=device)
    positions = torch.arange(args.prompt, args.prompt + args.block, device=device).expand(batch, -1)
    activities = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    result = {}
    for name, owner in (("eager", model), ("compiled", compiled(model, compile_options) if compile_options else None)):
        if owner is None:
            continue
        with torch.no_grad():
            _, cache = owner.prefill(x, logit_rows=slice(args.prompt, args.prompt + args.block))  # the decode's graph
            step = lambda: owner.forward_cached(x[:, args.prompt:args.prompt + args.block], positions, cache,  # noqa: E731
                                                check=False)
            step()
            step()
            sync(device)
            with torch.profiler.profile(activities=activities) as profile:
                step()
                sync(device)
        events = sorted(profile.key_averages(), key=lambda e: getattr(e, key, 0), reverse=True)[:rows]
        result[name] = [{"operator": e.key, "calls": e.count, "self_ms": round(getattr(e, key, 0) / 1e3, 3)}
                        for e in events]
    return result


# ------------------------------------------------------------------ goals
def goal(want: str, ratio, holds) -> dict:
    return {"want": want, "ratio": ratio, "holds": None if ratio is None else holds(ratio)}


def goals(parts: dict) -> dict:
    """Each goal of issue 47 with its measured ratio and whether it holds (None: not measured)."""
    result = lambda name: (parts.get(name) or {}).get("result")  # noqa: E731
    forwards = result("forwards") if isinstance(result("forwards"), list) else []
    b1 = next((f for f in forwards if f["batch"] == 1), None)
    costs = (b1.get("extrapolated_ms") or b1["at_n_layers"]) if b1 else {}
    step_over_full = (round(costs["eager_block_step_ms"] / costs["full_forward_ms"], 3)
                      if "eager_block_step_ms" in costs else None)
    found = {"eager_block_step_over_full_forward_b1": goal("<= 0.5", step_over_full, lambda r: r <= 0.5),
             "compiled_block_step_over_bandwidth_bound_b1": goal(
                 "<= 1.5", (b1 or {}).get("over_bound", {}).get("compiled_block_step_ms"), lambda r: r <= 1.5)}
    tps = lambda row: (row or {}).get("tokens_per_second")  # noqa: E731
    for name, part in parts.items():
        if not name.startswith("decodes ") or not isinstance(part.get("result"), dict):
            continue
        variants = part["result"]["variants"]
        ours, theirs = tps(variants.get("veridec compiled dual")), tps(variants.get("official dual"))
        ratio = round(ours / theirs, 2) if ours and theirs else None
        found[f"compiled_over_official_{name.removeprefix('decodes ').replace(' ', '_')}"] = {
            **goal(">= 2", ratio, lambda r: r >= 2), **({} if ratio else {
                "why_none": (variants.get("official dual") or variants.get("official") or {})})}
    spec = result("speculation") or {}
    walls = {name: spec[name]["wall_over_base"] for name in TREES if name in spec}
    found["speculation_wall_over_base_b1"] = {"want": "< 1", "ratios": walls,
                                              "holds": all(w < 1 for w in walls.values()) if walls else None}
    syncs = (result("syncs") or {}).get("inside_block_per_cached_step")
    found["host_syncs_per_cached_step"] = goal("== 0", syncs, lambda r: r == 0)
    return found


# ------------------------------------------------------------------ the run
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a small model (2 layers unless --layers) and the tiny "
                        "sizes, which replace --batches, --gens, --prompt, --block and --repeats (CPU, CI)")
    parser.add_argument("--layers", type=int, default=None,
                        help="LLaDA-8B's layer shapes with this many layers (default: all 32; --tiny 2)")
    parser.add_argument("--fastdllm", type=Path, default=None, help="the official llada/ folder (generate.py, model/)")
    parser.add_argument("--batches", default=None, help="comma-separated (default 1,8; --tiny 1,2)")
    parser.add_argument("--gens", default=None, help="comma-separated generation lengths (default 256,512; --tiny 16)")
    parser.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 256; --tiny 8)")
    parser.add_argument("--block", type=int, default=None, help="block length (default 32; --tiny 8)")
    parser.add_argument("--repeats", type=int, default=None, help="timed forwards per median (default 10; --tiny 2)")
    parser.add_argument("--bandwidth-tbs", type=float, default=4.8, help="device memory bandwidth, TB/s (H200: 4.8)")
    parser.add_argument("--target-tokens-per-step", type=float, default=TARGET_TOKENS_PER_STEP,
                        help="the logit scale's target: Fast-dLLM tokens per model call (0: no calibration)")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend, or 'none'")
    parser.add_argument("--compile-mode", default="reduce-overhead", help="inductor's mode")
    parser.add_argument("--budget-s", type=float, default=450, help="no part starts after this many seconds")
    parser.add_argument("--limit-scale", type=float, default=1.0, help="multiplies every part's time limit")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gpu", help="writes <device>.json here")
    parser.add_argument("--print-plan", action="store_true", help="print the 8-minute plan's arguments and exit")
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tiny:  # the same plan, CPU-sized: the sizes are the tiny ones whatever the arguments say
        vars(args).update(batches="1,2", gens="16", prompt=8, block=8, repeats=2)
    for name, value in dict(batches="1,8", gens="256,512", prompt=256, block=32, repeats=10).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.batches, args.gens = [int(b) for b in args.batches.split(",")], [int(g) for g in args.gens.split(",")]
    if args.layers is not None and not 1 <= args.layers <= FULL_LAYERS:
        parser.error(f"--layers must lie in [1, {FULL_LAYERS}], got {args.layers}")
    if args.tiny and args.layers is None:
        args.layers = TINY["num_layers"]
    return args


def compile_options_of(args) -> dict | None:
    if args.compile_backend == "none":
        return None
    if args.compile_backend == "inductor":
        return {"backend": "inductor", "mode": args.compile_mode}
    return {"backend": args.compile_backend}


def describe(args, model, device, compile_options) -> dict:
    return {"device": device_name(device), "shape": "tiny" if args.tiny else "llada-8b",
            "layers": len(model.layers), "dtype": str(model.dtype).removeprefix("torch."), "weights": "random",
            "batches": args.batches, "gens": args.gens, "prompt": args.prompt, "block": args.block,
            "threshold": THRESHOLD, "compile": compile_options, "torch": torch.__version__,
            "weight_bytes": weight_bytes(model), "weight_bytes_all_layers": full_weight_bytes(model),
            "bandwidth_tbs": args.bandwidth_tbs, "part_limits_s": {k: v * args.limit_scale
                                                                   for k, v in PART_LIMITS_S.items()},
            "throughput": "veridec.throughput: generated tokens up to and including the first EOS (prompt excluded) "
                          "per wall second"}


def output_path(args, device: torch.device) -> Path:
    name = re.sub(r"[^a-z0-9]+", "-", device_name(device).lower()).strip("-")
    return args.out / f"{name}{'-tiny' if args.tiny else ''}{f'-{args.layers}-layers' if args.layers else ''}.json"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.print_plan:
        print(" ".join(PLAN))
        return 0
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" or not args.tiny else torch.float32
    compile_options = compile_options_of(args)
    run = Report(output_path(args, device), args.budget_s, args.limit_scale)
    torch.manual_seed(0)
    with torch.no_grad():
        model = build_model(args, device, dtype)
        run.result["config"] = describe(args, model, device, compile_options)
        run.part("setup", "setup", lambda: calibrate(model, args.target_tokens_per_step, args)
                 if args.target_tokens_per_step > 0 else {"logit_scale": 1.0, "calibration": "none (asked)"})
        official = load_official(args.fastdllm)
        if not isinstance(official, str):
            official = run.part("official", "official", lambda: official_part(official, model, args))
        run.result["config"]["official"] = official if isinstance(official, str) else (
            f"{args.fastdllm} ({official[2]} loop), on {device}" if official else "see parts.official")
        measure(run, model, official, args, compile_options)
    run.result["goals"] = goals(run.result["parts"])
    run.write()
    print(json.dumps({"goals": run.result["goals"], "seconds": run.result["seconds"]}, indent=1))
    print(f"wrote {run.path}")
    return 0


def measure(run: Report, model, official, args, compile_options) -> None:
    forwards = run.part("forwards", "forwards", lambda: forwards_part(model, args.batches, args, compile_options))
    for batch in args.batches:  # batch 1 first: the goals read it
        for gen in args.gens:
            run.part(f"decodes b{batch} g{gen}", "decodes", lambda: decodes_part(
                model, official, batch, gen, args, compile_options, forwards))
    run.part("block diffusion", "block diffusion", lambda: block_diffusion_part(model, args.gens[0], args,
                                                                                 compile_options))
    run.part("speculation", "speculation", lambda: speculation_part(model, args, args.gens[0]))
    run.part("syncs", "syncs", lambda: syncs_part(model, args))
    run.part("termination", "termination", lambda: termination_part(model, args, compile_options))
    run.part("profile", "profile", lambda: profile_part(model, args.batches[0], args.prompt + args.gens[0], args,
                                                        compile_options))


if __name__ == "__main__":
    raise SystemExit(main())
