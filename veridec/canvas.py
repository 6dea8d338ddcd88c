"""The starting canvas every decoder builds: the prompt, then masks (spec SQ1.1, SQ2.1); left-padded batches; a
block decoder's canvas rounded up to whole blocks (spec/block_diffusion.md BD2, spec/editing.md ED1)."""

from __future__ import annotations

import torch

from .checks import check_has_data


def initial_canvas(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None, gen_length: int,
                   mask_id: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """prompt [B, P] -> canvas [B, P + gen_length] with masks after the prompt, and the attention mask
    extended with ones over the generation (None stays None). Checks the prompt (``check_prompt``) and the
    model's context length."""
    check_prompt(model, prompt, attention_mask, mask_id)
    batch, prompt_len = prompt.shape
    if prompt_len + gen_length > model.max_length:
        raise ValueError(f"prompt length {prompt_len} + gen_length {gen_length} exceeds the model's "
                         f"max_length {model.max_length}")
    x = torch.full((batch, prompt_len + gen_length), mask_id, dtype=torch.long, device=model.device)
    x[:, :prompt_len] = prompt
    return x, extended_mask(attention_mask, gen_length, model.device)


def extended_mask(attention_mask: torch.Tensor | None, gen_length: int, device) -> torch.Tensor | None:
    """The prompt's attention mask [B, P] extended with ones over ``gen_length`` generated positions, [B, P + G]
    on ``device`` (None stays None: no padding)."""
    if attention_mask is None:
        return None
    ones = torch.ones(attention_mask.shape[0], gen_length, dtype=attention_mask.dtype, device=attention_mask.device)
    return torch.cat([attention_mask, ones], dim=-1).to(device)


def check_prompt(model, prompt, attention_mask, mask_id: int) -> None:
    """A clear ValueError for a prompt no decoder can read (spec SQ0.6): not an integer tensor [B, P] with B, P
    >= 1, ids outside the model's vocabulary, a mask id outside it, an attention mask of another shape or with
    values other than 0 and 1, a row whose mask hides its whole prompt, a row made only of the mask token."""
    if not isinstance(prompt, torch.Tensor) or prompt.dtype == torch.bool or prompt.is_floating_point() \
            or prompt.is_complex():
        kind = f"dtype {prompt.dtype}" if isinstance(prompt, torch.Tensor) else type(prompt).__name__
        raise ValueError(f"prompt must be an integer tensor of token ids (torch.long), got {kind}")
    check_has_data("prompt", prompt)
    check_has_data("attention_mask", attention_mask)
    if prompt.dim() != 2 or 0 in prompt.shape:
        raise ValueError(f"prompt must be [B, P] with B, P >= 1 (one prompt: prompt[None]), got shape "
                         f"{tuple(prompt.shape)}")
    vocab = getattr(model, "vocab_size", None)  # a model that does not say is checked against [0, inf)
    if not 0 <= mask_id < (vocab or float("inf")):
        raise ValueError(f"mask_id must lie in [0, {vocab or 'inf'}) (the model's vocabulary), got {mask_id}")
    low, high = int(prompt.min()), int(prompt.max())
    if low < 0 or high >= (vocab or float("inf")):
        raise ValueError(f"prompt: token ids must lie in [0, {vocab or 'inf'}) (the model's vocabulary), got ids "
                         f"from {low} to {high}")
    real = torch.ones_like(prompt, dtype=torch.bool) if attention_mask is None else _prompt_mask(attention_mask, prompt)
    for row in range(prompt.shape[0]):
        if not real[row].any():
            raise ValueError(f"attention_mask hides the whole prompt of row {row}: every row needs a real token")
        if (prompt[row][real[row]] == mask_id).all():
            raise ValueError(f"prompt row {row} is made only of the mask token: nothing conditions the decode "
                             "(give it at least one real token)")


def _prompt_mask(attention_mask, prompt: torch.Tensor) -> torch.Tensor:
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != prompt.shape:
        shape = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else type(attention_mask)
        raise ValueError(f"attention_mask must have the prompt's shape {tuple(prompt.shape)}, got {shape}")
    if not ((attention_mask == 0) | (attention_mask == 1)).all():
        raise ValueError("attention_mask must hold 0 (left padding) and 1 (a token) only")
    return attention_mask.bool().to(prompt.device)


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows of any lengths -> ids [B, W] left-padded with ``pad_id`` and attention mask [B, W] (long),
    on the host (the caller moves them to the model's device)."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad_id] * (width - len(r)) + list(r) for r in rows], dtype=torch.long, device="cpu")
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device="cpu")
    return ids, mask


def whole_blocks(length: int, block_size: int) -> int:
    """``length`` positions rounded up to whole blocks of ``block_size``."""
    return -(-length // block_size) * block_size
