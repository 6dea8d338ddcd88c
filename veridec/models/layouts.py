"""The two official checkpoint layouts: config keys, tensor names and family facts.

- LLaDA (GSAI-ML/LLaDA-8B-Instruct): OLMo-style config (d_model, n_heads, ...), tensors under
  ``model.transformer``; token i is scored at position i.
- Dream (Dream-org/Dream-v0-Instruct-7B): Qwen2 config and tensor names with q/k/v biases; the model scores
  token i at position i - 1 (logit shift 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .interface import SpecialTokens
from .transformer import TransformerConfig


@dataclass(frozen=True)
class Layout:
    family: str
    model_types: tuple[str, ...]
    logit_shift: int
    eot_token: str  # the end-of-turn token's string in the family's tokenizer
    default_special: SpecialTokens  # the 8B/7B models' ids, used when the config does not say
    layer_names: dict[str, str]  # internal suffix -> official name, "{i}" is the layer index
    global_names: dict[str, str]
    to_config: Callable[[dict], TransformerConfig]
    from_config: Callable[[TransformerConfig, SpecialTokens], dict]

    def tensor_names(self, cfg: TransformerConfig) -> dict[str, str]:
        """Internal state_dict key -> official tensor name, for every tensor the checkpoint must hold."""
        names = {k: v for k, v in self.global_names.items() if not (k == "lm_head.weight" and cfg.tie_embeddings)}
        for i in range(cfg.num_layers):
            for suffix, official in self.layer_names.items():
                if suffix.endswith(".bias") and not cfg.qkv_bias:
                    continue
                names[f"layers.{i}.{suffix}"] = official.format(i=i)
        return names


def _require(config: dict, key: str, source: str = "config.json"):
    if key not in config:
        raise ValueError(f"{source}: missing key '{key}'")
    return config[key]


def _reject(config: dict, checks: dict[str, object], family: str):
    """Refuse configs that ask for features this implementation does not have (never run them silently)."""
    for key, allowed in checks.items():
        if key in config and config[key] not in (allowed if isinstance(allowed, tuple) else (allowed,)):
            raise ValueError(f"config.json: {family} option {key}={config[key]!r} is not supported "
                             f"(allowed: {allowed!r})")


def _llada_to_config(c: dict) -> TransformerConfig:
    _reject(c, {"block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu", "alibi": False,
                "include_bias": False, "scale_logits": False, "input_emb_norm": False, "rope": True,
                "attention_layer_norm": False, "layer_norm_with_affine": True, "multi_query_attention": (None, False)},
            "LLaDA")
    n_heads = _require(c, "n_heads")
    return TransformerConfig(
        vocab_size=c.get("embedding_size") or _require(c, "vocab_size"),
        hidden_size=_require(c, "d_model"), num_layers=_require(c, "n_layers"), num_heads=n_heads,
        num_kv_heads=c.get("n_kv_heads") or n_heads,
        intermediate_size=c.get("mlp_hidden_size") or c.get("mlp_ratio", 4) * c["d_model"],
        rope_theta=float(c.get("rope_theta", 10000.0)), rms_norm_eps=float(c.get("rms_norm_eps", 1e-5)),
        qkv_bias=bool(c.get("include_qkv_bias", False)), tie_embeddings=bool(c.get("weight_tying", False)),
        max_length=int(c.get("max_sequence_length", 4096)))


def _llada_from_config(cfg: TransformerConfig, special: SpecialTokens) -> dict:
    return {
        "architectures": ["LLaDAModelLM"], "model_type": "llada", "block_type": "llama",
        "activation_type": "silu", "layer_norm_type": "rms", "layer_norm_with_affine": True, "alibi": False,
        "rope": True, "rope_full_precision": True, "include_bias": False, "scale_logits": False,
        "input_emb_norm": False, "attention_layer_norm": False, "multi_query_attention": None,
        "d_model": cfg.hidden_size, "n_heads": cfg.num_heads, "n_kv_heads": cfg.num_kv_heads,
        "n_layers": cfg.num_layers, "mlp_hidden_size": cfg.intermediate_size,
        "mlp_ratio": max(1, cfg.intermediate_size // cfg.hidden_size), "vocab_size": cfg.vocab_size,
        "embedding_size": cfg.vocab_size, "rope_theta": cfg.rope_theta, "rms_norm_eps": cfg.rms_norm_eps,
        "include_qkv_bias": cfg.qkv_bias, "weight_tying": cfg.tie_embeddings,
        "max_sequence_length": cfg.max_length, "mask_token_id": special.mask_id,
        "eos_token_id": special.eos_id, "pad_token_id": special.pad_id,
    }


def _dream_to_config(c: dict) -> TransformerConfig:
    _reject(c, {"hidden_act": "silu", "use_sliding_window": False, "rope_scaling": None}, "Dream")
    n_heads = _require(c, "num_attention_heads")
    hidden = _require(c, "hidden_size")
    if c.get("head_dim") not in (None, hidden // n_heads):
        raise ValueError(f"config.json: head_dim {c['head_dim']} != hidden_size / num_attention_heads is not supported")
    return TransformerConfig(
        vocab_size=_require(c, "vocab_size"), hidden_size=hidden, num_layers=_require(c, "num_hidden_layers"),
        num_heads=n_heads, num_kv_heads=c.get("num_key_value_heads") or n_heads,
        intermediate_size=_require(c, "intermediate_size"), rope_theta=float(c.get("rope_theta", 10000.0)),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)), qkv_bias=True,
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_length=int(c.get("max_position_embeddings", 32768)))


def _dream_from_config(cfg: TransformerConfig, special: SpecialTokens) -> dict:
    return {
        "architectures": ["DreamModel"], "model_type": "Dream", "hidden_act": "silu",
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads,
        "num_hidden_layers": cfg.num_layers, "vocab_size": cfg.vocab_size, "rope_theta": cfg.rope_theta,
        "rms_norm_eps": cfg.rms_norm_eps, "tie_word_embeddings": cfg.tie_embeddings,
        "max_position_embeddings": cfg.max_length, "use_sliding_window": False, "rope_scaling": None,
        "mask_token_id": special.mask_id, "eos_token_id": special.eos_id, "pad_token_id": special.pad_id,
        "bos_token_id": special.eos_id,
    }


# Internal state_dict suffix -> (LLaDA's official name, Dream's), per layer ("{i}" is the layer index) and global.
LAYER_NAMES = {
    "attn_norm.weight": ("model.transformer.blocks.{i}.attn_norm.weight", "model.layers.{i}.input_layernorm.weight"),
    "attn.q.weight": ("model.transformer.blocks.{i}.q_proj.weight", "model.layers.{i}.self_attn.q_proj.weight"),
    "attn.k.weight": ("model.transformer.blocks.{i}.k_proj.weight", "model.layers.{i}.self_attn.k_proj.weight"),
    "attn.v.weight": ("model.transformer.blocks.{i}.v_proj.weight", "model.layers.{i}.self_attn.v_proj.weight"),
    "attn.q.bias": ("model.transformer.blocks.{i}.q_proj.bias", "model.layers.{i}.self_attn.q_proj.bias"),
    "attn.k.bias": ("model.transformer.blocks.{i}.k_proj.bias", "model.layers.{i}.self_attn.k_proj.bias"),
    "attn.v.bias": ("model.transformer.blocks.{i}.v_proj.bias", "model.layers.{i}.self_attn.v_proj.bias"),
    "attn.o.weight": ("model.transformer.blocks.{i}.attn_out.weight", "model.layers.{i}.self_attn.o_proj.weight"),
    "mlp_norm.weight": ("model.transformer.blocks.{i}.ff_norm.weight",
                        "model.layers.{i}.post_attention_layernorm.weight"),
    "mlp.gate.weight": ("model.transformer.blocks.{i}.ff_proj.weight", "model.layers.{i}.mlp.gate_proj.weight"),
    "mlp.up.weight": ("model.transformer.blocks.{i}.up_proj.weight", "model.layers.{i}.mlp.up_proj.weight"),
    "mlp.down.weight": ("model.transformer.blocks.{i}.ff_out.weight", "model.layers.{i}.mlp.down_proj.weight"),
}
GLOBAL_NAMES = {
    "embed.weight": ("model.transformer.wte.weight", "model.embed_tokens.weight"),
    "final_norm.weight": ("model.transformer.ln_f.weight", "model.norm.weight"),
    "lm_head.weight": ("model.transformer.ff_out.weight", "lm_head.weight"),
}


def _column(table: dict[str, tuple[str, str]], index: int) -> dict[str, str]:
    return {internal: names[index] for internal, names in table.items()}


LLADA = Layout(
    family="llada", model_types=("llada",), logit_shift=0, eot_token="<|eot_id|>",
    default_special=SpecialTokens(mask_id=126336, eos_id=126081, eot_id=126348, pad_id=126081),
    layer_names=_column(LAYER_NAMES, 0), global_names=_column(GLOBAL_NAMES, 0),
    to_config=_llada_to_config, from_config=_llada_from_config,
)

DREAM = Layout(
    family="dream", model_types=("Dream", "dream", "qwen2"), logit_shift=1, eot_token="<|im_end|>",
    default_special=SpecialTokens(mask_id=151666, eos_id=151643, eot_id=151645, pad_id=151643),
    layer_names=_column(LAYER_NAMES, 1), global_names=_column(GLOBAL_NAMES, 1),
    to_config=_dream_to_config, from_config=_dream_from_config,
)

LAYOUTS = {layout.family: layout for layout in (LLADA, DREAM)}


def layout_for(config: dict, source: str = "config.json") -> Layout:
    """The layout a config.json describes, from its ``model_type``."""
    model_type = config.get("model_type")
    for layout in LAYOUTS.values():
        if model_type in layout.model_types:
            return layout
    known = sorted(t for layout in LAYOUTS.values() for t in layout.model_types)
    raise ValueError(f"{source}: model_type {model_type!r} is not one of {known}")
