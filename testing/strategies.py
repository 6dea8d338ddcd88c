"""Hypothesis strategies for decoder checks: cases (prompt, padding, seed, settings) and their parts; joints
and decode states for rule and theorem tests (``exact_joints``, ``float_joints``, ``decode_states``,
``clusters``, from veridec.proofs_checks.strategies).

A case is plain JSON (``{"prompt", "attention_mask", "seed", "settings"}``), so a failure prints as a
reproducer. Every choice lists its simplest value first, so shrinking moves towards one row, short prompts,
one block, temperature 0 and the first alternative.

How each family draws its settings, and where its thresholds may be drawn at a confidence of the model, is the
family's (``testing.families``).
"""

from __future__ import annotations

from hypothesis import strategies as st

from veridec.proofs_checks.strategies import clusters, decode_states, exact_joints, float_joints

from .families.block import block_settings, thresholds
from .families.common import STRUCTURE, ordinary_tokens, prompts
from .families.dream import dream_settings

__all__ = ["STRUCTURE", "block_settings", "cases", "clusters", "decode_states", "dream_settings", "exact_joints",
           "float_joints", "ordinary_tokens", "prompts", "thresholds"]


@st.composite
def cases(draw, model, target, names, defaults: dict, max_batch: int = 3, padding: bool = True, fixed=None,
          sampled: bool = False):
    """A whole case for ``target``'s settings that the candidate names (``names``), of at most ``max_batch`` rows
    (and the target's own limit), drawn as its family draws them (``testing.families``); ``fixed`` (a dict, or a
    strategy of dicts) overrides drawn settings; ``sampled``: temperatures > 0 only (tier S)."""
    family = target.family
    prompt, mask = draw((family.prompts or prompts)(model, min(max_batch, target.max_batch or max_batch), padding,
                                                    infill=family.infill))
    settings = draw(family.settings(names, model, defaults, sampled))
    if fixed is not None:
        settings.update(draw(fixed) if isinstance(fixed, st.SearchStrategy) else fixed)
    return {"prompt": prompt, "attention_mask": mask, "seed": draw(st.integers(0, 2**31 - 1)), "settings": settings}
