"""Compiled decoding: a model whose forwards run under ``torch.compile``, applied from outside (gpt-fast style).

    from veridec.optimized.fastdllm import generate_with_dual_cache
    canvas, trace = generate_with_dual_cache(model, prompt, gen_length=256, block_length=32, threshold=0.9,
                                             compile=True)

``compiled(model)`` wraps a ``BidirectionalTransformer`` (or anything with its ``raw_forward`` core): its
``prefill`` (the refresh forward), ``forward_cached`` (the cached block step), ``forward_blocks`` (block
diffusion's call) and full forward are the model's own methods, unchanged, whose core ``raw_forward`` is captured
by ``torch.compile(fullgraph=True, dynamic=False)``, by default ``backend="inductor", mode="reduce-overhead"``
(CUDA graphs on a GPU). The decoders and their rules are not touched: ``decode(..., compile=True)`` hands them the
wrapper instead of the model.

- Static shapes, one graph per shape: the dual cache's block step always has the block's shape [B, block]
  against a cache of the canvas's length; the refresh has the canvas's [B, L] (a prefix step's window shrinks
  block by block: one graph per block).
- The K/V cache is static: one per (batch, canvas length), allocated once, its tensors marked as static
  addresses, refilled in place by every refresh (CUDA graphs replay on the same memory).
- What reads the host stays outside the graph: whether the keys are padded (read once per call from the key
  mask when the caller did not say), the check that an additive bias leaves every query a key (the bias is then
  built before the graph) and the cache's write counter (added after the call).
- The logits are copied out of the graph's output buffer (a CUDA graph overwrites it at its next replay).

Compiled equals eager exactly where the backend runs the eager kernels (``backend="aot_eager"``: same trace,
tokens and counters, tests/test_compiled.py); inductor fuses operators, so on a GPU its logits differ from eager
by rounding (measured by ``tools/gpu_bench.py``).
"""

from __future__ import annotations

import copy
import weakref

import torch

from veridec.models.interface import PredictorOutput, takes_narrow_logits
from veridec.models.transformer import KVCache

DEFAULT_OPTIONS = {"backend": "inductor", "mode": "reduce-overhead"}
RECOMPILES = 64  # graphs per model: a prefix cache's window has one shape per block (16 at gen 512, block 32)

_WRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {options key: CompiledModel}


def compile_options(compile) -> dict | None:
    """``compile`` as a decoder takes it -> torch.compile's options (None: eager). True: ``DEFAULT_OPTIONS``;
    a dict: its options (``{"backend": "aot_eager"}``, ``{"mode": "default"}``); False or None: eager."""
    if compile is None or compile is False:
        return None
    if compile is True:
        return dict(DEFAULT_OPTIONS)
    if isinstance(compile, dict):
        options = {"backend": "inductor", **compile}
        if options["backend"] == "inductor":
            options.setdefault("mode", DEFAULT_OPTIONS["mode"])
        return options
    raise ValueError(f"compile must be True, False or a dict of torch.compile options, got {compile!r}")


def compiled(model, compile=True):
    """The model with its forwards compiled (``CompiledModel``), one per model and options, reused across
    decodes (its graphs and static caches with it); the model itself when ``compile`` is False or it is
    already compiled."""
    options = compile_options(compile)
    if options is None or isinstance(model, CompiledModel):
        return model
    if not hasattr(model, "raw_forward"):
        raise ValueError(f"compile needs a transformer with a raw_forward core; {type(model).__name__} has none")
    key = tuple(sorted(options.items()))
    per_model = _WRAPPED.setdefault(model, {})
    if key not in per_model:
        per_model[key] = CompiledModel(model, options)
    return per_model[key]


class CompiledModel:
    """``model`` with its core captured by torch.compile; everything else is the model's (attributes,
    tokenizer, special tokens)."""

    def __init__(self, model, options: dict):
        import torch._dynamo  # noqa: F401  (1.5 s: with the first compiled model, not with veridec)

        self.model, self.options = model, options
        self._graph = torch.compile(model.raw_forward, fullgraph=True, dynamic=False, **options)
        self._core = copy.copy(model)  # shares the parameters and modules; only its core is swapped
        self._core.raw_forward = self._raw_forward
        self._caches: dict[tuple[int, int], KVCache] = {}
        self._steps: dict = {}  # function -> its compiled graph (``step_graph``)
        self.narrow_logits = takes_narrow_logits(model)  # it passes logit_rows on (M5.1)

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **kwargs) -> PredictorOutput:
        return self._core(x, attention_mask, **kwargs)

    def prefill(self, x, attention_mask=None, cache: KVCache | None = None, output_attentions: bool = False,
                logit_rows: slice | None = None):
        """The model's prefill into the static cache of this canvas shape (refilled in place)."""
        return self._core.prefill(x, attention_mask, cache=self.static_cache(*x.shape) if cache is None else cache,
                                  output_attentions=output_attentions, logit_rows=logit_rows)

    def forward_cached(self, tokens, positions, cache: KVCache, logit_rows: torch.Tensor | None = None,
                       **kwargs) -> PredictorOutput:
        return self._core.forward_cached(tokens, positions, cache, logit_rows=logit_rows, **kwargs)

    def forward_blocks(self, tokens, start: int, cache: KVCache, block_size: int, **kwargs) -> PredictorOutput:
        """Block diffusion's call (spec/block_diffusion.md BD8.1): the model's own, its core compiled."""
        return self._core.forward_blocks(tokens, start, cache, block_size, **kwargs)

    def block_cache(self, batch: int, length: int, first_real: torch.Tensor | None = None) -> KVCache:
        """The static cache of a [batch, length] canvas as an empty block cache: every key unmasked, RoPE counted
        from ``first_real``. Slots a decode has not written yet hold an earlier decode's keys; the block bias hides
        every slot that is not a finished block of the row's own canvas (BD8), so they are never read."""
        cache = self.static_cache(batch, length)
        cache.key_mask.fill_(True)
        if first_real is None:
            cache.rope_offset.zero_()
        else:
            cache.rope_offset.copy_(first_real)
        cache.writes, cache.padded = 0, False
        return cache

    def step_graph(self, function):
        """``function`` (a whole decode step: ``veridec.optimized.parallel.whole_step``) compiled with this model's
        options, ``fullgraph=True``: one graph per shape and step constants, kept across decodes. A call marks a
        new CUDA-graph step and runs under the model's recompile limit."""
        if function not in self._steps:
            self._steps[function] = torch.compile(function, fullgraph=True, dynamic=False, **self.options)
        graph = self._steps[function]

        def run(*args):
            torch.compiler.cudagraph_mark_step_begin()
            config = torch._dynamo.config
            limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch < 2.6
            with config.patch(**{limit: RECOMPILES}):
                return graph(*args)

        return run

    def static_cache(self, batch: int, length: int) -> KVCache:
        """The cache of a [batch, length] canvas, allocated once; its tensors keep their addresses."""
        if (batch, length) not in self._caches:
            cache = self.model.new_cache(batch, length)
            for tensor in (*cache.keys, *cache.values, cache.key_mask, cache.rope_offset):
                torch._dynamo.mark_static_address(tensor)
            self._caches[batch, length] = cache
        return self._caches[batch, length]

    def _raw_forward(self, tokens, rope_pos, *, key_mask=None, cache: KVCache | None = None, padded=None,
                     **kwargs) -> PredictorOutput:
        """The compiled core, called as the model's own ``raw_forward``: host reads before and after it."""
        if padded is None:  # the model reads it from the key mask: here, outside the graph
            padded = key_mask is not None and not bool(key_mask.all())
        if kwargs.get("attn_bias") is not None:  # its check reads the host: the whole bias is built here, checked
            kwargs["attn_bias"] = self.model._bias(key_mask, kwargs["attn_bias"], tokens.shape[1], padded)
            key_mask, padded, kwargs["check_bias"] = None, False, False
        view = None if cache is None else KVCache(cache.keys, cache.values, cache.key_mask, cache.rope_offset,
                                                  writes=0, padded=cache.padded)  # no guard on the total writes
        torch.compiler.cudagraph_mark_step_begin()
        config = torch._dynamo.config
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch < 2.6
        with config.patch(**{limit: RECOMPILES}):
            out = self._graph(tokens, rope_pos, key_mask=key_mask, cache=view, padded=padded, **kwargs)
        if cache is not None:
            cache.writes += view.writes
        return PredictorOutput(out.logits.clone(), out.attentions)
