"""How the shipped models decode: validity, tokens/step and confidence per decoder (``veridec experiment models``).

Prompt mode: held-out task documents cut inside a line (``corpus.split_prompt``); the decoder continues for
``gen_length`` tokens; every complete generated line is scored by the task checker. Infill mode: half of the
characters of a held-out document are masked and decoded back. HMM world: the shipped ``hmm`` model continues
HMM samples; outputs are scored by their exact log-likelihood under the true HMM.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.models.shipped import load_model, load_world_hmm, training_report
from veridec.reference.dream import diffusion_generate
from veridec.reference.fastdllm import generate as fastdllm_generate
from veridec.reference.llada import generate as llada_generate
from veridec.rules.parallel import Threshold, TopK
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_step

from .. import corpus
from ..workloads import BLOCK, corpus_cases, generated_lines, progress


def prompt_decoders(gen: int) -> dict:
    """Decoders continuing a prompt: name -> fn(model, prompt [B, P]) -> Decoded."""
    log = dict(record_logits=True)  # committed tokens' probabilities come from the recorded logits
    return {
        "llada low_confidence": lambda m, p: llada_generate(m, p, steps=gen, gen_length=gen, block_length=BLOCK,
                                                               **log),
        "llada random": lambda m, p: llada_generate(m, p, steps=gen, gen_length=gen, block_length=BLOCK,
                                                       remasking="random", **log),
        "dream entropy": lambda m, p: diffusion_generate(m, p, max_new_tokens=gen, steps=gen, alg="entropy",
                                                            **log),
        "conf top-4": lambda m, p: llada_generate(m, p, gen_length=gen, block_length=BLOCK, tokens_per_step=4,
                                                     **log),
        "fast-dllm 0.9": lambda m, p: fastdllm_generate(m, p, steps=gen // BLOCK, gen_length=gen,
                                                           block_length=BLOCK, threshold=0.9, **log),
    }


def infill_decoders() -> dict:
    """Decoders filling every mask of a canvas: name -> fn(model, canvas [1, L]) -> Decoded."""
    return {
        "sequential": lambda m, x: fill_masks(m, x, per_step=1),
        "conf top-4": lambda m, x: fill_masks(m, x, per_step=4),
        "threshold 0.9": lambda m, x: fill_masks(m, x, threshold=0.9),
    }


@torch.no_grad()
def fill_masks(model, x: torch.Tensor, threshold: float | None = None, per_step: int = 1) -> Decoded:
    """Every mask of the canvas is a candidate; Fast-dLLM's rule (FD3) commits the top ``per_step`` by float64
    confidence, or the top-1 plus all with confidence >= ``threshold``. One full forward per step."""
    mask_id = model.special.mask_id
    rule = TopK(per_step) if threshold is None else Threshold(threshold)
    trace = Trace("fill-masks", {"threshold": threshold, "per_step": per_step}, 0, x.shape[0])
    while (x == mask_id).any():
        if len(trace.steps) > x.shape[1]:
            raise RuntimeError("fill_masks stalled: the model predicts the mask token")
        logits = model(x).logits
        trace.counters.add_forward(rows=x.shape[0], queries=x.shape[1])
        result = parallel_step(rule, logits, x, x == mask_id)
        record_step(trace, 0, x, result.x, mask_id, result.confidence, result.choice_logits, result.order,
                    record_logits=True)
        x = result.x
    return Decoded(x, trace)


def decode_each(decode, model, rows: list[list[int]]) -> tuple[list[torch.Tensor], dict]:
    """Decode every prompt alone (a batch would make each row wait for the slowest: its steps would not be
    the row's own) -> the canvases and the cost statistics summed over prompts."""
    canvases, forwards, steps, committed, confident = [], 0, 0, 0, 0.0
    start = time.time()
    for row in rows:
        canvas, trace = decode(model, torch.tensor([row], device=model.device))
        canvases.append(canvas[0])
        forwards += trace.counters.full_forwards
        steps += len(trace.steps)
        committed += trace.tokens_committed()
        confident += confident_share(trace) * trace.tokens_committed()
    return canvases, {"tokens_per_step": round(committed / max(1, steps), 3),
                      "full_forwards_per_prompt": round(forwards / len(rows), 2),
                      "share_conf_gt_0.9": round(confident / max(1, committed), 4),
                      "seconds": round(time.time() - start, 2)}


def confident_share(trace: Trace, level: float = 0.9) -> float:
    """Share of committed tokens whose probability (softmax of the recorded logits) exceeds ``level``."""
    probs = [torch.tensor(logits, dtype=torch.float64, device="cpu").softmax(-1)[token].item()
             for step in trace.steps for row_logits, row_tokens in zip(step.logits, step.tokens)
             for logits, token in zip(row_logits, row_tokens)]
    return sum(p > level for p in probs) / max(1, len(probs))


def prompt_mode(model, decoders: dict, n_prompts: int, seed: int, quiet: bool = False) -> dict:
    cases = corpus_cases(n_prompts, random.Random(seed))
    rows = [model.tokenizer(case.prompt)["input_ids"] for case in cases]
    results = {}
    for name, decode in progress(decoders.items(), "models: prompt mode", quiet):
        torch.manual_seed(seed)
        canvases, stats = decode_each(decode, model, rows)
        valid = lines = exact = 0
        for canvas, row, (_, prompt, truth) in zip(canvases, rows, cases):
            partial = prompt.split("\n")[-1]
            written, _ = generated_lines(model, canvas, len(row), partial)
            score = corpus.score_text("\n".join(written))
            valid, lines = valid + score.valid, lines + score.lines
            exact += bool(written) and written[0] == partial + truth
        results[name] = {"validity": round(valid / max(1, lines), 4), "lines_scored": lines,
                         "first_line_exact": round(exact / len(cases), 4), **stats}
    return results


def infill_mode(model, decoders: dict, n_docs: int, seed: int, quiet: bool = False) -> dict:
    rng = random.Random(seed + 1)
    docs = [corpus.generate_document(rng, 60, max_lines=3) for _ in range(n_docs)]
    rows = []
    for doc in docs:
        ids = model.tokenizer(doc)["input_ids"] + [model.special.eos_id]  # the EOS stays visible
        rows.append([model.special.mask_id if rng.random() < 0.5 else t for t in ids[:-1]] + ids[-1:])
    results = {}
    for name, decode in progress(infill_decoders().items(), "models: infill mode", quiet):
        canvases, stats = decode_each(decode, model, rows)
        valid = lines = restored = 0
        for doc, canvas in zip(docs, canvases):
            ids = canvas.tolist()
            text = model.tokenizer.decode(ids[: ids.index(model.special.eos_id)] if model.special.eos_id in ids
                                          else ids)
            score = corpus.score_text(text)
            valid, lines, restored = valid + score.valid, lines + score.lines, restored + (text == doc)
        results[name] = {"validity": round(valid / max(1, lines), 4),
                         "restored_exactly": round(restored / n_docs, 4), **stats}
    return results


def hmm_world(n_prompts: int, gen: int, seed: int, quiet: bool = False) -> dict:
    """Continue HMM samples; score the continuation by its exact conditional log-likelihood per token."""
    model, hmm = load_model("hmm"), load_world_hmm()
    prompt_len = 32
    samples = hmm.sample(n_prompts, prompt_len + gen, generator=torch.Generator().manual_seed(seed))
    prompts = samples[:, :prompt_len]
    prefix_ll = hmm.log_likelihood(prompts)
    truth_nll = -(hmm.log_likelihood(samples) - prefix_ll).mean().item() / gen
    results = {"true_continuations_nll_per_token": round(truth_nll, 4)}
    for name, decode in progress(prompt_decoders(gen).items(), "models: hmm world", quiet):
        torch.manual_seed(seed)
        canvases, stats = decode_each(decode, model, prompts.tolist())
        canvas = torch.stack(canvases)
        symbols = (canvas < hmm.num_symbols).all(dim=1)  # a special token is not an HMM symbol
        nll = -(hmm.log_likelihood(canvas[symbols]) - prefix_ll[symbols]).mean().item() / gen
        results[name] = {"nll_per_token": round(nll, 4), "rows_with_non_symbols": int((~symbols).sum()), **stats}
    return results


def run(out: Path, quick: bool = False, seed: int = 0, quiet: bool = False) -> dict:
    n, gen = (8, 32) if quick else (48, 64)
    model = load_model("default")
    report = {
        "quick": quick, "seed": seed, "gen_length": gen, "block_length": BLOCK,
        "training": {name: {k: training_report(name)[k] for k in ("parameters", "wall_seconds", "final_val_loss")}
                     for name in ("default", "hmm")},
        "prompt_mode": prompt_mode(model, prompt_decoders(gen), n, seed, quiet),
        "infill_mode": infill_mode(model, infill_decoders(), n, seed, quiet),
        "hmm_world": hmm_world(n, gen, seed, quiet),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "models.json", json.dumps(report, indent=2))
    write_text_atomic(out / "models.md", to_markdown(report))
    return report


def to_markdown(report: dict) -> str:
    lines = [f"# Shipped models (gen length {report['gen_length']}, block {report['block_length']}, "
             f"seed {report['seed']}{', quick' if report['quick'] else ''})", ""]
    for name, info in report["training"].items():
        lines.append(f"- `{name}`: {info['parameters']:,} parameters, trained {info['wall_seconds']:.0f} s, "
                     f"validation loss {info['final_val_loss']}")
    for section in ("prompt_mode", "infill_mode", "hmm_world"):
        rows = {k: v for k, v in report[section].items() if isinstance(v, dict)}
        columns = list(next(iter(rows.values())))
        lines += ["", f"## {section.replace('_', ' ')}", "", "| decoder | " + " | ".join(columns) + " |",
                  "|---" * (len(columns) + 1) + "|"]
        lines += [f"| {name} | " + " | ".join(str(v[c]) for c in columns) + " |" for name, v in rows.items()]
        extras = {k: v for k, v in report[section].items() if not isinstance(v, dict)}
        lines += [f"\n{k}: {v}" for k, v in extras.items()]
    return "\n".join(lines) + "\n"
