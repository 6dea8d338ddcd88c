"""The reward model shipped inside the package: a tiny Qwen3ForSequenceClassification trained by
``python -m tools.training.reward`` (a checkout) to predict the corpus checkers' validity of a response."""

from __future__ import annotations

from pathlib import Path

from .reward import TransformersReward, load_reward_model

REWARD_FOLDER = Path(__file__).resolve().parent.parent / "assets" / "reward"


def load_default_reward(dllm_tokenizer) -> TransformersReward:
    return load_reward_model(REWARD_FOLDER, dllm_tokenizer)

