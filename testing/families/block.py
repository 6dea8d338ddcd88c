"""The LLaDA / Fast-dLLM family: semi-autoregressive blocks with a quota, threshold or factor rule (targets
``llada``, ``fastdllm`` and ``fastdllm-2025-06``; spec/sequential.md SQ1, spec/fastdllm.md), their cases, knobs
and official loops with the defects those fail on (SQ1.9-SQ1.11, FD9).

``threshold`` may be drawn as ``{"at_confidence": r}``, r = 1..3: the first step's confidence ranked r (0 = the
highest; spec FD2, from a full forward of the initial canvas), resolved to a number before the case runs, so that
a threshold comparison meets a confidence exactly equal to it (inclusive and strict rules differ only there).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial

import torch
from hypothesis import strategies as st

from veridec.canvas import initial_canvas

from ..official import Official, OfficialDefect, canvases_before, defect
from .common import (KNOB_TEMPERATURES, KNOB_THRESHOLDS, STRUCTURE, Family, Reading, at_confidence, choices,
                     divisor_block_lengths, temperatures)

BLOCK_SETTINGS = ("steps", "gen_length", "block_length", "temperature", "remasking")
LLADA_SETTINGS = (*BLOCK_SETTINGS, "cfg_scale", "logits_eos_inf", "confidence_eos_eot_inf")
FASTDLLM_SETTINGS = (*BLOCK_SETTINGS, "threshold", "factor")
JUNE_2025_SETTINGS = (*BLOCK_SETTINGS, "threshold")
THRESHOLDS = (0.5, 0.05, 0.2, 0.9)
FACTORS = (1.0, 0.5, 2.0, 4.0)
REMASKING = ("low_confidence", "random")
CFG_SCALES = (0.0, 1.5)


@st.composite
def block_settings(draw, names, defaults: dict, sampled: bool = False):
    """LLaDA / Fast-dLLM settings among ``names``: blocks, steps, temperature, remasking, rule. A candidate that
    names no ``block_length`` (``steps``) decodes as one block (one token per step) on the target's side."""
    blocks, block_length = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    settings = {"gen_length": blocks * block_length, "block_length": block_length,
                "steps": blocks * draw(st.integers(1, block_length)),
                "temperature": draw(temperatures(sampled)), "remasking": draw(st.sampled_from(REMASKING))}
    if "cfg_scale" in names:
        settings["cfg_scale"] = draw(st.sampled_from(CFG_SCALES))
    for flag in ("logits_eos_inf", "confidence_eos_eot_inf"):
        if flag in names:
            settings[flag] = draw(st.booleans())
    if "threshold" in names:
        settings["threshold"] = draw(thresholds(defaults.get("threshold", None)))
    if "factor" in names and settings.get("threshold") is None:
        options = (None, *FACTORS) if defaults.get("factor", None) is None else FACTORS
        settings["factor"] = draw(st.sampled_from(options))
    if "block_length" not in names:  # the candidate decodes without blocks: one block for the target too
        settings["block_length"] = settings["gen_length"]
    if "steps" not in names:  # nor a schedule: one token per step, as the official defaults (steps = gen_length)
        settings["steps"] = settings["gen_length"]
    return {name: value for name, value in settings.items() if name in names or name in STRUCTURE}


def thresholds(default):
    """None (quota mode) only where the candidate's default is None; numbers; or a confidence of the model."""
    numbers = st.sampled_from(THRESHOLDS) | at_confidence(1, 3)
    return (st.just(None) | numbers) if default in (None, inspect.Parameter.empty) else numbers


def _drawn(names, model, defaults: dict, sampled: bool):
    return block_settings(names, defaults, sampled)


def block_steps(settings: dict) -> list[dict]:
    """``steps`` changed to another multiple of the blocks (at most one token per step)."""
    blocks = settings["gen_length"] // settings["block_length"]
    return [{**settings, "steps": blocks * k} for k in range(1, settings["block_length"] + 1)
            if blocks * k != settings["steps"]]


def factors(settings: dict) -> list[dict]:
    """Factor mode's knob, in quota mode only (a threshold overrides it)."""
    return choices("factor", (None, *FACTORS))(settings) if settings.get("threshold") is None else []


STRICT_THRESHOLD = Reading("a strict threshold, committing c > threshold only", "FD2",
                           "the official c >= threshold (a confidence equal to it commits)",
                           settings={"inclusive": False},
                           applies=lambda settings: settings.get("threshold") is not None)

FAMILY = Family("block", _drawn, knobs={
    "threshold": choices("threshold", KNOB_THRESHOLDS), "factor": factors, "steps": block_steps,
    "temperature": choices("temperature", KNOB_TEMPERATURES), "remasking": choices("remasking", REMASKING),
    "cfg_scale": choices("cfg_scale", CFG_SCALES), "block_length": divisor_block_lengths}, infill=True,
    readings=(STRICT_THRESHOLD,))


# ------------------------------------------------------------------------------------------- the official loops
QUOTA_EXHAUSTED = ("FD9.1", "quota mode: the block outlives its schedule, the official loop indexes past it "
                   "(IndexError)", "raises")
ENDLESS = ("FD9.2", "a step at temperature 0 commits nothing (the top-ranked candidate proposes the mask token): "
           "the official loop repeats it forever", "endless")
FACTOR_ROW_DONE = ("FD9.3", "factor mode at batch > 1: a row without candidates gets an empty threshold list "
                   "(IndexError)", "raises")
DUAL_BATCH = ("FD9.4", "dual cache at batch > 1: replace_position's indices of every row are scattered into one "
              "row (RuntimeError)", "raises")
JUNE_BATCH = ("FD9.5", "the June 2025 file has one canvas row: batch > 1 fails before the first forward "
              "(RuntimeError)", "raises")
LEFTOVERS_ACROSS_ROWS = ("FD9.6", "no cache at batch > 1: a row whose block is complete goes on committing its "
                         "masks before the block while another row decodes it (its output depends on the others)",
                         "deviates")
CFG_WITHOUT_MASK = ("SQ1.9", "cfg_scale > 0 without attention_mask: the official generate reads an unbound "
                    "variable (UnboundLocalError)", "raises")
CFG_NAN = ("SQ1.11", "cfg_scale > 0 where the model bans a token (a -inf logit in both branches): the official "
           "combination is NaN there and its argmax proposes the banned token", "deviates")
LLADA_8B_EOS = (126081, 126348)  # the EOS and EoT ids the official LLaDA generate.py hard-codes
EOS_IDS_HARD_CODED = ("SQ1.10", "logits_eos_inf / confidence_eos_eot_inf index LLaDA-8B's ids 126081 / 126348: "
                      "on a vocabulary without them IndexError, on one whose EOS / EoT are other ids other tokens "
                      "are banned", "raises")


@dataclass(frozen=True)
class FastDLLMLoop:
    """One of NVlabs/Fast-dLLM's loops, by what its defects depend on: ``one_row`` (the June 2025 file, FD9.5),
    ``full`` (no cache: every step a full forward, candidates before the block's end, FD9.6), ``dual`` (the dual
    cache's replace_position, FD9.4)."""

    one_row: bool = False
    full: bool = False
    dual: bool = False


def llada_defect(settings: dict, attention_mask, model, prompt, mask) -> OfficialDefect | None:
    """SQ1.9-SQ1.11: ML-GSAI/LLaDA ``generate`` (65cbed2) before its first forward (cfg without a mask) or at it
    (the hard-coded EOS / EoT ids: IndexError past the vocabulary, other tokens banned where the ids differ; cfg
    over a banned token: NaN)."""
    if settings.get("cfg_scale", 0) > 0 and attention_mask is None:
        return defect(CFG_WITHOUT_MASK, 0)
    if settings.get("cfg_scale", 0) > 0 and _bans_a_token(model, prompt, mask, settings["gen_length"]):
        return defect(CFG_NAN, 0)
    flags = [settings.get("logits_eos_inf", False), settings.get("confidence_eos_eot_inf", False)]
    needed = LLADA_8B_EOS[:1] if flags == [True, False] else LLADA_8B_EOS
    if not any(flags) or (model.special.eos_id, model.special.eot_id)[: len(needed)] == needed:
        return None
    entry = EOS_IDS_HARD_CODED if max(needed) >= model.vocab_size else (*EOS_IDS_HARD_CODED[:2], "deviates")
    return defect(entry, 0)


def _bans_a_token(model, prompt, mask, gen_length: int) -> bool:
    """Whether a full forward of the initial canvas gives some token the logit -inf (a model that bans it)."""
    canvas, full_mask = initial_canvas(model, prompt, mask, gen_length, model.special.mask_id)
    with torch.no_grad():
        return bool(torch.isneginf(model(canvas, attention_mask=full_mask).logits).any())


def fastdllm_defect(settings: dict, loop: FastDLLMLoop, steps: list, stalled: bool, model, prompt,
                    mask) -> OfficialDefect | None:
    """FD9: NVlabs/Fast-dLLM's ``loop`` (current: f6b35ec; the June 2025 file: 24cc59e) with no, a prefix or a
    dual cache. Step j of a block is its j-th forward (0: the refresh); the quota schedule has S = steps / blocks
    entries per block."""
    batch = prompt.shape[0]
    if loop.one_row and batch > 1:
        return defect(JUNE_BATCH, 0)
    quota = settings.get("threshold") is None and settings.get("factor") is None
    per_block = settings["steps"] // (settings["gen_length"] // settings["block_length"])
    canvases = canvases_before(steps, model, prompt, mask, settings["gen_length"])
    in_block = 0
    for k, step in enumerate(steps):
        in_block = in_block + 1 if k and step.block == steps[k - 1].block else 0
        if loop.dual and batch > 1 and in_block >= 1:
            return defect(DUAL_BATCH, k)
        if quota and in_block >= per_block:
            return defect(QUOTA_EXHAUSTED, k)
        if settings.get("factor") is not None and batch > 1 and _a_row_without_candidates(
                canvases[k], step.block, loop, settings, prompt.shape[1], model.special.mask_id):
            return defect(FACTOR_ROW_DONE, k)
        if loop.full and batch > 1 and _a_done_row_with_leftovers(canvases[k], step.block, settings,
                                                                  prompt.shape[1], model.special.mask_id):
            return defect(LEFTOVERS_ACROSS_ROWS, k)
    deterministic = settings.get("temperature", 0) == 0 and settings.get("remasking") != "random"
    if stalled and deterministic:
        return defect(ENDLESS, _first_empty_step_of_last_block(steps))
    return None


def _a_row_without_candidates(canvas: torch.Tensor, block: int, loop: FastDLLMLoop, settings: dict,
                              prompt_length: int, mask_id: int) -> bool:
    """The official factor step's candidates: masks before the block's end (no cache), masks inside the block
    (prefix, dual); a row with none while the loop goes on (some row still decodes the block)."""
    start = prompt_length + block * settings["block_length"]
    end = start + settings["block_length"]
    masked = canvas == mask_id  # [B, L]
    candidates = masked[:, :end] if loop.full else masked[:, start:end]
    return bool((candidates.sum(dim=1) == 0).any() and masked[:, start:end].any())


def _a_done_row_with_leftovers(canvas: torch.Tensor, block: int, settings: dict, prompt_length: int,
                               mask_id: int) -> bool:
    """FD9.6: some row's block is complete but it holds masks before the block (the official no-cache loop keeps
    them as candidates while another row still decodes it); ours leaves a finished row alone (P11)."""
    start = prompt_length + block * settings["block_length"]
    end = start + settings["block_length"]
    masked = canvas == mask_id  # [B, L]
    in_block = masked[:, start:end].any(dim=1)  # [B]
    done_with_leftovers = ~in_block & masked[:, :start].any(dim=1)
    return bool(done_with_leftovers.any() and in_block.any())


def _first_empty_step_of_last_block(steps: list) -> int:
    last = steps[-1].block if steps else 0
    for k, step in enumerate(steps):
        if step.block == last and not any(step.positions):
            return k
    return len(steps)


def _llada_defects(case, steps, stalled, model, prompt, mask):
    return llada_defect(case["settings"], case["attention_mask"], model, prompt, mask)


def _fastdllm_defects(loop: FastDLLMLoop, case, steps, stalled, model, prompt, mask):
    return fastdllm_defect(case["settings"], loop, steps, stalled, model, prompt, mask)


def fastdllm_official(code: str, loop: FastDLLMLoop) -> Official:
    return Official(code, partial(_fastdllm_defects, loop))


LLADA = Official("ML-GSAI/LLaDA 65cbed2 generate.py", _llada_defects)
FASTDLLM_NONE = fastdllm_official("NVlabs/Fast-dLLM f6b35ec generate", FastDLLMLoop(full=True))
FASTDLLM_PREFIX = fastdllm_official("NVlabs/Fast-dLLM f6b35ec generate_with_prefix_cache", FastDLLMLoop())
FASTDLLM_DUAL = fastdllm_official("NVlabs/Fast-dLLM f6b35ec generate_with_dual_cache", FastDLLMLoop(dual=True))
JUNE_NONE = fastdllm_official("NVlabs/Fast-dLLM 24cc59e generate", FastDLLMLoop(one_row=True, full=True))
JUNE_PREFIX = fastdllm_official("NVlabs/Fast-dLLM 24cc59e generate_with_prefix_cache", FastDLLMLoop(one_row=True))
JUNE_DUAL = fastdllm_official("NVlabs/Fast-dLLM 24cc59e generate_with_dual_cache",
                              FastDLLMLoop(one_row=True, dual=True))
