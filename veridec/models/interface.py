"""The one interface every decoder uses: a mask predictor maps a canvas to per-position logits.

Contract (spec/models.md, clauses M1-M4):
- input: canvas ``x`` [B, L] of token ids (``special.mask_id`` marks masked positions) and an optional
  ``attention_mask`` [B, L] (1 = real token, 0 = left padding);
- output: ``logits`` [B, L, V] where ``logits[:, i]`` scores the token at position i, whatever the layout's
  internal convention (Dream's shift is undone by the adapter);
- layout facts live on the predictor: ``special`` (mask/EOS/EoT/pad ids) and ``logit_shift``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class SpecialTokens:
    """Token ids a decoder needs; ``None`` where the model has no such token."""

    mask_id: int
    eos_id: int | None = None
    eot_id: int | None = None
    pad_id: int | None = None


@dataclass
class PredictorOutput:
    """What a forward returns; ``.logits`` makes it a drop-in for code written against HF models."""

    logits: torch.Tensor  # [B, L, V]
    attentions: tuple[torch.Tensor, ...] | None = None  # per layer [B, H, Q, Lk]


@runtime_checkable
class MaskPredictor(Protocol):
    """Anything a decoder can run on: transformers (LLaDA/Dream layouts) and oracle models."""

    special: SpecialTokens
    logit_shift: int  # 0: token i is scored at position i (LLaDA); 1: at position i-1 (Dream)
    vocab_size: int  # V, the width of the logits
    max_length: int  # longest canvas the model accepts

    @property
    def device(self) -> torch.device: ...

    def __call__(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> PredictorOutput: ...


def takes_narrow_logits(model) -> bool:
    """Whether ``model`` declares narrowed forwards (spec/models.md M5.1: every forward takes ``logit_rows``) with
    ``narrow_logits = True`` on its class, or on the
    instance as a wrapper that passes them on does. Looked up statically: a proxy that forwards attributes through
    ``__getattr__`` but reads per-position outputs (``veridec.recording.RecordingModel``) does not inherit it."""
    return inspect.getattr_static(model, "narrow_logits", False) is True


def query_positions(token_positions: torch.Tensor, logit_shift: int,
                    first_real: torch.Tensor | int = 0) -> torch.Tensor:
    """Where a query must run to score the tokens at ``token_positions`` [B, Q] (spec M3).

    Token i is scored at position i - logit_shift, except the first real token of a row (``first_real``, [B, 1]
    or an int), which has no predecessor and is scored at its own position.
    """
    shifted = token_positions - logit_shift
    return torch.maximum(shifted, torch.as_tensor(first_real, device=shifted.device))  # broadcasts


def first_real_position(attention_mask: torch.Tensor | None) -> torch.Tensor | int:
    """Each row's first real (unpadded) position [B, 1], or 0 without an attention mask."""
    return 0 if attention_mask is None else attention_mask.int().argmax(dim=1, keepdim=True)


def scoring_queries(length: int, logit_shift: int, attention_mask: torch.Tensor | None,
                    device: torch.device) -> torch.Tensor:
    """The query scoring each canvas token in a full forward, [B, L] (or [1, L] without padding; spec M3)."""
    positions = torch.arange(length, device=device)[None]  # [1, L]
    return query_positions(positions, logit_shift, first_real_position(attention_mask)).expand(
        1 if attention_mask is None else attention_mask.shape[0], length)


def realign_shifted(raw_logits: torch.Tensor, logit_shift: int, attention_mask: torch.Tensor | None = None,
                    logit_rows: slice | None = None):
    """Turn raw outputs [B, L, V] (position j scores token j + shift) into token-aligned logits [B, L, V].

    For a shift of 1 (Dream), the first real token of a row has no predecessor and reuses its own position's
    output, as Dream's ``diffusion_generate`` does for position 0 of an unpadded row. ``logit_rows`` [a, b) (M5.1):
    raw_logits [B, R, V] hold the query rows from max(0, a - shift) on, and tokens a .. b - 1 come back [B, b - a, V].
    """
    if logit_shift == 0:
        return raw_logits
    if logit_shift != 1:
        raise ValueError(f"logit_shift must be 0 or 1, got {logit_shift}")
    tokens = slice(0, raw_logits.shape[1]) if logit_rows is None else logit_rows
    positions = torch.arange(tokens.start, tokens.stop, device=raw_logits.device)[None]  # [1, W]
    first_real = first_real_position(attention_mask)  # [B, 1], or 0 without padding
    source = query_positions(positions, 1, first_real).expand(raw_logits.shape[0], -1)  # [B, W]
    source = source - max(0, tokens.start - 1)  # raw_logits' rows start at the query scoring token a
    return raw_logits.gather(1, source[..., None].expand(*source.shape, raw_logits.shape[-1]))


def check_canvas(x: torch.Tensor, attention_mask: torch.Tensor | None, max_length: int) -> torch.Tensor:
    """Validate a canvas and return its attention mask as bool [B, L] (all True when none is given)."""
    if x.dim() != 2 or x.dtype != torch.long:
        raise ValueError(f"x must be a LongTensor [B, L], got dtype {x.dtype} and shape {tuple(x.shape)}")
    if x.shape[1] > max_length:
        raise ValueError(f"canvas length {x.shape[1]} exceeds the model's max_length {max_length}")
    if attention_mask is None:
        return torch.ones_like(x, dtype=torch.bool)
    if attention_mask.shape != x.shape:
        raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} must equal x's {tuple(x.shape)}")
    mask = attention_mask.bool()
    if not mask.any(dim=1).all():
        raise ValueError("attention_mask: every row needs at least one real (1) position")
    first_real = mask.int().argmax(dim=1, keepdim=True)  # [B, 1]
    positions = torch.arange(x.shape[1], device=x.device)[None, :]  # [1, L]
    if not torch.equal(mask, positions >= first_real):
        raise ValueError("attention_mask must be left padding: zeros, then ones to the end of the row")
    return mask
