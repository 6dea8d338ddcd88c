"""Cases for block-diffusion checks (spec/block_diffusion.md BD9): SDAR / TraDo's settings, the simplest first."""

from __future__ import annotations

from hypothesis import strategies as st

STRATEGIES = ("low_confidence_dynamic", "low_confidence_static", "sequential")


@st.composite
def sdar_settings(draw, names, eos_id: int | None, sampled: bool = False):
    """The settings among ``names`` (the block structure always: the target needs it): blocks of 4, 2, 1 or 8,
    1-8 new tokens, 1-6 steps; temperature 0 only unsampled (the published code fails there, BD7.1); top-k,
    top-p, the strategies (entropy_bounded where ``eb_threshold`` is named), thresholds, a stop at EOS."""
    settings = {"gen_length": draw(st.integers(1, 8)), "block_length": draw(st.sampled_from((4, 2, 1, 8))),
                "denoising_steps": draw(st.integers(1, 6)),
                "temperature": draw(st.sampled_from((1.0, 0.7) if sampled else (1.0, 0.7, 0.0))),
                "top_k": draw(st.sampled_from((0, 3, 1))), "top_p": draw(st.sampled_from((1.0, 0.9))),
                "remasking_strategy": draw(st.sampled_from(
                    STRATEGIES + (("entropy_bounded",) if "eb_threshold" in names else ()))),
                "confidence_threshold": draw(st.sampled_from((0.85, 0.5, 0.3)))}
    if settings["remasking_strategy"] == "entropy_bounded":
        settings["eb_threshold"] = draw(st.sampled_from((1.0, 0.35, 5.0)))
    if "stopping_criteria_idx" in names and eos_id is not None:
        settings["stopping_criteria_idx"] = draw(st.sampled_from((None, [eos_id])))
    structure = ("gen_length", "block_length", "denoising_steps")
    return {name: value for name, value in settings.items() if name in names or name in structure}
