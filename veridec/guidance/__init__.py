"""Reward models and gradient-based reward guidance (spec/guidance.md)."""

from .guide import GuidanceParams, guidance_vector
from .reward import LinearReward, TransformersReward, load_reward_model

__all__ = ["GuidanceParams", "LinearReward", "TransformersReward", "guidance_vector", "load_reward_model"]
