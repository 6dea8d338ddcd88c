"""The official checkpoint layouts: config keys, tensor names and layout facts.

- LLaDA (GSAI-ML/LLaDA-8B-Instruct): OLMo-style config (d_model, n_heads, ...), tensors under
  ``model.transformer``; token i is scored at position i.
- Dream (Dream-org/Dream-v0-Instruct-7B): Qwen2 config and tensor names with q/k/v biases; the model scores
  token i at position i - 1 (logit shift 1).
- SDAR (JetLM/SDAR-*, Gen-Verse/TraDo-*: block diffusion, ``SDARConfig``): Qwen3 config and tensor names, per-head
  q/k RMSNorm before RoPE, ``head_dim`` from the config; token i is scored at position i; decoded block by
  block under block-causal attention (spec/block_diffusion.md).
- Fast-dLLM v2 (Efficient-Large-Model/Fast_dLLM_v2_*, ``Fast_dLLM_QwenConfig``): Qwen2 config and tensor names with
  q/k/v biases, ``bd_size`` (the training block size); block diffusion whose block position i is scored by the
  output at i - 1 (token shift, logit shift 1; spec/fastdllm_v2.md V2.1). Its tokenizer's mask token is an
  additional special token ``|<MASK>|`` (id 151665), not the tokenizer's ``mask_token``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..checks import check_integer, check_positive
from .interface import SpecialTokens
from .transformer import TransformerConfig


@dataclass(frozen=True)
class Layout:
    name: str  # the model's ``layout`` attribute: "llada", "dream" or "sdar"
    model_types: tuple[str, ...]
    logit_shift: int
    eot_token: str  # the end-of-turn token's string in the layout's tokenizer
    mask_token: str  # the mask token's string in the layout's tokenizer
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
                if suffix.endswith(".bias") and not cfg.qkv_bias or suffix in QK_NORMS and not cfg.qk_norm:
                    continue
                names[f"layers.{i}.{suffix}"] = official.format(i=i)
        return names


QK_NORMS = ("attn.q_norm.weight", "attn.k_norm.weight")  # SDAR's per-head norms (TransformerConfig.qk_norm)
_MISSING = object()


def _value(config: dict, key: str, default=_MISSING):
    if key in config and config[key] is not None:
        return config[key]
    if default is _MISSING:
        raise ValueError(f"missing key '{key}'")
    return default


def _integer(config: dict, key: str, default=_MISSING) -> int:
    """config[key] as an integer >= 1; an error naming the key otherwise (the loader names the file)."""
    value = _value(config, key, default)
    check_integer(key, value, 1)
    return value


def _number(config: dict, key: str, default: float) -> float:
    """config[key] as a finite number > 0; an error naming the key otherwise (the loader names the file)."""
    value = _value(config, key, default)
    check_positive(key, value)
    return float(value)


def _flag(config: dict, key: str) -> bool:
    value = _value(config, key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def _reject(config: dict, checks: dict[str, object], layout: str):
    """Refuse configs that ask for features this implementation does not have (never run them silently)."""
    for key, allowed in checks.items():
        if key in config and config[key] not in (allowed if isinstance(allowed, tuple) else (allowed,)):
            raise ValueError(f"{layout} option {key}={config[key]!r} is not supported "
                             f"(allowed: {allowed!r})")


def _llada_to_config(c: dict) -> TransformerConfig:
    _reject(c, {"block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu", "alibi": False,
                "include_bias": False, "scale_logits": False, "input_emb_norm": False, "rope": True,
                "attention_layer_norm": False, "layer_norm_with_affine": True, "multi_query_attention": (None, False)},
            "LLaDA")
    n_heads = _integer(c, "n_heads")
    hidden = _integer(c, "d_model")
    vocab_key = "embedding_size" if c.get("embedding_size") else "vocab_size"
    if vocab_key == "embedding_size" and c.get("vocab_size") is not None and not (
            _integer(c, "vocab_size") <= _integer(c, "embedding_size")):
        raise ValueError(f"vocab_size {c['vocab_size']} exceeds embedding_size {c['embedding_size']}")
    intermediate = (_integer(c, "mlp_hidden_size") if c.get("mlp_hidden_size")
                    else _integer(c, "mlp_ratio", 4) * hidden)
    return TransformerConfig(
        vocab_size=_integer(c, vocab_key), hidden_size=hidden, num_layers=_integer(c, "n_layers"),
        num_heads=n_heads, num_kv_heads=_integer(c, "n_kv_heads", n_heads), intermediate_size=intermediate,
        rope_theta=_number(c, "rope_theta", 10000.0), rms_norm_eps=_number(c, "rms_norm_eps", 1e-5),
        qkv_bias=_flag(c, "include_qkv_bias"), tie_embeddings=_flag(c, "weight_tying"),
        max_length=_integer(c, "max_sequence_length", 4096))


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
    n_heads = _integer(c, "num_attention_heads")
    hidden = _integer(c, "hidden_size")
    if c.get("head_dim") not in (None, hidden // n_heads):
        raise ValueError(f"head_dim {c['head_dim']!r} != hidden_size / num_attention_heads "
                         "is not supported")
    return TransformerConfig(
        vocab_size=_integer(c, "vocab_size"), hidden_size=hidden, num_layers=_integer(c, "num_hidden_layers"),
        num_heads=n_heads, num_kv_heads=_integer(c, "num_key_value_heads", n_heads),
        intermediate_size=_integer(c, "intermediate_size"), rope_theta=_number(c, "rope_theta", 10000.0),
        rms_norm_eps=_number(c, "rms_norm_eps", 1e-6), qkv_bias=True,
        tie_embeddings=_flag(c, "tie_word_embeddings"),
        max_length=_integer(c, "max_position_embeddings", 32768))


def _sdar_to_config(c: dict) -> TransformerConfig:
    _reject(c, {"hidden_act": "silu", "attention_bias": False, "rope_scaling": None}, "SDAR")
    n_heads = _integer(c, "num_attention_heads")
    return TransformerConfig(
        vocab_size=_integer(c, "vocab_size"), hidden_size=_integer(c, "hidden_size"),
        num_layers=_integer(c, "num_hidden_layers"), num_heads=n_heads,
        num_kv_heads=_integer(c, "num_key_value_heads", n_heads), intermediate_size=_integer(c, "intermediate_size"),
        rope_theta=_number(c, "rope_theta", 10000.0), rms_norm_eps=_number(c, "rms_norm_eps", 1e-6),
        tie_embeddings=_flag(c, "tie_word_embeddings"), max_length=_integer(c, "max_position_embeddings", 32768),
        explicit_head_dim=_integer(c, "head_dim", 128), qk_norm=True)


def _sdar_from_config(cfg: TransformerConfig, special: SpecialTokens) -> dict:
    return {
        "architectures": ["SDARForCausalLM"], "model_type": "sdar", "hidden_act": "silu",
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size, "head_dim": cfg.head_dim,
        "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads,
        "num_hidden_layers": cfg.num_layers, "vocab_size": cfg.vocab_size, "rope_theta": cfg.rope_theta,
        "rms_norm_eps": cfg.rms_norm_eps, "tie_word_embeddings": cfg.tie_embeddings, "attention_bias": False,
        "max_position_embeddings": cfg.max_length, "rope_scaling": None, "use_sliding_window": False,
        "fuse_cross_entropy": False, "mask_token_id": special.mask_id, "eos_token_id": special.eos_id,
        "pad_token_id": special.pad_id, "bos_token_id": special.eos_id,
    }


def _v2_to_config(c: dict) -> TransformerConfig:
    """Fast-dLLM v2: Dream's (Qwen2's) keys; every layer full attention; ``bd_size``, when given, an integer."""
    _reject(c, {"hidden_act": "silu", "use_sliding_window": False, "rope_scaling": None}, "Fast-dLLM v2")
    layer_types = c.get("layer_types")
    if layer_types is not None and any(kind != "full_attention" for kind in layer_types):
        raise ValueError(f"layer_types {sorted(set(layer_types))} is not supported (only full_attention)")
    if c.get("bd_size") is not None:
        _integer(c, "bd_size")
    return _dream_to_config(c)


def _v2_from_config(cfg: TransformerConfig, special: SpecialTokens) -> dict:
    """The keys ``Fast_dLLM_QwenConfig`` reads, the mask id written out (the official config has none: its
    tokenizer names the mask token)."""
    return {
        "architectures": ["Fast_dLLM_QwenForCausalLM"], "model_type": "Fast_dLLM_Qwen", "hidden_act": "silu",
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads,
        "num_hidden_layers": cfg.num_layers, "vocab_size": cfg.vocab_size, "rope_theta": cfg.rope_theta,
        "rms_norm_eps": cfg.rms_norm_eps, "tie_word_embeddings": cfg.tie_embeddings,
        "max_position_embeddings": cfg.max_length, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": cfg.num_layers, "layer_types": ["full_attention"] * cfg.num_layers, "rope_scaling": None,
        "attention_dropout": 0.0, "bd_size": V2_BLOCK_SIZE, "mask_token_id": special.mask_id,
        "eos_token_id": special.eos_id, "pad_token_id": special.pad_id, "bos_token_id": special.eos_id,
    }


V2_BLOCK_SIZE = 32  # Fast_dLLM_v2_7B's bd_size and generate's block_size


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


# Internal state_dict suffix -> (LLaDA's official name, Dream's[, SDAR's]), per layer ("{i}" is the layer index) and
# global; None where a layout has no such tensor; SDAR's are Dream's where not given (Qwen3's names are Qwen2's).
LAYER_NAMES = {
    "attn_norm.weight": ("model.transformer.blocks.{i}.attn_norm.weight", "model.layers.{i}.input_layernorm.weight"),
    "attn.q.weight": ("model.transformer.blocks.{i}.q_proj.weight", "model.layers.{i}.self_attn.q_proj.weight"),
    "attn.k.weight": ("model.transformer.blocks.{i}.k_proj.weight", "model.layers.{i}.self_attn.k_proj.weight"),
    "attn.v.weight": ("model.transformer.blocks.{i}.v_proj.weight", "model.layers.{i}.self_attn.v_proj.weight"),
    "attn.q.bias": ("model.transformer.blocks.{i}.q_proj.bias", "model.layers.{i}.self_attn.q_proj.bias"),
    "attn.k.bias": ("model.transformer.blocks.{i}.k_proj.bias", "model.layers.{i}.self_attn.k_proj.bias"),
    "attn.v.bias": ("model.transformer.blocks.{i}.v_proj.bias", "model.layers.{i}.self_attn.v_proj.bias"),
    "attn.q_norm.weight": (None, None, "model.layers.{i}.self_attn.q_norm.weight"),
    "attn.k_norm.weight": (None, None, "model.layers.{i}.self_attn.k_norm.weight"),
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


def _column(table: dict[str, tuple], index: int) -> dict[str, str]:
    """One layout's names: its column, SDAR's falling back to Dream's (Qwen3's names are Qwen2's)."""
    found = {internal: names[index] if index < len(names) else names[1] for internal, names in table.items()}
    return {internal: name for internal, name in found.items() if name is not None}


LLADA = Layout(
    name="llada", model_types=("llada",), logit_shift=0, eot_token="<|eot_id|>", mask_token="<|mdm_mask|>",
    default_special=SpecialTokens(mask_id=126336, eos_id=126081, eot_id=126348, pad_id=126081),
    layer_names=_column(LAYER_NAMES, 0), global_names=_column(GLOBAL_NAMES, 0),
    to_config=_llada_to_config, from_config=_llada_from_config,
)

DREAM = Layout(
    name="dream", model_types=("Dream", "dream", "qwen2"), logit_shift=1, eot_token="<|im_end|>",
    mask_token="<|mask|>",
    default_special=SpecialTokens(mask_id=151666, eos_id=151643, eot_id=151645, pad_id=151643),
    layer_names=_column(LAYER_NAMES, 1), global_names=_column(GLOBAL_NAMES, 1),
    to_config=_dream_to_config, from_config=_dream_from_config,
)

SDAR = Layout(
    name="sdar", model_types=("sdar",), logit_shift=0, eot_token="<|im_end|>", mask_token="<|MASK|>",
    default_special=SpecialTokens(mask_id=151669, eos_id=151643, eot_id=151645, pad_id=151643),
    layer_names=_column(LAYER_NAMES, 2), global_names=_column(GLOBAL_NAMES, 2),
    to_config=_sdar_to_config, from_config=_sdar_from_config,
)

FASTDLLM_V2 = Layout(
    name="fastdllm_v2", model_types=("Fast_dLLM_Qwen",), logit_shift=1, eot_token="<|im_end|>", mask_token="|<MASK>|",
    default_special=SpecialTokens(mask_id=151665, eos_id=151645, eot_id=151645, pad_id=151643),
    layer_names=_column(LAYER_NAMES, 1), global_names=_column(GLOBAL_NAMES, 1),
    to_config=_v2_to_config, from_config=_v2_from_config,
)

LAYOUTS = {layout.name: layout for layout in (LLADA, DREAM, SDAR, FASTDLLM_V2)}


def layout_for(config: dict, source: str = "config.json") -> Layout:
    """The layout a config.json describes, from its ``model_type``."""
    model_type = config.get("model_type")
    for layout in LAYOUTS.values():
        if model_type in layout.model_types:
            return layout
    known = sorted(t for layout in LAYOUTS.values() for t in layout.model_types)
    raise ValueError(f"{source}: model_type {model_type!r} is not one of {known}")
