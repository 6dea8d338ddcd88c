"""The workloads every table, experiment and training script shares: held-out prompts for the shipped models,
one decode of a variant, and the quality and cost measures computed from a decode.

Prompts: corpus documents cut inside a line (``corpus.split_prompt``) for the default model, samples of the
world HMM for the ``hmm`` model. Quality: the task checkers' validity of the generated lines (default), the
exact NLL per token under the true HMM (hmm). Costs: per-prompt steps and tokens per step from a trace.
"""

from __future__ import annotations

import random
import time
from typing import NamedTuple

import torch
from tqdm import tqdm

from veridec.canvas import left_pad
from veridec.oracles.world import load_world_hmm
from veridec.optimized.parallel import decode as optimized_decode
from veridec.reference.parallel import decode as reference_decode

from . import corpus

BLOCK = 32  # the block length of every table and experiment on the shipped models


def progress(items, desc: str, quiet: bool = False):
    """``items`` behind a progress bar on stderr (experiments and tables), or silently with ``quiet``."""
    return tqdm(items, desc=desc, leave=False, disable=quiet)


FAMILY_TABLE_MODELS = ("diffusiongemma", "diffusiongemma-random", "tiny-fastdllm-v2")  # harness.family_rows


def table_models(model_name: str) -> list[str]:
    """The models a table covers: the shipped default model brings the HMM-world model along (exact NLL under
    the true HMM) and the other families' table models (``FAMILY_TABLE_MODELS``: DiffusionGemma, shipped and
    random; a tiny Fast-dLLM v2); any other model stands alone."""
    return [model_name] + (["hmm", *FAMILY_TABLE_MODELS] if model_name == "default" else [])


# ---------------------------------------------------------------------------------------------- prompts
class Case(NamedTuple):
    document: str  # a held-out corpus document
    prompt: str  # the document cut inside one of its lines
    truth: str  # the true rest of that line


def corpus_cases(n: int, rng: random.Random) -> list[Case]:
    cases = []
    for _ in range(n):
        document = corpus.generate_document(rng, 120)
        cases.append(Case(document, *corpus.split_prompt(document, rng)))
    return cases


def corpus_texts(n: int, seed: int) -> list[str]:
    """The prompt texts ``prompts_for("default", ...)`` encodes (same generator, same order)."""
    return [case.prompt for case in corpus_cases(n, random.Random(seed))]


def prompts_for(model_name: str, model, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts [n, P] and mask: corpus document heads (default model) or HMM samples (hmm)."""
    if model_name == "hmm":
        rows = load_world_hmm().sample(n, 24, generator=torch.Generator().manual_seed(seed)).tolist()
    else:
        rows = [model.tokenizer(text)["input_ids"] for text in corpus_texts(n, seed)]
    prompt, mask = left_pad(rows, model.special.pad_id)
    return prompt.to(model.device), mask.to(model.device)


def single_prompts(prompt: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """The rows of a left-padded batch [B, P] as unpadded prompts [1, P_i]."""
    return [prompt[i:i + 1, int((mask[i] == 0).sum()):] for i in range(prompt.shape[0])]


# ------------------------------------------------------------------------------------------- decoding
def run_variant(model, variant: str, rule, prompt, mask, gen_length: int, block_length: int = BLOCK,
                compile: str | None = None):
    """One decode of ``rule``: "reference", "optimized" (no cache), "prefix" or "dual" -> (Decoded, seconds);
    ``compile``: a torch.compile backend for the optimized variants' forwards (``veridec.optimized.compiled``)."""
    kw = dict(rule=rule, gen_length=gen_length, block_length=block_length, record_logits=True)
    start = time.perf_counter()
    if variant == "reference":
        out = reference_decode(model, prompt, mask, **kw)
    else:
        out = optimized_decode(model, prompt, mask, cache="none" if variant == "optimized" else variant,
                               compile={"backend": compile} if compile else False, **kw)
    return out, time.perf_counter() - start


def row_tokens_per_step(trace) -> float:
    """Mean over prompts of (tokens committed / steps in which the prompt committed)."""
    rates = []
    for row in range(trace.batch_size):
        steps = [len(s.positions[row]) for s in trace.steps if s.positions[row]]
        rates.append(sum(steps) / max(1, len(steps)))
    return sum(rates) / len(rates)


def row_steps(trace) -> float:
    """Mean over prompts of the number of steps in which the prompt committed a token."""
    return sum(sum(1 for s in trace.steps if s.positions[row]) for row in range(trace.batch_size)) / trace.batch_size


# -------------------------------------------------------------------------------------------- quality
def generated_lines(model, canvas_row: torch.Tensor, prompt_length: int, partial_line: str) -> tuple[list[str], bool]:
    """The lines the decoder wrote (the prompt's unfinished line first), and whether it reached EOS."""
    ids = canvas_row[prompt_length:].tolist()
    ended = model.special.eos_id in ids
    if ended:
        ids = ids[: ids.index(model.special.eos_id)]
    lines = (partial_line + model.tokenizer.decode(ids)).split("\n")
    return (lines if ended else lines[:-1]), ended  # a line cut by gen_length is not scored


def line_score(model, canvas_row: torch.Tensor, prompt_length: int, prompt_text: str) -> corpus.Score:
    """The checkers' score of the complete lines a response to ``prompt_text`` wrote."""
    written, _ = generated_lines(model, canvas_row, prompt_length, prompt_text.split("\n")[-1])
    return corpus.score_text("\n".join(written))


def validity(model, canvas, prompt, mask, texts) -> float:
    """Share of valid lines over every complete line the batch's responses [B, P + G] wrote."""
    scores = [line_score(model, canvas[row], prompt.shape[1], text) for row, text in enumerate(texts)]
    return round(sum(s.valid for s in scores) / max(1, sum(s.lines for s in scores)), 4)


def hmm_nll(canvas: torch.Tensor, prompt_mask: torch.Tensor, prompt_len: int, gen_length: int) -> float | None:
    """Exact NLL per generated token under the world HMM (rows with a non-symbol token are skipped; the oracle
    computes on the host)."""
    hmm, canvas, prompt_mask = load_world_hmm(), canvas.cpu(), prompt_mask.cpu()
    ones = torch.ones(canvas.shape[0], gen_length, dtype=prompt_mask.dtype, device="cpu")
    full_mask = torch.cat([prompt_mask, ones], 1)
    symbols = ((canvas < hmm.num_symbols) | (full_mask == 0)).all(dim=1)
    if not symbols.any():
        return None
    rows = canvas[symbols].clamp_max(hmm.num_symbols - 1)
    full = hmm.log_likelihood(rows, full_mask[symbols])
    prefix = hmm.log_likelihood(rows[:, :prompt_len], prompt_mask[symbols])
    return round(-(full - prefix).mean().item() / gen_length, 4)
