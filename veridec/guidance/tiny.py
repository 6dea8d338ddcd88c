"""A tiny random Qwen3ForSequenceClassification reward folder, built locally (tests, the shipped reward)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..models.tokenizer import char_tokenizer

CHAT_TEMPLATE = ("{% for message in messages %}<{{ message['role'] }}>{{ message['content'] }}\n{% endfor %}")


def reward_tokenizer():
    """The character tokenizer (LLaDA specials) with a plain chat template: "<user>prompt\\n<assistant>reply\\n"."""
    tokenizer = char_tokenizer("llada")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_reward_model(seed: int = 0, hidden_size: int = 32, layers: int = 2):
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    tokenizer = reward_tokenizer()
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=hidden_size // 4, num_labels=1, pad_token_id=tokenizer.pad_token_id,
                         max_position_embeddings=1024)
    torch.manual_seed(seed)
    return Qwen3ForSequenceClassification(config), tokenizer


def write_tiny_reward_model(folder: str | Path, seed: int = 0, **sizes) -> Path:
    model, tokenizer = tiny_reward_model(seed, **sizes)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
