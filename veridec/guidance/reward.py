"""Reward models that score responses given as dLLM tokens or as soft embeddings (spec/guidance.md G1-G3).

Every reward model exposes ``embedding`` [V_dllm, D]: its input embedding of each dLLM token id (the
vocabulary map), and ``score(response_embeddings [B, G, D]) -> [B]``, differentiable in the embeddings, for
prompts bound with ``bind(prompts)``. ``score_tokens(tokens [B, G])`` scores hard tokens.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

PLACEHOLDER = "\x00RESPONSE\x00"


class LinearReward:
    """r(e) = sum_g <w, e_g> over the response slots: a closed-form gradient (w at every slot) for exact tests.
    ``embedding`` [V, D] is any table (e.g. random); prompts are ignored."""

    def __init__(self, embedding: torch.Tensor, weight: torch.Tensor):
        if embedding.dim() != 2 or weight.shape != embedding.shape[1:]:
            raise ValueError(f"weight must have shape [D] = [{embedding.shape[-1]}] for an embedding [V, D], "
                             f"got {tuple(weight.shape)}")
        self.embedding, self.weight = embedding, weight

    def bind(self, prompts: list[str]) -> "LinearReward":
        return self

    def score(self, response_embeddings: torch.Tensor) -> torch.Tensor:
        return (response_embeddings * self.weight).sum(dim=(1, 2))  # [B]

    def score_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.score(self.embedding[tokens])


class TransformersReward:
    """A transformers ``AutoModelForSequenceClassification`` reward model (e.g. Skywork-Reward-V2) behind the
    dLLM's vocabulary: the chat template is rendered once around a placeholder response and split into prefix
    and suffix embeddings per prompt; the response slots go between; rows are left-padded (with inputs_embeds
    the score head pools the last position); the score is ``logits[:, 0]``."""

    def __init__(self, model, tokenizer, dllm_tokenizer, unmatched: str = "zero"):
        if unmatched not in ("zero", "unk"):
            raise ValueError(f"unmatched must be one of ['zero', 'unk'], got {unmatched!r}")
        if getattr(model.config, "num_labels", 0) < 1 or not hasattr(model, "score"):
            raise ValueError("the reward folder's model has no score head (a SequenceClassification model is needed)")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the reward tokenizer has no chat template")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.table = model.get_input_embeddings().weight  # [V_R, D]
        self.reward_ids = vocabulary_map(dllm_tokenizer, tokenizer, unmatched)  # [V_dllm], -1 = unmatched
        matched = (self.reward_ids >= 0)[:, None]
        self.embedding = torch.where(matched, self.table[self.reward_ids.clamp_min(0)].detach(), 0.0)  # [V_dllm, D]
        self.prefix = self.suffix = None

    def bind(self, prompts: list[str]) -> "TransformersReward":
        """Cache the chat template's prefix and suffix embeddings for each prompt."""
        bound = copy.copy(self)
        pieces = [self.template_ids(p) for p in prompts]
        ids = lambda t: torch.tensor(t, dtype=torch.long, device=self.table.device)  # noqa: E731
        bound.prefix = [self.table[ids(a)].detach() for a, _ in pieces]
        bound.suffix = [self.table[ids(b)].detach() for _, b in pieces]
        return bound

    def template_ids(self, prompt: str) -> tuple[list[int], list[int]]:
        """Reward-token ids of the chat template before and after the response to ``prompt``."""
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": PLACEHOLDER}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False)
        if PLACEHOLDER not in text:
            raise ValueError("the reward tokenizer's chat template does not place the assistant response")
        before, after = text.split(PLACEHOLDER, 1)
        encode = lambda s: self.tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
        return encode(before), encode(after)

    def score(self, response_embeddings: torch.Tensor) -> torch.Tensor:
        if self.prefix is None:
            raise ValueError("bind(prompts) first: the reward model scores a response to a prompt")
        if len(self.prefix) != response_embeddings.shape[0]:
            raise ValueError(f"bound to {len(self.prefix)} prompts, got {response_embeddings.shape[0]} responses")
        rows = [torch.cat([a, r, b]) for a, r, b in zip(self.prefix, response_embeddings, self.suffix)]
        width = max(len(r) for r in rows)
        dim = response_embeddings.shape[-1]
        embeds = torch.stack([torch.cat([r.new_zeros(width - len(r), dim), r]) for r in rows])  # left-padded
        mask = torch.stack([torch.arange(width, device=r.device) >= width - len(r) for r in rows]).long()
        return self.model(inputs_embeds=embeds.to(self.table.dtype), attention_mask=mask).logits[:, 0]

    def score_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.score(self.embedding[tokens])


def vocabulary_map(dllm_tokenizer, reward_tokenizer, unmatched: str = "zero") -> torch.Tensor:
    """[V_dllm] reward-token id of the identical token string, or -1 (zero embedding) / unk when unmatched."""
    vocab = reward_tokenizer.get_vocab()
    unk = reward_tokenizer.unk_token_id if unmatched == "unk" else None
    if unmatched == "unk" and unk is None:
        raise ValueError("unmatched='unk' needs a reward tokenizer with an unk token")
    strings = dllm_tokenizer.convert_ids_to_tokens(list(range(len(dllm_tokenizer))))
    return torch.tensor([vocab.get(s, -1 if unk is None else unk) for s in strings], dtype=torch.long, device="cpu")


def load_reward_model(folder: str | Path, dllm_tokenizer, unmatched: str = "zero",
                      dtype: torch.dtype = torch.float32) -> TransformersReward:
    """A local ``AutoModelForSequenceClassification`` folder (config.json, safetensors, tokenizer with a chat
    template); nothing is downloaded."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    import json

    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder}: no config.json (a local reward model folder is needed)")
    architectures = json.loads((folder / "config.json").read_text()).get("architectures") or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(f"{folder}: architectures {architectures} has no score head (a ...ForSequenceClassification "
                         "reward model is needed)")
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=dtype, local_files_only=True,
                                                               use_safetensors=True)  # never a pickle
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return TransformersReward(model, tokenizer, dllm_tokenizer, unmatched)
