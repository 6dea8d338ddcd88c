"""A bidirectional transformer (RMSNorm, RoPE, SwiGLU, grouped K/V heads; per-head q/k norms for the SDAR layout)
with a static K/V cache API and a block-causal option (block diffusion: a query in block j attends to every key
in blocks <= j).

One module serves both paths (spec/models.md):
- ``forward(x, attention_mask)``: the full forward every reference decoder calls, token-aligned logits;
- ``prefill(x, attention_mask)``: the same forward, filling a static per-layer K/V cache sized to the canvas;
- ``forward_cached(tokens, positions, cache)``: queries at a subset of canvas positions; their K/V are
  recomputed and written into the cache (``write=True``) or only appended for this call (``write=False``,
  packed draft verification), and they attend to the whole cache;
- ``forward_blocks(tokens, start, cache, store)``: whole blocks from canvas position ``start`` under block-causal
  attention against the finished blocks already in the cache, written into it (``store``) or not;
- ``raw_forward``: the core they all call, with explicit RoPE positions and an additive attention bias.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import check_integer, check_positive, is_integer
from .interface import (PredictorOutput, SpecialTokens, check_canvas, first_real_position, query_positions,
                        realign_shifted)
from .layers import Attention, RMSNorm, SwiGLU, attend, rope_cos_sin


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = False
    max_length: int = 4096
    explicit_head_dim: int | None = None  # SDAR's head_dim, independent of hidden_size / num_heads
    qk_norm: bool = False  # per-head RMSNorm of q and k over head_dim, before RoPE (SDAR, Qwen3)

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
                     "max_length"):
            check_integer(name, getattr(self, name), 1)
        for name in ("rope_theta", "rms_norm_eps"):
            check_positive(name, getattr(self, name))
        if self.explicit_head_dim is not None:
            check_integer("head_dim", self.explicit_head_dim, 2)
        if self.explicit_head_dim is None and self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be divisible by num_kv_heads {self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.num_heads


@dataclass
class KVCache:
    """Static per-layer cache of rotated keys and values for one canvas.

    keys[l], values[l]: [B, Hkv, L, D]; key_mask [B, L] (False = left padding); rope_offset [B] (number of
    left pads: RoPE position = canvas position - rope_offset). ``padded`` (whether any key is masked) is read
    from key_mask once, here and at each prefill, so that cached forwards never synchronise with the host.
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    key_mask: torch.Tensor
    rope_offset: torch.Tensor
    writes: int = field(default=0)  # positions written so far (a counter for cost accounting)
    padded: bool | None = None

    def __post_init__(self):
        if self.padded is None:
            self.padded = not bool(self.key_mask.all())

    @property
    def length(self) -> int:
        return self.key_mask.shape[1]

    def clone(self) -> "KVCache":
        return KVCache([k.clone() for k in self.keys], [v.clone() for v in self.values],
                       self.key_mask.clone(), self.rope_offset.clone(), self.writes, self.padded)


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.attn = Attention(cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.qkv_bias,
                              cfg.rms_norm_eps if cfg.qk_norm else None)
        self.mlp_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, h, cos, sin, kv_store, bias, need_weights, rows: torch.Tensor | None = None):
        """h [B, Q, hidden]; kv_store(k, v) -> the keys/values to attend to [B, Hkv, Lk, D]. ``rows`` [R]: only
        these queries go on (every key and value is still computed and stored) -> h [B, R, hidden]."""
        q, k, v = self.attn.project(self.attn_norm(h), cos, sin, rows)
        keys, values = kv_store(k, v)
        if rows is not None:
            h, bias = h.index_select(1, rows), bias_rows(bias, rows)  # [B, R, hidden], [.., R|1, Lk]
        out, weights = attend(q, keys, values, bias, need_weights)
        h = h + self.attn.output(out)
        return h + self.mlp(self.mlp_norm(h)), weights


class BidirectionalTransformer(nn.Module):
    """Mask predictor for the LLaDA, Dream and SDAR layouts (``layout``: the name); see veridec.models.layouts."""

    narrow_logits = True  # every forward takes ``logit_rows`` (M5.1): a token slice, or raw_forward's query rows

    def __init__(self, cfg: TransformerConfig, special: SpecialTokens, layout: str, logit_shift: int):
        super().__init__()
        if not 0 <= special.mask_id < cfg.vocab_size:
            raise ValueError(f"mask_id {special.mask_id} must lie in [0, vocab_size={cfg.vocab_size})")
        self.cfg, self.special, self.layout, self.logit_shift = cfg, special, layout, logit_shift
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.final_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.tokenizer = None  # set by the loader when the folder has tokenizer files

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    @property
    def max_length(self) -> int:
        return self.cfg.max_length

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    def query_positions(self, token_positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Canvas positions [B, Q] whose queries score the tokens at ``token_positions`` [B, Q]."""
        first_real = 0 if cache is None else cache.rope_offset[:, None]
        return query_positions(token_positions, self.logit_shift, first_real)

    # ---------------------------------------------------------------- full forwards
    def forward(self, x, attention_mask=None, output_attentions: bool = False,
                block_size: int | None = None, logit_rows: slice | None = None) -> PredictorOutput:
        """x [B, L] -> logits [B, L, V] aligned so logits[:, i] scores token i. Padding is honoured.
        ``block_size`` b: block-causal attention (blocks of b canvas positions from position 0).
        ``logit_rows`` [a, b): the logits of those tokens only, [B, b - a, V]; the last layer runs only the queries
        that score them (``raw_forward``'s ``logit_rows``, query rows), the same numbers where the kernels are
        row-wise."""
        mask = check_canvas(x, attention_mask, self.max_length)
        bias = None if block_size is None else block_causal_bias(x.shape[1], block_size, x.device)[None, None]
        rows = self.scoring_rows(logit_rows, mask)
        out = self.raw_forward(x, rope_positions(mask), key_mask=mask, attn_bias=bias,
                               output_attentions=output_attentions, logit_rows=rows)
        return PredictorOutput(realign_shifted(out.logits, self.logit_shift, mask, logit_rows), out.attentions)

    def scoring_rows(self, logit_rows: slice | None, mask: torch.Tensor) -> torch.Tensor | None:
        """The queries [R] whose logits score the tokens of ``logit_rows`` (a slice [a, b) of the canvas, mask [B, L]):
        a - shift .. b - 1, and each row's first real position (it scores itself, spec M3). None: all of them."""
        if logit_rows is None:
            return None
        length = mask.shape[1]
        if not (isinstance(logit_rows, slice) and logit_rows.step is None and is_integer(logit_rows.start)
                and is_integer(logit_rows.stop) and 0 <= logit_rows.start < logit_rows.stop <= length):
            raise ValueError(f"logit_rows must be a slice of canvas positions [start, stop) with 0 <= start < stop <= "
                             f"{length}, got {logit_rows!r}")
        stop = logit_rows.stop
        if self.logit_shift:  # a row's first real token may lie at or after b (a window inside its padding)
            stop = max(stop, int(first_real_position(mask).max()) + 1)
        return torch.arange(max(0, logit_rows.start - self.logit_shift), stop, device=mask.device)  # [R]

    def new_cache(self, batch_size: int, length: int) -> KVCache:
        shape = (batch_size, self.cfg.num_kv_heads, length, self.cfg.head_dim)
        make = lambda: torch.zeros(shape, dtype=self.dtype, device=self.device)  # noqa: E731
        return KVCache([make() for _ in self.layers], [make() for _ in self.layers],
                       torch.ones(batch_size, length, dtype=torch.bool, device=self.device),
                       torch.zeros(batch_size, dtype=torch.long, device=self.device))

    def prefill(self, x, attention_mask=None, cache: KVCache | None = None, output_attentions: bool = False,
                logit_rows: slice | None = None):
        """Full forward that also fills a static cache; returns (aligned output, cache). ``logit_rows``: as
        ``forward``'s (every key and value is still cached)."""
        mask = check_canvas(x, attention_mask, self.max_length)
        if cache is None:
            cache = self.new_cache(*x.shape)
        elif cache.keys[0].shape[0] != x.shape[0] or cache.length != x.shape[1]:
            raise ValueError(f"cache is sized {cache.keys[0].shape[0]}x{cache.length}, canvas is {tuple(x.shape)}")
        cache.key_mask.copy_(mask)
        cache.padded = not bool(mask.all())
        cache.rope_offset.copy_((~mask).sum(dim=1))
        slots = torch.arange(x.shape[1], device=x.device).expand_as(x)  # [B, L]
        out = self.raw_forward(x, rope_positions(mask), key_mask=mask, cache=cache, slots=slots,
                               output_attentions=output_attentions, logit_rows=self.scoring_rows(logit_rows, mask))
        return PredictorOutput(realign_shifted(out.logits, self.logit_shift, mask, logit_rows), out.attentions), cache

    # ---------------------------------------------------------------- subset forwards
    def forward_cached(self, tokens, positions, cache: KVCache, *, write: bool = True, attn_bias=None,
                       output_attentions: bool = False, check: bool = True,
                       logit_rows: torch.Tensor | None = None) -> PredictorOutput:
        """Queries for ``tokens`` [B, Q] at canvas ``positions`` [B, Q] against the cache.

        write=True: K/V at ``positions`` are recomputed and overwrite the cache; queries attend to all L entries
        (``attn_bias`` broadcastable to [B, H, Q, L]). write=False: the cache is left untouched; queries attend
        to the L cached entries followed by their own Q new entries (``attn_bias`` [B, H, Q, L + Q]); their
        positions may lie beyond the cache (new tokens after a cached prefix).
        Returns raw logits [B, Q, V]: the query at position j scores token j + logit_shift (``logit_rows`` [R]:
        those queries' only, [B, R, V], as ``raw_forward``'s).
        ``check=False`` skips ``check_cached_positions`` (it reads positions on the host): the decoders build
        their positions from the canvas geometry, so their hot path never synchronises (CUDA graphs,
        ``torch.compile(fullgraph=True)``).
        """
        if tokens.shape != positions.shape or tokens.dim() != 2:
            raise ValueError(f"tokens {tuple(tokens.shape)} and positions {tuple(positions.shape)} must both be [B, Q]")
        if check:
            check_cached_positions(positions, cache, write)
        rope = positions - cache.rope_offset[:, None]  # [B, Q]
        key_mask = cache.key_mask if write else torch.cat(  # then the queries' own keys [B, Q]
            [cache.key_mask, torch.ones_like(tokens, dtype=torch.bool)], 1)
        return self.raw_forward(tokens, rope, key_mask=key_mask, attn_bias=attn_bias, cache=cache,
                                slots=positions if write else None, output_attentions=output_attentions,
                                padded=cache.padded, logit_rows=logit_rows)

    def block_cache(self, batch: int, length: int, first_real: torch.Tensor | None = None) -> KVCache:
        """An empty cache for block diffusion over a canvas of ``length`` positions, filled block by block by
        ``forward_blocks``; ``first_real`` [B]: each row's first real position (whole blocks of left padding before
        it), from which its RoPE positions count."""
        cache = self.new_cache(batch, length)
        if first_real is not None:
            cache.rope_offset.copy_(first_real)
        return cache

    def forward_blocks(self, tokens, start: int, cache: KVCache, block_size: int, *, store: bool,
                       first_real: torch.Tensor | None = None) -> PredictorOutput:
        """Whole blocks ``tokens`` [B, Q] (Q a multiple of ``block_size``) at canvas positions start .. start + Q - 1,
        block-causal among themselves, attending to the cache's entries before ``start`` (the finished blocks).
        ``store``: their K/V are written into the cache at their positions; else the cache is left untouched.
        ``first_real`` [B]: each row's first real position (whole blocks of padding before it): real queries
        never see padding and padding sees only padding. Returns logits [B, Q, V] (raw: query j scores token
        start + j + logit_shift)."""
        batch, width = tokens.shape
        if start % block_size or width % block_size or start + width > cache.length:
            raise ValueError(f"forward_blocks takes whole blocks of {block_size} inside the cache of {cache.length}, "
                             f"got {width} tokens at {start}")
        positions = torch.arange(start, start + width, device=tokens.device).expand(batch, -1)  # [B, Q]
        bias = cached_block_bias(cache.length, start, width, block_size, store, tokens.device)  # [1, 1, Q, Lk]
        if first_real is not None:
            keys = torch.arange(cache.length, device=tokens.device)  # [L] the keys' canvas positions
            keys = keys if store else torch.cat([keys, positions[0]])  # [Lk]
            real_key = keys[None] >= first_real[:, None]  # [B, Lk]
            real_query = positions >= first_real[:, None]  # [B, Q]
            apart = real_key[:, None, :] != real_query[:, :, None]  # [B, Q, Lk]
            bias = bias.masked_fill(apart[:, None], float("-inf"))  # [B, 1, Q, Lk]
        return self.forward_cached(tokens, positions, cache, write=store, attn_bias=bias, check=False)

    def forward_dynamic(self, tokens, positions, cache: KVCache, *, append_at: int | None = None,
                        attn_bias=None) -> PredictorOutput:
        """The append-only cache of transformers' ``DynamicCache`` (spec/block_diffusion.md BD9): ``tokens``
        [B, Q] at RoPE ``positions`` [B, Q] attend to the cache's entries then their own; ``append_at`` n: their
        keys and values are written at slots n .. n + Q - 1 (the order of storing, whatever their positions) and
        the Q queries attend to all L slots. ``attn_bias`` [B|1, 1, Q, L (+ Q without append_at)] says which
        slots each query sees. Returns raw logits [B, Q, V]."""
        slots = None if append_at is None else torch.arange(append_at, append_at + tokens.shape[1],
                                                            device=tokens.device).expand_as(tokens)  # [B, Q]
        return self.raw_forward(tokens, positions, attn_bias=attn_bias, cache=cache, slots=slots,
                                padded=False)

    # ---------------------------------------------------------------- the core
    def raw_forward(self, tokens, rope_pos, *, key_mask=None, attn_bias=None, cache: KVCache | None = None,
                    slots=None, output_attentions: bool = False, padded: bool | None = None,
                    check_bias: bool = True, logit_rows: torch.Tensor | None = None) -> PredictorOutput:
        """tokens, rope_pos [B, Q] -> raw logits [B, Q, V] (query-aligned, no Dream realignment).

        key_mask [B, Lk] bool (False = never attend); attn_bias additive, broadcastable to [B, H, Q, Lk].
        With a cache and ``slots`` [B, Q]: new K/V are written at ``slots`` and Lk = L; with a cache and no
        slots: Lk = L + Q (cache, then the queries' own K/V), the cache unchanged; without a cache: Lk = Q.
        ``padded``: whether key_mask masks any key, when the caller knows (else read from key_mask).
        ``check_bias=False``: the caller has checked that the bias leaves every query a key (a host read).
        ``logit_rows`` [R] (long, in [0, Q)): logits of these queries only, [B, R, V]; the last layer, the final
        norm and the head run on them alone (every layer's keys and values still cover all Q queries).
        """
        if logit_rows is not None and output_attentions:
            raise ValueError("logit_rows and output_attentions exclude each other: the last layer would return the "
                             "weights of its logit rows only")
        bias = self._bias(key_mask, attn_bias, tokens.shape[1], padded, check_bias)
        cos, sin = rope_cos_sin(rope_pos, self.cfg.head_dim, self.cfg.rope_theta)
        h = self.embed(tokens)  # [B, Q, hidden]
        attentions = []
        rows = None if slots is None else torch.arange(slots.shape[0], device=slots.device)[:, None]  # [B, 1]
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h, weights = layer(h, cos, sin, self._kv_store(cache, i, slots, rows), bias, output_attentions,
                               logit_rows if i == last else None)
            attentions.append(weights)
        if cache is not None and slots is not None:
            cache.writes += slots.numel()
        h = self.final_norm(h)
        logits = h @ self.embed.weight.T if self.lm_head is None else self.lm_head(h)  # [B, Q, V]
        return PredictorOutput(logits, tuple(attentions) if output_attentions else None)

    @staticmethod
    def _kv_store(cache: KVCache | None, layer: int, slots, rows):
        """How a layer's new keys and values meet the cache; ``rows`` [B, 1] index the cache's rows for ``slots``."""
        if cache is None:
            return lambda k, v: (k, v)
        if slots is None:
            return lambda k, v: (torch.cat([cache.keys[layer], k], 2), torch.cat([cache.values[layer], v], 2))

        def write(k, v):  # k, v [B, Hkv, Q, D] -> cache entries [B, Q, Hkv, D] at (row, slot)
            cache.keys[layer][rows, :, slots] = k.transpose(1, 2)
            cache.values[layer][rows, :, slots] = v.transpose(1, 2)
            return cache.keys[layer], cache.values[layer]

        return write

    def _bias(self, key_mask, attn_bias, n_queries: int, padded: bool | None = None, check: bool = True):
        """Additive bias [B|1, 1|H, Q|1, Lk] from a key mask and an optional user bias; None when neither."""
        bias = None
        if padded is None:
            padded = key_mask is not None and not bool(key_mask.all())
        if padded:
            bias = torch.zeros(key_mask.shape, dtype=self.dtype, device=self.device)
            bias = bias.masked_fill(~key_mask, float("-inf"))[:, None, None, :]  # [B, 1, 1, Lk]
        if attn_bias is not None:
            attn_bias = attn_bias.to(self.dtype)
            bias = attn_bias if bias is None else bias + attn_bias
            full = torch.broadcast_shapes(bias.shape, (1, 1, n_queries, bias.shape[-1]))
            if check and torch.isneginf(bias.expand(full)).all(dim=-1).any():
                raise ValueError("attn_bias leaves a query with no key to attend to")
        return bias


def check_cached_positions(positions: torch.Tensor, cache: KVCache, write: bool) -> None:
    """Positions [B, Q] a cached forward may take: in [0, L) to be written, distinct per row (reads them on
    the host)."""
    if positions.min() < 0 or (write and positions.max() >= cache.length):
        raise ValueError(f"positions must lie in [0, {cache.length}) to be written, got "
                         f"[{positions.min()}, {positions.max()}]")
    if write and (positions.sort(dim=1).values.diff(dim=1) == 0).any():
        raise ValueError("positions: a row repeats a position; write=True needs distinct positions per row")


def block_causal_bias(length: int, block_size: int, device=None) -> torch.Tensor:
    """[L, L] additive bias: 0 where the query's block (position // b) is at or after the key's, else -inf."""
    check_integer("block_size", block_size, 1)
    blocks = torch.arange(length, device=device) // block_size  # [L]
    return torch.zeros(length, length, device=device).masked_fill(blocks[None] > blocks[:, None], float("-inf"))


def cached_block_bias(cache_length: int, start: int, width: int, block_size: int, store: bool,
                      device=None) -> torch.Tensor:
    """[1, 1, Q, Lk] bias of ``forward_blocks``: Q = width queries at start..; keys are the cache's L entries
    (store: the queries' own K/V written at their positions, Lk = L) or the cache then the queries' own
    (Lk = L + Q). A query sees the cache before ``start`` and its own and earlier blocks among the queries."""
    own = block_causal_bias(width, block_size, device)  # [Q, Q]
    before = torch.zeros(width, start, device=device)  # [Q, start] the finished blocks
    if store:
        after = torch.full((width, cache_length - start - width), float("-inf"), device=device)
        return torch.cat([before, own, after], dim=1)[None, None]
    unwritten = torch.full((width, cache_length - start), float("-inf"), device=device)
    return torch.cat([before, unwritten, own], dim=1)[None, None]


def bias_rows(bias: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor | None:
    """An additive bias [B|1, H|1, Q|1, Lk] for the queries ``rows`` [R] only."""
    return bias if bias is None or bias.shape[2] == 1 else bias.index_select(2, rows)


def rope_positions(mask: torch.Tensor) -> torch.Tensor:
    """RoPE positions for a left-padded canvas: real tokens count from 0, pads get 0. mask [B, L] bool."""
    return (mask.long().cumsum(dim=1) - 1).clamp_min(0)
