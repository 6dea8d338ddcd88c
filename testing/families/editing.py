"""The editing family (target ``editing``: LLaDA2.1's block sampler with token edits, spec/editing.md): its
settings, knobs, and both thresholds drawable as confidences of the decode itself, so that the strict comparisons
of ED4 (a mask is transferred when ``q > threshold``, a placed token edited when ``q > editing_threshold``) meet
equality, where strict and non-strict rules differ.

- ``threshold = {"at_confidence": r}`` (r = 1..3): the r-th largest confidence of the first step's masks
  (0 = the largest), read from the reference decode at ``threshold = 0`` (which transfers them all; the first
  step's confidences depend on neither threshold);
- ``editing_threshold = {"at_confidence": r}`` (r = 0..2): the r-th largest confidence of the second step's
  edits, read from the reference decode at ``editing_threshold = 0``. The first step edits nothing (its block
  holds only masks and prompt), so the second step's canvas does not depend on ``editing_threshold``; where it
  edits nothing at 0 either, the default 0.9.

The reference runs under the case's seed, as the two sides do, so its draws at temperature > 0 are theirs.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from veridec.reference import editing

from .common import (KNOB_TEMPERATURES, KNOB_THRESHOLDS, KNOB_TOP_K, KNOB_TOP_P, Family, at_confidence, choices,
                     kept, temperatures, with_events)

EDITING_SETTINGS = ("max_new_tokens", "block_size", "temperature", "top_p", "top_k", "threshold", "editing_threshold",
                    "max_post_steps", "num_to_transfer", "eos_early_stop")
THRESHOLDS = (0.95, 0.5, 0.2)  # the official default first
EDITING_THRESHOLDS = (0.9, 0.5, 0.2)
EDITING_FALLBACK = 0.9
POST_STEPS = (16, 0, 1, 2)
EDITING_STRUCTURE = ("max_new_tokens", "block_size")  # the target always gets these


@st.composite
def editing_settings(draw, names, sampled: bool = False):
    """The sampler's settings among ``names``: 1..12 new tokens in blocks of 1..6, a temperature (> 0 when
    ``sampled``) with optional top-k / top-p, both thresholds (numbers or confidences of the decode), the post
    steps, the transfer count and the EOS stop."""
    settings = {"max_new_tokens": draw(st.integers(1, 12)), "block_size": draw(st.integers(1, 6)),
                "temperature": draw(temperatures(sampled)),
                "top_k": draw(st.sampled_from((None, 3))), "top_p": draw(st.sampled_from((None, 0.9))),
                "threshold": draw(st.sampled_from(THRESHOLDS) | at_confidence(1, 3)),
                "editing_threshold": draw(st.sampled_from(EDITING_THRESHOLDS) | at_confidence(0, 2)),
                "max_post_steps": draw(st.sampled_from(POST_STEPS)),
                "num_to_transfer": draw(st.sampled_from((1, 2))), "eos_early_stop": draw(st.booleans())}
    return kept(settings, names, EDITING_STRUCTURE)


def resolve_editing_case(case: dict, model, prompt: torch.Tensor, mask) -> dict:
    """The case with its ``{"at_confidence": r}`` thresholds replaced by the confidences they name (module
    docstring); ``prompt`` [1, P] and ``mask`` are the case's tensors (a mask is left for the target to refuse)."""
    settings = dict(case["settings"])
    if isinstance(settings.get("threshold"), dict):
        rank = settings["threshold"]["at_confidence"]
        settings["threshold"] = _confidence(model, prompt, settings, case["seed"], "commit", 0, rank, None,
                                            threshold=0.0)
    if isinstance(settings.get("editing_threshold"), dict):
        rank = settings["editing_threshold"]["at_confidence"]
        settings["editing_threshold"] = _confidence(model, prompt, settings, case["seed"], "edit", 1, rank,
                                                    EDITING_FALLBACK, editing_threshold=0.0)
    return {**case, "settings": settings}


def _confidence(model, prompt, settings: dict, seed: int, kind: str, step: int, rank: int, fallback,
                **thresholds) -> float:
    """The ``rank``-th largest confidence of the ``kind`` events of ``step`` (its last one when fewer; the
    ``fallback`` when none) in the reference decode with ``thresholds`` overriding the case's."""
    torch.manual_seed(seed)
    known = {name: value for name, value in settings.items()
             if name in EDITING_SETTINGS and not isinstance(value, dict)}
    decoded = editing.generate(model, prompt[:1], **{**known, **thresholds})
    found = sorted((e.confidence for e in decoded.events if e.step == step and e.kind == kind), reverse=True)
    if not found:
        if fallback is None:
            raise ValueError("the first step transfers nothing: no confidence to draw the threshold at")
        return fallback
    return found[min(rank, len(found) - 1)]


def _drawn(names, model, defaults: dict, sampled: bool):
    return editing_settings(names, sampled)


FAMILY = Family("editing", _drawn, knobs={
    "threshold": choices("threshold", KNOB_THRESHOLDS),
    "editing_threshold": choices("editing_threshold", EDITING_THRESHOLDS),
    "max_post_steps": choices("max_post_steps", POST_STEPS[:3]), "num_to_transfer": choices("num_to_transfer", (1, 2)),
    "eos_early_stop": choices("eos_early_stop", (False, True)), "top_k": choices("top_k", KNOB_TOP_K),
    "top_p": choices("top_p", KNOB_TOP_P), "temperature": choices("temperature", KNOB_TEMPERATURES)},
    resolve=resolve_editing_case)

EDITING = with_events(editing.generate, "editing", "the editing sampler takes no padding (spec ED1: one row)")
