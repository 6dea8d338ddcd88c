"""Cases for block-diffusion checks: SDAR / TraDo's settings (spec/block_diffusion.md BD9) and LLaDA2.0's (BD12.1), the
simplest first."""

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


@st.composite
def llada2_settings(draw, names, eos_id: int | None, sampled: bool = False):
    """LLaDA2.0's settings among ``names`` (spec/block_diffusion.md BD12.1; the block structure and steps always):
    blocks of 4, 2, 1 or 8, 1-8 new tokens, 1-6 steps per block, ``minimal_topk`` 1 or 2 (at most gen_length),
    thresholds, temperature 0 first, top-k / top-p of None first, the model's EOS as ``eos_id``."""
    gen = draw(st.integers(1, 8))
    settings = {"gen_length": gen, "block_length": draw(st.sampled_from((4, 2, 1, 8))),
                "steps": draw(st.integers(1, 6)), "minimal_topk": draw(st.sampled_from((1, 2) if gen > 1 else (1,))),
                "threshold": draw(st.sampled_from((0.95, 0.5, 0.2, 0.05))),
                "temperature": draw(st.sampled_from((1.0, 0.7) if sampled else (0.0, 1.0, 0.7))),
                "top_k": draw(st.sampled_from((None, 3, 1))), "top_p": draw(st.sampled_from((None, 0.9)))}
    if "eos_id" in names and eos_id is not None:
        settings["eos_id"] = eos_id
    structure = ("gen_length", "block_length", "steps")
    return {name: value for name, value in settings.items() if name in names or name in structure}
