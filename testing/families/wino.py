"""The WINO family (target ``wino``: ``decoding_wino``, spec/wino.md): its settings, knobs, and both thresholds
drawable as confidences of the decode itself, so that the strict comparisons of WN4.4 (a draft passes ``c >
threshold``) and WN4.5 (a verified token is revoked when ``b < threshold_back``) meet equality, where strict and
non-strict rules differ.

- ``threshold = {"at_confidence": r}`` (r = 1..3): the r-th largest draft confidence of row 0's first step
  (0 = the largest), read from the reference decode at ``threshold = 0`` (the first step's confidences do not
  depend on either threshold);
- ``threshold_back = {"at_confidence": r}`` (r = 0..2): the r-th smallest verified confidence of row 0's second
  step in block 0, read from the reference decode at ``threshold_back = 1`` (it revokes the smallest
  ``last - 1`` there; that step's canvas does not depend on ``threshold_back``). Where block 0 has no second
  step with a revocation to read, the default 0.9.

The reference runs under the case's seed, as the two sides do, so its draws at temperature > 0 are theirs.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from veridec.reference import wino

from .common import (KNOB_TEMPERATURES, KNOB_THRESHOLDS, Family, at_confidence, choices, divisor_block_lengths,
                     kept, temperatures, with_events)

WINO_SETTINGS = ("gen_length", "block_length", "temperature", "threshold", "threshold_back")
THRESHOLDS = (0.6, 0.05, 0.2, 0.9)  # the official default first
BACK_THRESHOLDS = (0.9, 0.5, 0.99, 0.2)
BACK_FALLBACK = 0.9
WINO_STRUCTURE = ("gen_length", "block_length")  # the target always gets these


@st.composite
def wino_settings(draw, names, sampled: bool = False):
    """WINO's settings among ``names``: 1..3 blocks of 1..8 positions, a temperature (> 0 when ``sampled``),
    both thresholds (numbers or confidences of the decode). A candidate that names no ``block_length`` decodes
    as one block on the target's side too."""
    blocks, block_length = draw(st.integers(1, 3)), draw(st.integers(1, 8))
    settings = {"gen_length": blocks * block_length, "block_length": block_length,
                "temperature": draw(temperatures(sampled)),
                "threshold": draw(st.sampled_from(THRESHOLDS) | at_confidence(1, 3)),
                "threshold_back": draw(st.sampled_from(BACK_THRESHOLDS) | at_confidence(0, 2))}
    if "block_length" not in names:
        settings["block_length"] = settings["gen_length"]
    return kept(settings, names, WINO_STRUCTURE)


def resolve_wino_case(case: dict, model, prompt: torch.Tensor, mask) -> dict:
    """The case with its ``{"at_confidence": r}`` thresholds replaced by the confidences they name (module
    docstring); ``prompt`` [B, P] and ``mask`` are the case's tensors (WINO takes no padding: a mask is left for
    the target to refuse)."""
    settings = dict(case["settings"])
    if isinstance(settings.get("threshold"), dict):
        settings["threshold"] = _draft_confidence(model, prompt, settings, case["seed"])
    if isinstance(settings.get("threshold_back"), dict):
        settings["threshold_back"] = _back_confidence(model, prompt, settings, case["seed"])
    return {**case, "settings": settings}


def _decode(model, prompt, settings: dict, seed: int, **thresholds):
    torch.manual_seed(seed)
    known = {name: value for name, value in settings.items() if name in ("gen_length", "block_length",
                                                                          "temperature", "threshold")}
    return wino.generate(model, prompt[:1], **{**known, **thresholds})


def _draft_confidence(model, prompt, settings: dict, seed: int) -> float:
    """The r-th largest draft confidence of row 0's first step (its last one when it drafts fewer)."""
    rank = settings["threshold"]["at_confidence"]
    decoded = _decode(model, prompt, settings, seed, threshold=0.0, threshold_back=0.0)
    drafted = [e.confidence for e in decoded.events if e.step == 0 and e.kind == "commit"]  # decreasing (WN5)
    return drafted[min(rank, len(drafted) - 1)]


def _back_confidence(model, prompt, settings: dict, seed: int) -> float:
    """The r-th smallest verified confidence of block 0's second step, read from its revocations at
    ``threshold_back = 1`` (the fallback when there are none, or the second step is another block's)."""
    rank = settings["threshold_back"]["at_confidence"]
    decoded = _decode(model, prompt, settings, seed, threshold_back=1.0)
    first_block = prompt.shape[1] + settings["block_length"]
    revoked = [e.confidence for e in decoded.events
               if e.step == 1 and e.kind == "revoke" and e.position < first_block]  # increasing (WN5)
    return revoked[min(rank, len(revoked) - 1)] if revoked else BACK_FALLBACK


def _drawn(names, model, defaults: dict, sampled: bool):
    return wino_settings(names, sampled)


FAMILY = Family("wino", _drawn, knobs={
    "threshold": choices("threshold", KNOB_THRESHOLDS), "threshold_back": choices("threshold_back", BACK_THRESHOLDS),
    "temperature": choices("temperature", KNOB_TEMPERATURES), "block_length": divisor_block_lengths},
    resolve=resolve_wino_case, infill=True)

WINO = with_events(wino.generate, "wino", "WINO takes no padding (spec WN1: the official function has none)")
