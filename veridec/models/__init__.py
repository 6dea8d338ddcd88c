"""Mask predictors (spec/models.md): the interface every decoder uses (``interface``), the bidirectional
transformer with its K/V cache API (``transformer``, ``layers``), the LLaDA and Dream checkpoint layouts and the
loader (``layouts``, ``checkpoint``), tokenizers, tiny random models and the shipped models.

The lowest room of the shared floor: imports only torch, safetensors, tokenizers and transformers; everything
else imports it (the oracles too: the shipped HMM world is loaded by ``veridec.oracles.world``)."""

from .checkpoint import load_pretrained, save_pretrained
from .interface import MaskPredictor, PredictorOutput, SpecialTokens, query_positions, realign_shifted
from .layouts import DREAM, LAYOUTS, LLADA, layout_for
from .tiny import random_model, write_tiny_checkpoint
from .transformer import BidirectionalTransformer, KVCache, TransformerConfig, rope_positions

__all__ = [
    "BidirectionalTransformer", "DREAM", "KVCache", "LAYOUTS", "LLADA", "MaskPredictor", "PredictorOutput",
    "SpecialTokens", "TransformerConfig", "char_tokenizer", "layout_for", "load_pretrained", "query_positions",
    "random_model", "realign_shifted", "rope_positions", "save_pretrained", "write_tiny_checkpoint",
]


def __getattr__(name: str):
    """``char_tokenizer`` on first use: its module imports transformers (1.2 s), which most commands never need."""
    if name == "char_tokenizer":
        from .tokenizer import char_tokenizer

        return char_tokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
