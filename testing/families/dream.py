"""The Dream family (target ``dream``; spec/sequential.md SQ2): its cases (hooks drawn as descriptions,
testing.hooks), knobs, and the official ``diffusion_generate`` with the defect it deviates by (SQ2.8)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ..hooks import LOGITS_HOOK, TOKENS_HOOK
from ..official import Official, OfficialDefect, canvases_before, defect
from ..flips import FlipScore
from .common import KNOB_TEMPERATURES, KNOB_TOP_K, KNOB_TOP_P, TEMPERATURES, Family, choices, ordinary_tokens

DREAM_SETTINGS = ("max_new_tokens", "steps", "eps", "alg", "alg_temp", "temperature", "top_p", "top_k",
                  TOKENS_HOOK, LOGITS_HOOK)
DREAM_ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")


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


def _drawn(names, model, defaults: dict, sampled: bool):
    return dream_settings(names, ordinary_tokens(model), sampled)


def any_steps(settings: dict) -> list[dict]:
    """``steps`` changed to any other count up to two more than the new tokens."""
    return [{**settings, "steps": k} for k in range(1, settings["max_new_tokens"] + 3) if k != settings["steps"]]


DREAM_SCORES = {"maskgit_plus": "probability", "topk_margin": "probability margin", "entropy": "entropy"}


def dream_flip_score(settings: dict) -> FlipScore | str:
    """What Dream ranks (SQ2.5; spec EC13): its ``alg``'s confidence, a count per step and no threshold; why not
    where the decisions are draws or the law is filtered."""
    if (settings.get("temperature") or 0) > 0 or settings.get("alg_temp") or settings.get("alg") == "origin":
        return "sampled (temperature, alg_temp or alg origin): its decisions are draws"
    if settings.get("top_p") not in (None, 1.0) or settings.get("top_k") is not None:
        return "top-p / top-k filter the law its confidence is taken from"
    if any(hook in settings for hook in (TOKENS_HOOK, LOGITS_HOOK)):
        return "hooks change the canvas or the logits"
    return FlipScore(DREAM_SCORES[settings.get("alg", "maskgit_plus")])


FAMILY = Family("dream", _drawn, knobs={
    "top_k": choices("top_k", KNOB_TOP_K), "top_p": choices("top_p", KNOB_TOP_P), "steps": any_steps,
    "temperature": choices("temperature", KNOB_TEMPERATURES), "alg": choices("alg", DREAM_ALGS)},
    flip_score=dream_flip_score)


ROW_CLAMP = ("SQ2.8", "a row has fewer masks than the step's count: the official loop writes the mask token over "
             "committed or prompt tokens", "deviates")


def dream_defect(settings: dict, steps: list, model, prompt, mask) -> OfficialDefect | None:
    """SQ2.8: with a scheduled count (maskgit_plus, topk_margin, entropy; ``alg_temp`` unset) ``k`` from the mean
    masks per row (SQ2.4), the first step at which a row holds fewer than ``k`` masks."""
    from veridec.rules.dream import DreamParams, _transfer_count

    if settings.get("alg", "origin") == "origin" or settings.get("alg_temp") or "tokens_per_step" in settings:
        return None
    total = settings["max_new_tokens"]
    params = DreamParams(steps=settings["steps"], alg=settings["alg"])
    timesteps = torch.linspace(1, settings.get("eps", 1e-3), settings["steps"] + 1, device="cpu")
    for k, canvas in enumerate(canvases_before(steps, model, prompt, mask, total)):
        masked = canvas == model.special.mask_id  # [B, L]
        count = _transfer_count(masked, timesteps[k], timesteps[k + 1], k == settings["steps"] - 1, params)
        if bool((masked.sum(dim=1) < count).any()):
            return defect(ROW_CLAMP, k)
    return None


def _dream_defects(case, steps, stalled, model, prompt, mask):
    return dream_defect(case["settings"], steps, model, prompt, mask)


DREAM = Official("Dream-org/Dream diffusion_generate", _dream_defects)
