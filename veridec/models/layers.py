"""Transformer pieces: RMSNorm, rotary embedding, attention, SwiGLU. Shapes in comments.

Numerics follow the official LLaDA / Llama code (spec/models.md, M6): RMSNorm and rotary embedding run in at
least float32, rotary angles are computed in float32 (position * inv_freq), softmax over scores in at least
float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


HALF_PRECISIONS = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half precisions, the dtype itself for float32/float64 (``torch.promote_types(dtype,
    float32)`` for floating dtypes, without dispatching an operator per call)."""
    return torch.float32 if dtype in HALF_PRECISIONS else dtype


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, device: torch.device | None = None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))  # None: the default (torch.device context)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [..., D]
        xc = x.to(compute_dtype(x.dtype))
        normed = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [B, Q] (long) -> cos, sin [B, 1, Q, head_dim] in float32 (angles as the official code)."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim
    inv_freq = 1.0 / (theta**exponent)  # [D/2]
    angles = positions.float()[..., None] * inv_freq  # [B, Q, D/2]
    angles = torch.cat([angles, angles], dim=-1)[:, None]  # [B, 1, Q, D]
    return angles.cos(), angles.sin()


def apply_rope(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """t [B, H, Q, D] rotated by (cos, sin) [B, 1, Q, D], half-split (rotate_half) convention."""
    dtype = compute_dtype(t.dtype)
    tc, cos, sin = t.to(dtype), cos.to(dtype), sin.to(dtype)
    half = t.shape[-1] // 2
    rotated = torch.cat([-tc[..., half:], tc[..., :half]], dim=-1)
    return (tc * cos + rotated * sin).to(t.dtype)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, need_weights: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention with grouped K/V heads.

    q [B, H, Q, D]; k, v [B, Hkv, Lk, D]; bias additive, broadcastable to [B, H, Q, Lk] (0 or -inf), or None.
    Returns out [B, H, Q, D] and, when ``need_weights``, the probabilities [B, H, Q, Lk].
    """
    groups = q.shape[1] // k.shape[1]
    if groups > 1:  # one query head per K/V head (LLaDA-8B): no copy of the keys and values
        k = k.repeat_interleave(groups, dim=1)  # [B, H, Lk, D]
        v = v.repeat_interleave(groups, dim=1)  # [B, H, Lk, D]
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias), None
    scores = (q @ k.transpose(-2, -1)).to(compute_dtype(q.dtype)) * q.shape[-1] ** -0.5  # [B, H, Q, Lk]
    if bias is not None:
        scores = scores + bias
    weights = scores.softmax(dim=-1)
    return (weights.to(v.dtype) @ v), weights


class Attention(nn.Module):
    def __init__(self, hidden: int, n_heads: int, n_kv_heads: int, head_dim: int, qkv_bias: bool,
                 qk_norm_eps: float | None = None):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.q = nn.Linear(hidden, n_heads * head_dim, bias=qkv_bias)
        self.k = nn.Linear(hidden, n_kv_heads * head_dim, bias=qkv_bias)
        self.v = nn.Linear(hidden, n_kv_heads * head_dim, bias=qkv_bias)
        self.o = nn.Linear(n_heads * head_dim, hidden, bias=False)
        if qk_norm_eps is not None:  # SDAR / Qwen3: each head's q and k normed over head_dim before RoPE
            self.q_norm, self.k_norm = RMSNorm(head_dim, qk_norm_eps), RMSNorm(head_dim, qk_norm_eps)

    def project(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rows: torch.Tensor | None = None):
        """h [B, Q, hidden] -> q [B, H, R, D], k, v [B, Hkv, Q, D] with rotary applied to q and k; ``rows`` [R]:
        the queries to compute (all Q by default)."""
        b, n, _ = h.shape
        hq, cos_q, sin_q = (h, cos, sin) if rows is None else (
            h.index_select(1, rows), cos.index_select(2, rows), sin.index_select(2, rows))  # [B, R, hidden] ...
        q = self.q(hq).view(b, hq.shape[1], self.n_heads, self.head_dim)  # [B, R, H, D]
        k = self.k(h).view(b, n, self.n_kv_heads, self.head_dim)  # [B, Q, Hkv, D]
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v(h).view(b, n, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(q, cos_q, sin_q), apply_rope(k, cos, sin), v

    def output(self, attn_out: torch.Tensor) -> torch.Tensor:
        """attn_out [B, H, Q, D] -> [B, Q, hidden]."""
        b, _, n, _ = attn_out.shape
        return self.o(attn_out.transpose(1, 2).reshape(b, n, self.n_heads * self.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # [B, Q, hidden]
        return self.down(F.silu(self.gate(h)) * self.up(h))
