"""The starting canvas every decoder builds: the prompt, then masks (spec SQ1.1, SQ2.1); left-padded batches."""

from __future__ import annotations

import torch


def initial_canvas(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None, gen_length: int,
                   mask_id: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """prompt [B, P] -> canvas [B, P + gen_length] with masks after the prompt, and the attention mask
    extended with ones over the generation (None stays None). Checks the model's context length."""
    batch, prompt_len = prompt.shape
    if prompt_len + gen_length > model.max_length:
        raise ValueError(f"prompt length {prompt_len} + gen_length {gen_length} exceeds the model's "
                         f"max_length {model.max_length}")
    x = torch.full((batch, prompt_len + gen_length), mask_id, dtype=torch.long, device=model.device)
    x[:, :prompt_len] = prompt
    if attention_mask is not None:
        ones = torch.ones(batch, gen_length, dtype=attention_mask.dtype, device=attention_mask.device)
        attention_mask = torch.cat([attention_mask, ones], dim=-1).to(model.device)
    return x, attention_mask


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows of any lengths -> ids [B, W] left-padded with ``pad_id`` and attention mask [B, W] (long)."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad_id] * (width - len(r)) + list(r) for r in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
    return ids, mask
