"""Any veridec model behind the calling conventions of the official code, so that a decoder written against
LLaDA, Fast-dLLM or Dream runs unchanged on the shipped models, tiny and loaded checkpoints and oracle models
(spec/models.md M7).

    LLaDAConvention(model)(x, attention_mask=None).logits        # LLaDA generate.py, Fast-dLLM's no-cache loop
    LLaDAConvention(model)(input_ids=x).logits                   # every convention: the canvas by keyword too
    LLaDAConvention(model)(x, attention_mask=sees, position_ids=p)  # WINO's: [B, 1, L, L] bool; LLaDA2's additive
    FastDLLMConvention(model)(x, past_key_values=..., use_cache=True, replace_position=...)   # Fast-dLLM's cache
    DreamConvention(model)(x, attention_mask, tok_idx).logits     # Dream's diffusion_generate (shifted logits)
    HFBlockConvention(model)(x, attention_mask=m, position_ids=p, past_key_values=cache, store_kv=True)  # SDAR
    FastDLLMV2Convention(model).forward(input_ids=x, use_cache=True, past_key_values=cache,
                                        update_past_key_values=True, block_size=32)  # Fast-dLLM v2's modelling

``adapt(model, convention)`` picks one by name. Every adapter has ``device``, ``dtype`` and ``config``
(``mask_token_id``, ``pad_token_id``, ``max_position_embeddings``, ``vocab_size``), and passes any other
attribute through to the model (``special``, ``tokenizer`` ...). Wrap a ``veridec.recording.RecordingModel``
to log what the decoder asks for: the adapters reach the model only through its recorded methods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from .decoding import check_llada_layout
from .models import KVCache

CONVENTIONS = ("llada", "fastdllm", "dream", "hf-block", "fastdllm-v2", "diffusiongemma")


@dataclass
class ConventionOutput:
    """What the official modellings return: ``.logits`` and, with ``use_cache=True``, ``.past_key_values``."""

    logits: torch.Tensor  # [B, Q, V]
    past_key_values: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # per layer (keys, values)


class _Convention:
    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        if name == "model":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def device(self) -> torch.device:
        return self.model.device

    @staticmethod
    def _tokens(x, input_ids) -> torch.Tensor:
        """The canvas [B, L], passed positionally (``model(x)``) or by keyword (``model(input_ids=x)``, as
        Hugging Face models are called), exactly once."""
        if (x is None) == (input_ids is None):
            raise ValueError("pass the canvas once: model(x, ...) or model(input_ids=x, ...), got "
                             + ("both" if x is not None else "neither"))
        return x if input_ids is None else input_ids

    @property
    def dtype(self) -> torch.dtype:
        return getattr(self.model, "dtype", torch.float32)

    @property
    def config(self):
        special = self.model.special
        return SimpleNamespace(mask_token_id=special.mask_id, pad_token_id=special.pad_id,
                               eos_token_id=special.eos_id, max_position_embeddings=self.model.max_length,
                               vocab_size=self.model.vocab_size)


class LLaDAConvention(_Convention):
    """``model(x, attention_mask=None).logits`` [B, L, V], token i scored at position i (any layout: Dream's
    shift is undone, spec M3). ``padding="honour"`` (default) applies the attention mask as veridec does;
    ``padding="ignore"`` drops it, as the official LLaDA modelling does (spec SQ1.8, golden data)."""

    def __init__(self, model, padding: str = "honour"):
        super().__init__(model)
        if padding not in ("honour", "ignore"):
            raise ValueError(f"padding must be 'honour' or 'ignore', got {padding!r}")
        self.padding = padding

    def __call__(self, x=None, attention_mask=None, position_ids=None, *, input_ids=None):
        x = self._tokens(x, input_ids)
        if position_ids is not None or (attention_mask is not None and attention_mask.dim() == 4):
            return self._explicit(x, attention_mask, position_ids)
        mask = attention_mask if self.padding == "honour" else None
        return ConventionOutput(self.model(x, attention_mask=mask).logits)

    def _explicit(self, x, attention_mask, position_ids):
        """The call of WINO's LLaDA modelling (Feng-Hong/WINO-DLLM ``LLaDA/modeling_llada.py``) and of LLaDA2's
        samplers: an attention mask [B or 1, 1, L, L] of booleans or 0/1 (True: the query row attends to the key
        column) or additive (0 attends, -inf not) and RoPE positions [L] or [B, L] (default 0 .. L-1), served by
        ``raw_forward``."""
        batch, length = x.shape
        check_llada_layout(self.model, "attention_mask [B, 1, L, L] / position_ids")
        bias = None if attention_mask is None else _additive(attention_mask, batch, length)
        positions = _positions(position_ids, batch, length, x.device)
        return ConventionOutput(self.model.raw_forward(x, positions, attn_bias=bias).logits)


def _additive(attention_mask: torch.Tensor, batch: int, length: int) -> torch.Tensor:
    """A [B or 1, 1, L, L] mask -> the additive bias (0 attends, -inf does not), float64. Booleans or 0/1 with a
    1 somewhere (WINO's modelling: 1 attends); otherwise an additive mask of 0 and -inf (LLaDA2's: 0 attends)."""
    shape = tuple(attention_mask.shape)
    if attention_mask.dim() != 4 or shape[0] not in (1, batch) or shape[1:] != (1, length, length):
        raise ValueError(f"attention_mask must be [B, L] or [B or 1, 1, L, L] with B = {batch}, L = {length}; got "
                         f"{shape}")
    zero_one = (attention_mask == 0) | (attention_mask == 1)
    if attention_mask.dtype == torch.bool or (zero_one.all() and (attention_mask == 1).any()):
        sees = attention_mask.bool()
    elif ((attention_mask == 0) | (attention_mask == -math.inf)).all():
        sees = attention_mask == 0
    else:
        raise ValueError("attention_mask [B, 1, L, L] must hold booleans or 0/1 (1: attends, as WINO's modelling "
                         "asserts) or be additive, 0 and -inf (0: attends, as LLaDA2's)")
    return torch.zeros(shape, dtype=torch.float64, device=sees.device).masked_fill(~sees, -math.inf)


def _positions(position_ids, batch: int, length: int, device) -> torch.Tensor:
    """RoPE positions [B, L] from ``position_ids`` [L] or [B, L] (None: 0 .. L-1)."""
    if position_ids is None:
        return torch.arange(length, device=device).expand(batch, -1)
    if position_ids.shape not in ((length,), (batch, length)):
        raise ValueError(f"position_ids must be [L] or [B, L] with B = {batch}, L = {length}; got "
                         f"{tuple(position_ids.shape)}")
    return position_ids.to(device).expand(batch, -1)


class FastDLLMConvention(_Convention):
    """The cache protocol of Fast-dLLM's LLaDA modelling (NVlabs/Fast-dLLM ``llada/model/modeling_llada.py``):

    - ``model(x, use_cache=True)``: a full forward; ``past_key_values`` holds every layer's (keys, values),
      each [B, Hkv, L, D];
    - ``model(x, past_key_values=prefix, use_cache=...)``: ``x`` [B, Q] continues after the cached prefix of
      length C (positions C .. C+Q-1), attending to the prefix and to itself; with ``use_cache=True``
      ``past_key_values`` is the prefix followed by x's entries ([B, Hkv, C+Q, D]);
    - ``model(x, past_key_values=full, use_cache=True, replace_position=mask)``: ``mask`` [B, L] bool marks one
      contiguous run of Q positions (the same in every row); x's keys and values are written into the given
      tensors *in place* there, and x attends to all L entries.

    Stored keys are veridec's (rotated); shapes and in-place writes are the official ones. A padded canvas's
    attention mask is taken at the last ``use_cache=True`` full call and applies to the cached calls after it
    (the official modelling ignores attention masks; calls with one honour it here). LLaDA layout only
    (logit shift 0): Fast-dLLM's Dream code speaks the Dream convention.
    """

    def __init__(self, model):
        super().__init__(model)
        if getattr(model, "logit_shift", 0) != 0:
            raise ValueError("the fastdllm convention is LLaDA's (logit shift 0); use convention='dream' for "
                             "a Dream-layout model")
        self._key_mask = None  # [B, L] bool of the last use_cache=True full call

    def __call__(self, x=None, attention_mask=None, past_key_values=None, use_cache=False, replace_position=None, *,
                 input_ids=None):
        x = self._tokens(x, input_ids)
        if past_key_values is None:
            if replace_position is not None:
                raise ValueError("replace_position needs past_key_values (the cache it writes into)")
            return self._full(x, attention_mask, use_cache)
        if attention_mask is not None:
            raise ValueError("attention_mask: a cached call takes the padding of the full call that made the "
                             "cache; pass it there")
        layers = [tuple(layer) for layer in past_key_values]
        if replace_position is None:
            return self._continue(x, layers, use_cache)
        return self._replace(x, layers, replace_position)

    def _full(self, x, attention_mask, use_cache):
        if not use_cache:
            return ConventionOutput(self.model(x, attention_mask=attention_mask).logits)
        out, cache = self.model.prefill(x, attention_mask)
        self._key_mask = cache.key_mask
        return ConventionOutput(out.logits, list(zip(cache.keys, cache.values)))

    def _padding(self, batch: int, length: int):
        """(key_mask [B, length], rope_offset [B]) of the cached canvas's first ``length`` positions."""
        device = self.model.device
        if self._key_mask is None or self._key_mask.shape[0] != batch or self._key_mask.shape[1] < length:
            mask = torch.ones(batch, length, dtype=torch.bool, device=device)
        else:
            mask = self._key_mask[:, :length]
        return mask, (~mask).sum(dim=1)

    def _continue(self, x, layers, use_cache):
        batch, _, cached, _ = layers[0][0].shape
        queries = x.shape[1]
        grow = lambda t: torch.cat([t, t.new_zeros(*t.shape[:2], queries, t.shape[3])], dim=2)  # [B, Hkv, C+Q, D]
        prefix_mask, offset = self._padding(batch, cached)
        key_mask = torch.cat([prefix_mask, torch.ones_like(x, dtype=torch.bool)], dim=1)  # [B, C+Q]
        cache = KVCache([grow(k) for k, _ in layers], [grow(v) for _, v in layers], key_mask, offset)
        positions = torch.arange(cached, cached + queries, device=x.device).expand(batch, -1)  # [B, Q]
        logits = self.model.forward_cached(x, positions, cache).logits
        return ConventionOutput(logits, list(zip(cache.keys, cache.values)) if use_cache else None)

    def _replace(self, x, layers, replace_position):
        batch, _, length, _ = layers[0][0].shape
        positions = _replaced_run(replace_position, batch, length, x.shape[1])  # [Q]
        key_mask, offset = self._padding(batch, length)
        cache = KVCache([k for k, _ in layers], [v for _, v in layers], key_mask, offset)  # written in place
        logits = self.model.forward_cached(x, positions.expand(batch, -1), cache).logits
        return ConventionOutput(logits, layers)


def _replaced_run(replace_position: torch.Tensor, batch: int, length: int, queries: int) -> torch.Tensor:
    """The positions [Q] ``replace_position`` [B, L] marks, checked to be one run, the same in every row."""
    if tuple(replace_position.shape) != (batch, length):
        raise ValueError(f"replace_position must be [B, L] = [{batch}, {length}] like the cache, got "
                         f"{tuple(replace_position.shape)}")
    marks = replace_position.bool()
    if not (marks == marks[:1]).all():
        raise ValueError("replace_position must mark the same positions in every row")
    positions = marks[0].nonzero().flatten()
    if positions.numel() != queries:
        raise ValueError(f"replace_position marks {positions.numel()} positions, x has {queries}")
    if queries and positions[-1] - positions[0] + 1 != queries:
        raise ValueError("replace_position must mark one contiguous run (the official modelling places the "
                         "queries at the run that ends at its last mark)")
    return positions


class DreamConvention(_Convention):
    """Dream's modelling as ``diffusion_generate`` calls it: ``model(x, attention_mask, tok_idx).logits`` are
    *raw*, position j scoring token j + 1 (the caller shifts them). ``attention_mask`` is None, ``"full"`` or
    the official [B, 1, L, L] mask (row b's real positions attending to each other); ``tok_idx`` [B, L] are the
    RoPE positions (default 0 .. L-1). Dream layout only (logit shift 1)."""

    def __init__(self, model):
        super().__init__(model)
        if getattr(model, "logit_shift", 1) != 1 or not hasattr(model, "raw_forward"):
            raise ValueError("the dream convention needs a Dream-layout transformer (logit shift 1)")

    def __call__(self, x=None, attention_mask=None, tok_idx=None, *, input_ids=None):
        x = self._tokens(x, input_ids)
        if attention_mask is None or isinstance(attention_mask, str):
            if attention_mask not in (None, "full"):
                raise ValueError(f"attention_mask must be None, 'full' or a [B, 1, L, L] tensor, got "
                                 f"{attention_mask!r}")
            keys = torch.ones_like(x, dtype=torch.bool)  # [B, L]
        elif attention_mask.dim() == 4 and tuple(attention_mask.shape[2:]) == (x.shape[1], x.shape[1]):
            keys = attention_mask[:, 0].bool().any(dim=1)  # [B, L]: a key any query may attend to
        else:
            raise ValueError(f"attention_mask must be [B, 1, L, L] with L = {x.shape[1]}, got "
                             f"{tuple(attention_mask.shape)}")
        positions = torch.arange(x.shape[1], device=x.device).expand_as(x) if tok_idx is None else tok_idx
        return ConventionOutput(self.model.raw_forward(x, positions, key_mask=keys).logits)


class HFBlockConvention(_Convention):
    """Block diffusion's call as SDAR / TraDo's ``block_diffusion_generate`` makes it (spec/block_diffusion.md
    BD9): ``model(x, attention_mask=m, position_ids=p, past_key_values=cache, use_cache=True, store_kv=s).logits``.
    ``cache`` is any object the decoder keeps for its run (a ``DynamicCache()``): the adapter keeps the stored
    keys and values per cache object, in the order stored; a call attends to them, then to its own, as ``m``
    ([B, Q, K] or [B, 1, Q, K], booleans or 0/1 with K = stored + Q; None: all) says; ``store_kv=True`` appends
    its own. Logit shift 0 (the SDAR layout; a transformer with ``forward_dynamic``)."""

    def __init__(self, model):
        super().__init__(model)
        if getattr(model, "logit_shift", None) != 0 or not hasattr(model, "forward_dynamic"):
            raise ValueError("the hf-block convention needs a transformer without logit shift (the SDAR layout)")
        self._stores = {}  # id(cache object) -> (the object, veridec's cache, slots used)

    def __call__(self, x=None, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None,
                 store_kv=False, *, input_ids=None, **unused):
        x = self._tokens(x, input_ids)
        batch, queries = x.shape
        if past_key_values is None:
            raise ValueError("past_key_values: block diffusion's calls carry the run's cache (the published code "
                             "passes one DynamicCache() to every call)")
        cache, stored = self._store(past_key_values, batch)
        length = cache.length
        if stored + queries > length:
            raise ValueError(f"the run stored {stored} positions and adds {queries}: more than the model's "
                             f"max_length {length}")
        sees = _block_visibility(attention_mask, batch, queries, stored + queries, x.device)  # [B|1, Q, K]
        positions = _positions(position_ids, batch, queries, x.device) if position_ids is not None else \
            torch.arange(stored, stored + queries, device=x.device).expand(batch, -1)
        hidden = torch.zeros(sees.shape[0], queries, length - stored - (queries if store_kv else 0), dtype=torch.bool,
                             device=x.device)  # the cache's unused slots
        if store_kv:
            visible = torch.cat([sees, hidden], dim=2)  # [B|1, Q, L]
        else:
            visible = torch.cat([sees[..., :stored], hidden, sees[..., stored:]], dim=2)  # [B|1, Q, L + Q]
        bias = torch.zeros(visible.shape, dtype=torch.float64, device=x.device).masked_fill(~visible, -math.inf)
        out = self.model.forward_dynamic(x, positions, cache, append_at=stored if store_kv else None,
                                         attn_bias=bias[:, None])
        if store_kv:
            self._stores[id(past_key_values)] = (past_key_values, cache, stored + queries)
        return ConventionOutput(out.logits)

    def _store(self, handle, batch: int):
        """The veridec cache behind ``handle`` and the slots it has used (a new, empty one the first time)."""
        found = self._stores.get(id(handle))
        if found is None or found[0] is not handle:
            found = (handle, self.model.new_cache(batch, self.model.max_length), 0)
            self._stores[id(handle)] = found
        if found[1].keys[0].shape[0] != batch:
            raise ValueError(f"past_key_values: this cache holds {found[1].keys[0].shape[0]} rows, the call {batch}")
        return found[1], found[2]


def _diffusiongemma_model(model):
    """The official convention of DiffusionGemma is transformers' model object itself; only a uniform-state model
    has one, and a mask predictor is refused naming the convention (DG1.4)."""
    if getattr(type(model), "uniform_state", False) is not True:
        raise ValueError(f"the diffusiongemma convention needs a uniform-state model (veridec.models.diffusiongemma), "
                         f"got {type(model).__name__}")
    return model.hf


def _block_visibility(attention_mask, batch: int, queries: int, keys: int, device) -> torch.Tensor:
    """[B|1, Q, K] booleans from block diffusion's mask: [B, Q, K] (JetAstra) or [B, 1, Q, K] (dLLM-RL), booleans
    or 0/1 (1 attends; K may be longer: its first K columns are read, as the published modelling slices them);
    None: every key."""
    if attention_mask is None:
        return torch.ones(1, queries, keys, dtype=torch.bool, device=device)
    mask = attention_mask[:, 0] if attention_mask.dim() == 4 else attention_mask
    if mask.dim() != 3 or mask.shape[0] not in (1, batch) or mask.shape[1] != queries or mask.shape[2] < keys:
        raise ValueError(f"attention_mask must be [B, Q, K] or [B, 1, Q, K] with B = {batch}, Q = {queries} and at "
                         f"least K = {keys} key columns (stored + this call's), got {tuple(attention_mask.shape)}")
    mask = mask[..., :keys]
    if not (mask.dtype == torch.bool or ((mask == 0) | (mask == 1)).all()):
        raise ValueError("attention_mask must hold booleans or 0/1 (1: the query attends to the key)")
    return mask.bool().to(device)


@dataclass
class V2Cache:
    """The ``past_key_values`` a Fast-dLLM v2 convention call hands back: veridec's static cache of the run and the
    positions stored so far (the published ``DynamicCache``'s ``get_seq_length()``)."""

    cache: KVCache
    stored: int = 0

    def get_seq_length(self, layer: int = 0) -> int:
        return self.stored

    def __len__(self) -> int:  # DynamicCache's: the layers holding keys (none before the first store)
        return len(self.cache.keys) if self.stored else 0


class FastDLLMV2Convention(_Convention):
    """The published Fast-dLLM v2 modelling's call (spec/fastdllm_v2.md V2.1, ``Fast_dLLM_QwenForCausalLM
    .forward``): ``model.forward(input_ids=x, use_cache=True, past_key_values=c, update_past_key_values=u,
    block_size=b)`` (``model(...)`` too) -> ``.logits`` [B, Q, V] raw (query j scores token j + 1) and
    ``.past_key_values``. The Q tokens sit at positions ``c.get_seq_length()`` onward and attend to the stored
    positions and to each other under the block-causal mask of blocks of ``block_size`` on absolute positions
    (the published default 32 where not passed); ``update_past_key_values=True`` stores them. ``past_key_values``
    None starts an empty cache (returned). The block cache (``use_block_cache``) is not served: refused by name.
    Logit shift 1 (the fastdllm_v2 layout; a transformer with ``forward_dynamic``)."""

    def __init__(self, model):
        super().__init__(model)
        if getattr(model, "logit_shift", None) != 1 or not hasattr(model, "forward_dynamic"):
            raise ValueError("the fastdllm-v2 convention needs a transformer with logit shift 1 (the fastdllm_v2 "
                             "layout)")

    def forward(self, input_ids=None, past_key_values=None, use_cache=None, update_past_key_values=False,
                block_size=32, use_block_cache=False, **unused):
        if use_block_cache:
            raise ValueError("use_block_cache: the fastdllm-v2 convention serves the prefix cache only (V2.8's block "
                             "cache is not adapted)")
        x = input_ids
        batch, queries = x.shape
        handle = V2Cache(self.model.new_cache(batch, self.model.max_length)) if past_key_values is None else \
            past_key_values
        stored, length = handle.stored, handle.cache.length
        if stored + queries > length:
            raise ValueError(f"the run stored {stored} positions and adds {queries}: more than the model's max_length "
                             f"{length}")
        positions = torch.arange(stored, stored + queries, device=x.device)  # [Q] absolute positions
        keys = torch.arange(length, device=x.device)  # [L] slot s holds position s
        sees = (keys[None] // block_size <= positions[:, None] // block_size) & (keys[None] < stored)  # [Q, L]
        own = positions[None] // block_size <= positions[:, None] // block_size  # [Q, Q]
        if update_past_key_values:
            visible = sees | ((keys[None] >= stored) & (keys[None] < stored + queries) &
                              (keys[None] // block_size <= positions[:, None] // block_size))
        else:
            visible = torch.cat([sees, own], dim=1)  # [Q, L + Q]
        bias = torch.zeros(visible.shape, dtype=torch.float64, device=x.device).masked_fill(~visible, -math.inf)
        out = self.model.forward_dynamic(x, positions.expand(batch, -1), handle.cache,
                                         append_at=stored if update_past_key_values else None,
                                         attn_bias=bias[None, None])
        if update_past_key_values:
            handle.stored = stored + queries
        return SimpleNamespace(logits=out.logits, past_key_values=handle if use_cache else None)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


def adapt(model, convention: str):
    """``model`` behind the named convention: "llada", "fastdllm", "dream", "hf-block", "fastdllm-v2" or
    "diffusiongemma" (transformers' own DiffusionGemmaForBlockDiffusion behind a uniform-state model:
    spec/diffusiongemma.md DG11)."""
    adapters = {"llada": LLaDAConvention, "fastdllm": FastDLLMConvention, "dream": DreamConvention,
                "hf-block": HFBlockConvention, "fastdllm-v2": FastDLLMV2Convention,
                "diffusiongemma": _diffusiongemma_model}
    if convention not in adapters:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    return adapters[convention](model)
