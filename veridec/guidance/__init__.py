"""Reward models and gradient-based reward guidance (spec/guidance.md): reward interfaces (``reward``), the
EntRGi / Expectation / APS guidance vector (``guide``), the guided token choice (``sampling``), FastGuide's
hybrid step (``fastguide``), the shipped and tiny reward models (``shipped``, ``tiny``).

Imports the models, the rules and traces of the shared floor; the decoders and the harness import it."""

from .guide import GuidanceParams, guidance_vector
from .reward import LinearReward, TransformersReward, load_reward_model

__all__ = ["GuidanceParams", "LinearReward", "TransformersReward", "guidance_vector", "load_reward_model"]
