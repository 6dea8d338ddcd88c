"""Hypothesis strategies for decoder checks: cases (prompt, padding, seed, settings) and their parts; joints
and decode states for rule and theorem tests (``exact_joints``, ``float_joints``, ``decode_states``,
``clusters``, from veridec.proofs_checks.strategies).

A case is plain JSON (``{"prompt", "attention_mask", "seed", "settings"}``), so a failure prints as a
reproducer. Every choice lists its simplest value first, so shrinking moves towards one row, short prompts,
one block, temperature 0 and the first alternative.

``threshold`` may be drawn as ``{"at_confidence": r}``, r = 1..3: the first step's confidence ranked r (0 =
the highest; spec FD2, from a full forward of the initial canvas), resolved to a number before the case runs, so that
a threshold comparison meets a confidence exactly equal to it (inclusive and strict rules differ only there).
"""

from __future__ import annotations

import inspect

from hypothesis import strategies as st

from veridec.proofs_checks.strategies import clusters, decode_states, exact_joints, float_joints

from .hooks import LOGITS_HOOK, TOKENS_HOOK
from .editing_cases import editing_settings
from .sdar_cases import llada2_settings, sdar_settings
from .wino_cases import wino_settings

__all__ = ["block_settings", "cases", "clusters", "decode_states", "dream_settings", "exact_joints",
           "float_joints", "prompts", "thresholds"]

TEMPERATURES = (0.0, 0.7, 1.0)
THRESHOLDS = (0.5, 0.05, 0.2, 0.9)
FACTORS = (1.0, 0.5, 2.0, 4.0)
DREAM_ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")
MAX_PROMPT = 6
STRUCTURE = ("gen_length", "block_length", "steps")  # the target always gets these (the candidate if it names them)


def ordinary_tokens(model) -> list[int]:
    """Token ids a prompt may hold: below 96 (text in the tiny tokenizers) and not special."""
    special = {getattr(model.special, name) for name in ("mask_id", "eos_id", "eot_id", "pad_id")}
    return [i for i in range(min(model.vocab_size, 96)) if i not in special]


@st.composite
def prompts(draw, model, max_batch: int = 3, padding: bool = True, infill: bool = False):
    """(prompt [B][P], attention_mask [B][P] or None): left-padded rows of 1..6 real tokens."""
    tokens = ordinary_tokens(model)
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, MAX_PROMPT))
    rows = [draw(st.lists(st.sampled_from(tokens), min_size=length, max_size=length)) for _ in range(batch)]
    mask = None
    if padding and batch > 1 and draw(st.booleans()):
        real = [draw(st.integers(1, length)) for _ in range(batch)]
        mask = [[0] * (length - n) + [1] * n for n in real]
        rows = [[model.special.pad_id] * (length - n) + row[length - n:] for row, n in zip(rows, real)]
    if infill and length >= 2 and draw(st.booleans()):
        rows[0][-1] = model.special.mask_id  # a prompt mask: decoded with the first block (spec SQ1.2)
    return rows, mask


@st.composite
def block_settings(draw, names, defaults: dict, sampled: bool = False):
    """LLaDA / Fast-dLLM settings among ``names``: blocks, steps, temperature, remasking, rule. A candidate that
    names no ``block_length`` (``steps``) decodes as one block (one token per step) on the target's side."""
    blocks, block_length = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    settings = {"gen_length": blocks * block_length, "block_length": block_length,
                "steps": blocks * draw(st.integers(1, block_length)),
                "temperature": draw(st.sampled_from(TEMPERATURES[1:] if sampled else TEMPERATURES)),
                "remasking": draw(st.sampled_from(("low_confidence", "random")))}
    if "cfg_scale" in names:
        settings["cfg_scale"] = draw(st.sampled_from((0.0, 1.5)))
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
    numbers = st.sampled_from(THRESHOLDS) | st.builds(lambda r: {"at_confidence": r}, st.integers(1, 3))
    return (st.just(None) | numbers) if default in (None, inspect.Parameter.empty) else numbers


@st.composite
def dream_settings(draw, names, tokens=range(96), sampled: bool = False):
    """Dream's settings among ``names``; its hooks (when named) drawn as descriptions (testing.hooks), or absent,
    over prompt-free ``tokens``. ``sampled``: temperatures > 0 only (tier S)."""
    new = draw(st.integers(1, 8))
    steps = draw(st.integers(1, new + 2))
    settings = {"max_new_tokens": new, "steps": steps,
                "alg": draw(st.sampled_from(DREAM_ALGS)),
                "temperature": draw(st.sampled_from(TEMPERATURES[1:] if sampled else TEMPERATURES[:2])),
                "top_p": draw(st.sampled_from((None, 0.9))), "top_k": draw(st.sampled_from((None, 5))),
                "alg_temp": draw(st.sampled_from((None, 0.5)))}
    settings = {name: value for name, value in settings.items() if name in names}
    if TOKENS_HOOK in names and draw(st.booleans()):
        settings[TOKENS_HOOK] = {"step": draw(st.sampled_from([None, *range(steps)])),
                                 "position": -draw(st.integers(1, new)), "token": draw(st.sampled_from(tokens))}
    if LOGITS_HOOK in names and draw(st.booleans()):
        settings[LOGITS_HOOK] = {"from_step": draw(st.integers(0, steps - 1)),
                                 "token": draw(st.sampled_from(tokens)), "bias": draw(st.sampled_from((5.0, -5.0)))}
    return settings


@st.composite
def cases(draw, model, target, names, defaults: dict, max_batch: int = 3, padding: bool = True, fixed=None,
          sampled: bool = False):
    """A whole case for ``target``'s settings that the candidate names (``names``), of at most ``max_batch`` rows
    (and the target's own limit); ``fixed`` (a dict, or a strategy of dicts) overrides drawn settings;
    ``sampled``: temperatures > 0 only (tier S)."""
    family = target.family
    prompt, mask = draw(prompts(model, min(max_batch, target.max_batch or max_batch), padding,
                                infill=family in ("block", "wino")))
    if family == "dream":
        settings = draw(dream_settings(names, ordinary_tokens(model), sampled))
    elif family == "wino":
        settings = draw(wino_settings(names, sampled))
    elif family == "editing":
        settings = draw(editing_settings(names, sampled))
    elif family == "sdar":
        settings = draw(sdar_settings(names, model.special.eos_id, sampled))
    elif family == "llada2":
        settings = draw(llada2_settings(names, model.special.eos_id, sampled))
    else:
        settings = draw(block_settings(names, defaults, sampled))
    if fixed is not None:
        settings.update(draw(fixed) if isinstance(fixed, st.SearchStrategy) else fixed)
    return {"prompt": prompt, "attention_mask": mask, "seed": draw(st.integers(0, 2**31 - 1)), "settings": settings}
