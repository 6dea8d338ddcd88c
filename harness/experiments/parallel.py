"""Parallel decoders at equal footing (``veridec experiment parallel``): steps vs quality per preset.

Default model: held-out corpus prompts (as ``experiment models``), the validity of every complete generated
line under the task checkers. HMM-world model: HMM samples as prompts, the exact NLL per generated token under
the true HMM. Each preset decodes all prompts as one left-padded batch with the reference decoder (the rule's
own behaviour, no cache) and with the dual cache; steps are counted per prompt (the steps in which that
prompt committed), so batching does not inflate them. WINO (``wino``, spec/wino.md) decodes each prompt alone
(it takes no padding) at the official defaults, with the reference and its prefix cache; its steps are its
forwards, its tokens per step the generated positions per forward.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.models.shipped import load_model
from veridec.rules.presets import PRESETS

from .. import event_rows
from ..distributed import Group
from ..records import weights_sha256
from ..units import Unit, run_recorded
from ..workloads import (BLOCK, corpus_texts, hmm_nll, prompts_for, row_steps, row_tokens_per_step, run_variant,
                         single_prompts, validity)

WINO = "wino"  # not a preset: decoded by veridec.reference.wino / veridec.optimized.wino
WINO_VARIANTS = ("reference", "prefix")


def run(out: Path, quick: bool = False, seed: int = 0, presets=None, quiet: bool = False, group: Group = Group(),
        fresh: bool = False) -> dict | None:
    """The report (rank 0; other ranks of a torchrun: None). Each (model, preset, variant) row is a unit
    recorded in ``out``/parallel.records.jsonl as it finishes: a rerun resumes, ``fresh`` starts over."""
    n, gen = (4, 64) if quick else (16, 128)
    presets = presets or [*sorted(PRESETS), WINO]
    meta = {"quick": quick, "seed": seed, "prompts": n, "gen_length": gen, "block_length": BLOCK}
    units = [Unit({"model": model_name, "weights": weights, "decoder": name, "variant": variant},
                  partial(measure_wino if name == WINO else measure, model, model_name, name, variant, n, gen, seed))
             for model_name in ("default", "hmm") for model, weights in [shipped(model_name)]
             for name in presets for variant in (WINO_VARIANTS if name == WINO else ("reference", "dual"))]
    rows = run_recorded(units, out, "parallel", {"experiment": "parallel", **meta}, group, fresh, quiet)
    if rows is None:
        return None
    report = {**meta, "rows": rows, "localleap_vs_fastdllm_steps": step_ratios(rows)}
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "parallel.json", json.dumps(report, indent=2))
    write_text_atomic(out / "parallel.md", to_markdown(report))
    return report


def shipped(model_name: str):
    """A shipped model in float32 and its weights' sha256 (a unit's key names the weights)."""
    model = load_model(model_name, dtype=torch.float32)
    return model, weights_sha256(model)


def measure(model, model_name: str, name: str, variant: str, n: int, gen: int, seed: int) -> dict:
    """One row: the preset's decode of the model's n held-out prompts with ``variant``."""
    prompt, mask = prompts_for(model_name, model, n, seed)
    texts = corpus_texts(n, seed) if model_name == "default" else None
    decoded, seconds = run_variant(model, variant, PRESETS[name], prompt, mask, gen, BLOCK)
    quality = (validity(model, decoded.canvas, prompt, mask, texts) if texts is not None
               else hmm_nll(decoded.canvas, mask, prompt.shape[1], gen))
    return {"model": model_name, "decoder": name, "variant": variant,
            "steps_per_prompt": round(row_steps(decoded.trace), 2),
            "tokens_per_step": round(row_tokens_per_step(decoded.trace), 3),
            "quality": quality, "quality_metric": "validity" if texts is not None else "hmm_nll_per_token",
            "seconds": round(seconds, 3)}


def measure_wino(model, model_name: str, name: str, variant: str, n: int, gen: int, seed: int) -> dict:
    """WINO's row: each of the model's n held-out prompts decoded alone by ``variant`` (reference or prefix),
    the outputs put back under their padding for the quality measure."""
    prompt, mask = prompts_for(model_name, model, n, seed)
    texts = corpus_texts(n, seed) if model_name == "default" else None
    canvases, forwards, seconds = [], [], 0.0
    for row, single in enumerate(single_prompts(prompt, mask)):
        out, _, took = event_rows.decode(model, "wino", variant, single, gen, BLOCK)
        pad = prompt[row, : prompt.shape[1] - single.shape[1]]  # [P - P_i] the row's left padding
        canvases.append(torch.cat([pad, out.canvas[0]]))
        forwards.append(out.forwards[0])
        seconds += took
    canvas = torch.stack(canvases)  # [n, P + G]
    quality = (validity(model, canvas, prompt, mask, texts) if texts is not None
               else hmm_nll(canvas, mask, prompt.shape[1], gen))
    steps = sum(forwards) / len(forwards)
    return {"model": model_name, "decoder": name, "variant": variant, "steps_per_prompt": round(steps, 2),
            "tokens_per_step": round(gen / steps, 3), "quality": quality,
            "quality_metric": "validity" if texts is not None else "hmm_nll_per_token", "seconds": round(seconds, 3)}


def step_ratios(rows) -> dict:
    """Fast-dLLM threshold 0.9 steps / LocalLeap steps per model and variant (the LocalLeap paper's claim)."""
    steps = {(r["model"], r["decoder"], r["variant"]): r["steps_per_prompt"] for r in rows}
    return {f"{m}/{v}": round(steps[m, "fastdllm", v] / steps[m, "localleap", v], 3)
            for (m, d, v) in steps if d == "localleap" and (m, "fastdllm", v) in steps}


def to_markdown(report: dict) -> str:
    lines = [f"# Parallel decoders ({report['prompts']} prompts, gen {report['gen_length']}, block "
             f"{report['block_length']}, seed {report['seed']}{', quick' if report['quick'] else ''})", "",
             "quality: validity of generated lines (default model, higher is better) or exact NLL per token under "
             "the true HMM (hmm model, lower is better)", "",
             "| model | decoder | variant | steps/prompt | tokens/step | quality | seconds |", "|---" * 7 + "|"]
    lines += [f"| {r['model']} | {r['decoder']} | {r['variant']} | {r['steps_per_prompt']} | {r['tokens_per_step']} "
              f"| {r['quality']} | {r['seconds']} |" for r in report["rows"]]
    lines += ["", "Fast-dLLM (0.9) steps / LocalLeap steps: " +
              ", ".join(f"{k} {v}x" for k, v in report["localleap_vs_fastdllm_steps"].items())]
    return "\n".join(lines) + "\n"
