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
from functools import partial
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.models.shipped import load_model, training_report
from veridec.oracles.world import load_world_hmm
from veridec.reference.dream import diffusion_generate
from veridec.reference.fastdllm import generate as fastdllm_generate
from veridec.reference.llada import generate as llada_generate
from veridec.rules.parallel import Threshold, TopK
from veridec.rules.step import parallel_step
from veridec.trace import Decoded, Trace, record_step

from .. import corpus
from ..distributed import Group
from ..records import weights_sha256
from ..units import Unit, run_recorded
from ..workloads import BLOCK, corpus_cases, generated_lines


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


def decode_one(decode, model, row: list[int], seed: int) -> tuple[torch.Tensor, dict]:
    """Decode one prompt alone (in a batch each row would wait for the slowest: its steps would not be its own),
    torch's generator seeded for this prompt -> the canvas [L] and its costs (``costs`` sums them)."""
    torch.manual_seed(seed)
    start = time.perf_counter()
    canvas, trace = decode(model, torch.tensor([row], device=model.device))
    return canvas[0], {"full_forwards": trace.counters.full_forwards, "steps": len(trace.steps),
                       "committed": trace.tokens_committed(), "confident": confident_count(trace),
                       "seconds": time.perf_counter() - start}


def costs(units: list[dict]) -> dict:
    """A decoder's costs over its prompts: tokens per step, full forwards per prompt, the share of committed
    tokens with confidence > 0.9 and the seconds, summed."""
    total = lambda field: sum(unit[field] for unit in units)  # noqa: E731
    return {"tokens_per_step": round(total("committed") / max(1, total("steps")), 3),
            "full_forwards_per_prompt": round(total("full_forwards") / len(units), 2),
            "share_conf_gt_0.9": round(total("confident") / max(1, total("committed")), 4),
            "seconds": round(total("seconds"), 2)}


def confident_count(trace: Trace, level: float = 0.9) -> int:
    """Committed tokens whose probability (softmax of the recorded logits) exceeds ``level``."""
    probs = [torch.tensor(logits, dtype=torch.float64, device="cpu").softmax(-1)[token].item()
             for step in trace.steps for row_logits, row_tokens in zip(step.logits, step.tokens)
             for logits, token in zip(row_logits, row_tokens)]
    return sum(p > level for p in probs)


def unit_seed(seed: int, index: int) -> int:
    """The generator seed of prompt ``index`` (per prompt, so a unit's result does not depend on the others)."""
    return seed * 1_000_003 + index


def prompt_units(model, weights: str, decoders: dict, n_prompts: int, seed: int) -> list[Unit]:
    """One unit per (decoder, held-out prompt) of prompt mode."""
    cases = corpus_cases(n_prompts, random.Random(seed))
    rows = [model.tokenizer(case.prompt)["input_ids"] for case in cases]
    return [Unit({"section": "prompt_mode", "model": "default", "weights": weights, "decoder": name, "prompt": i},
                 partial(continue_prompt, decode, model, case, row, unit_seed(seed, i)))
            for name, decode in decoders.items() for i, (case, row) in enumerate(zip(cases, rows))]


def continue_prompt(decode, model, case, row: list[int], seed: int) -> dict:
    canvas, stats = decode_one(decode, model, row, seed)
    partial_line = case.prompt.split("\n")[-1]
    written, _ = generated_lines(model, canvas, len(row), partial_line)
    score = corpus.score_text("\n".join(written))
    return {"valid": score.valid, "lines": score.lines,
            "exact": bool(written) and written[0] == partial_line + case.truth, **stats}


def prompt_summary(units: list[dict]) -> dict:
    valid, lines = sum(u["valid"] for u in units), sum(u["lines"] for u in units)
    return {"validity": round(valid / max(1, lines), 4), "lines_scored": lines,
            "first_line_exact": round(sum(u["exact"] for u in units) / len(units), 4), **costs(units)}


def infill_units(model, weights: str, decoders: dict, n_docs: int, seed: int) -> list[Unit]:
    """One unit per (decoder, held-out document with half of its characters masked) of infill mode."""
    rng = random.Random(seed + 1)
    docs = [corpus.generate_document(rng, 60, max_lines=3) for _ in range(n_docs)]
    rows = []
    for doc in docs:
        ids = model.tokenizer(doc)["input_ids"] + [model.special.eos_id]  # the EOS stays visible
        rows.append([model.special.mask_id if rng.random() < 0.5 else t for t in ids[:-1]] + ids[-1:])
    return [Unit({"section": "infill_mode", "model": "default", "weights": weights, "decoder": name, "prompt": i},
                 partial(infill_document, decode, model, doc, row, unit_seed(seed, i)))
            for name, decode in decoders.items() for i, (doc, row) in enumerate(zip(docs, rows))]


def infill_document(decode, model, doc: str, row: list[int], seed: int) -> dict:
    canvas, stats = decode_one(decode, model, row, seed)
    ids = canvas.tolist()
    text = model.tokenizer.decode(ids[: ids.index(model.special.eos_id)] if model.special.eos_id in ids else ids)
    score = corpus.score_text(text)
    return {"valid": score.valid, "lines": score.lines, "restored": text == doc, **stats}


def infill_summary(units: list[dict]) -> dict:
    valid, lines = sum(u["valid"] for u in units), sum(u["lines"] for u in units)
    return {"validity": round(valid / max(1, lines), 4),
            "restored_exactly": round(sum(u["restored"] for u in units) / len(units), 4), **costs(units)}


HMM_PROMPT = 32  # tokens of each HMM sample given as the prompt


def hmm_samples(n_prompts: int, gen: int, seed: int) -> torch.Tensor:
    """HMM samples [n, HMM_PROMPT + gen]: the first HMM_PROMPT tokens are the prompts, the rest the truth."""
    return load_world_hmm().sample(n_prompts, HMM_PROMPT + gen, generator=torch.Generator().manual_seed(seed))


def hmm_units(decoders: dict, n_prompts: int, gen: int, seed: int) -> list[Unit]:
    """One unit per (decoder, HMM sample) of the HMM world: the continuation of the sample's head."""
    model, hmm = load_model("hmm"), load_world_hmm()
    weights, prompts = weights_sha256(model), hmm_samples(n_prompts, gen, seed)[:, :HMM_PROMPT].tolist()
    return [Unit({"section": "hmm_world", "model": "hmm", "weights": weights, "decoder": name, "prompt": i},
                 partial(continue_hmm, decode, model, hmm, row, unit_seed(seed, i)))
            for name, decode in decoders.items() for i, row in enumerate(prompts)]


def continue_hmm(decode, model, hmm, row: list[int], seed: int) -> dict:
    """The continuation's exact negative log-likelihood under the true HMM given the prompt (None when it holds
    a special token, which is not an HMM symbol)."""
    canvas, stats = decode_one(decode, model, row, seed)
    canvas = canvas.cpu()[None]  # [1, HMM_PROMPT + gen]
    nll = None
    if (canvas < hmm.num_symbols).all():
        nll = -(hmm.log_likelihood(canvas) - hmm.log_likelihood(canvas[:, :HMM_PROMPT])).item()
    return {"nll": nll, **stats}


def hmm_summary(units: list[dict], gen: int) -> dict:
    nlls = [u["nll"] for u in units if u["nll"] is not None]
    return {"nll_per_token": round(sum(nlls) / len(nlls) / gen, 4) if nlls else None,
            "rows_with_non_symbols": len(units) - len(nlls), **costs(units)}


def run(out: Path, quick: bool = False, seed: int = 0, quiet: bool = False, group: Group = Group(),
        fresh: bool = False) -> dict | None:
    """The report (rank 0; other ranks of a torchrun: None). Each (section, decoder, prompt) is a unit recorded
    in ``out``/models.records.jsonl as it finishes: a rerun resumes, ``fresh`` starts over."""
    n, gen = (8, 32) if quick else (48, 64)
    model = load_model("default")
    weights = weights_sha256(model)
    meta = {"quick": quick, "seed": seed, "gen_length": gen, "block_length": BLOCK}
    prompting, infilling = prompt_decoders(gen), infill_decoders()
    units = (prompt_units(model, weights, prompting, n, seed) + infill_units(model, weights, infilling, n, seed)
             + hmm_units(prompting, n, gen, seed))
    results = run_recorded(units, out, "models", {"experiment": "models", "prompts": n, **meta}, group, fresh, quiet)
    if results is None:
        return None
    grouped = {}  # section -> decoder -> its prompts' results
    for unit, result in zip(units, results):
        grouped.setdefault(unit.key["section"], {}).setdefault(unit.key["decoder"], []).append(result)
    truth, hmm = hmm_samples(n, gen, seed), load_world_hmm()
    truth_nll = -(hmm.log_likelihood(truth) - hmm.log_likelihood(truth[:, :HMM_PROMPT]))
    report = {**meta, "training": {name: {k: training_report(name)[k] for k in ("parameters", "wall_seconds",
                                                                                 "final_val_loss")}
                                   for name in ("default", "hmm")},
              "prompt_mode": {name: prompt_summary(found) for name, found in grouped["prompt_mode"].items()},
              "infill_mode": {name: infill_summary(found) for name, found in grouped["infill_mode"].items()},
              "hmm_world": {"true_continuations_nll_per_token": round(truth_nll.mean().item() / gen, 4),
                            **{name: hmm_summary(found, gen) for name, found in grouped["hmm_world"].items()}}}
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
