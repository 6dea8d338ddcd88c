"""Our forward equals transformers' Llama (LLaDA layout) / Qwen2 (Dream layout) run bidirectionally.

spec/models.md M5. The same random weights are loaded into both by name; sizes are awkward on purpose
(L = 97, head_dim 24, grouped K/V heads, batch 3 with left padding). Tolerance: transformers' own float32 vs
float64 error, measured in the same test.
"""

import pytest
import torch
from veridec.numerics import max_abs, ulp32
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from veridec.models import LAYOUTS, random_model, rope_positions

SIZES = dict(hidden_size=96, num_heads=4, num_kv_heads=2, intermediate_size=80, num_layers=2, rope_theta=5000.0)
LLADA_TO_LLAMA = {
    "model.transformer.wte": "model.embed_tokens", "model.transformer.ln_f": "model.norm",
    "model.transformer.ff_out": "lm_head", "model.transformer.blocks": "model.layers",
    "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
    "ff_out": "mlp.down_proj", "attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm",
}


def official_state(model):
    """The model's tensors under the official names of its layout."""
    state = model.state_dict()
    return {official: state[internal] for internal, official in LAYOUTS[model.layout].tensor_names(model.cfg).items()}


def to_llama_name(name: str) -> str:
    for prefix in ("model.transformer.wte", "model.transformer.ln_f", "model.transformer.ff_out"):
        if name.startswith(prefix + "."):
            return LLADA_TO_LLAMA[prefix] + name[len(prefix):]
    parts = name.replace("model.transformer.blocks", "model.layers").split(".")
    parts[3] = LLADA_TO_LLAMA[parts[3]]
    return ".".join(parts)


def hf_twin(model):
    """transformers' Llama/Qwen2 with our weights, made bidirectional (is_causal False in config and layers)."""
    cfg = model.cfg
    common = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                  num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                  num_key_value_heads=cfg.num_kv_heads, rms_norm_eps=cfg.rms_norm_eps,
                  rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
                  max_position_embeddings=cfg.max_length, tie_word_embeddings=False)
    if model.layout == "llada":
        hf = LlamaForCausalLM(LlamaConfig(attention_bias=False, mlp_bias=False, **common))
        state = {to_llama_name(k): v for k, v in official_state(model).items()}
    else:
        hf = Qwen2ForCausalLM(Qwen2Config(use_sliding_window=False, **common))
        state = official_state(model)  # Dream's names are Qwen2's
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)
    hf.config.is_causal = False
    hf.config._attn_implementation = "eager"
    for layer in hf.model.layers:
        layer.self_attn.is_causal = False
    return hf.eval()


def hf_logits(hf, x, mask):
    out = hf(input_ids=x, attention_mask=mask.long(), position_ids=rope_positions(mask), use_cache=False)
    return out.logits  # [B, L, V], raw: position j scores token j + shift


def canvas(model, lengths, total, seed):
    """A left-padded batch [B, total] of random tokens, some of them masks."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, model.special.mask_id, (len(lengths), total), generator=g)
    x[torch.rand(x.shape, generator=g) < 0.4] = model.special.mask_id
    mask = torch.arange(total)[None] >= (total - torch.tensor(lengths))[:, None]
    return x.masked_fill(~mask, model.special.pad_id), mask


@pytest.mark.parametrize("layout", ["llada", "dream"])
def test_forward_equals_transformers_bidirectional(layout):
    model64 = random_model(layout, seed=3, dtype=torch.float64, **SIZES)
    model32 = random_model(layout, seed=3, dtype=torch.float32, **SIZES)
    hf64, hf32 = hf_twin(model64).double(), hf_twin(model32)
    x, mask = canvas(model32, lengths=[97, 60, 1], total=97, seed=0)
    with torch.no_grad():
        ref64, ref32 = hf_logits(hf64, x, mask), hf_logits(hf32, x, mask)
        ours64, ours32 = model64(x, mask).logits, model32(x, mask).logits
    shift = model32.logit_shift
    real = mask[:, shift:] & mask[:, : 97 - shift]  # a real token scored from a real position
    ours64, ours32 = ours64[:, shift:][real], ours32[:, shift:][real]  # aligned: token i from position i - shift
    ref64, ref32 = ref64[:, : 97 - shift][real], ref32[:, : 97 - shift][real]
    ref_error = max_abs(ref32, ref64)  # transformers' own float32 rounding
    assert ref_error > 0
    print(layout, "ours32 err", max_abs(ours32, ref64), "ours64 err", max_abs(ours64, ref64), "ref32 err", ref_error)
    assert max_abs(ours32, ref64) <= 2 * ref_error + ulp32(ref64), (max_abs(ours32, ref64), ref_error)
    assert max_abs(ours64, ref64) <= ref_error, (max_abs(ours64, ref64), ref_error)


@pytest.mark.parametrize("layout", ["llada", "dream"])
def test_twin_is_really_bidirectional(layout):
    """Guard for the test above: changing the last token must change position 0 in the transformers twin."""
    model = random_model(layout, seed=3, **SIZES)
    hf = hf_twin(model)
    x, mask = canvas(model, lengths=[12], total=12, seed=1)
    y = x.clone()
    y[0, -1] = (x[0, -1] + 1) % model.special.mask_id
    with torch.no_grad():
        assert not torch.allclose(hf_logits(hf, x, mask)[0, 0], hf_logits(hf, y, mask)[0, 0])


@pytest.mark.parametrize("theta, head_dim", [(500000.0, 128), (1000000.0, 128), (10000.0, 16)])  # LLaDA, Dream, tiny
def test_rotary_tables_equal_transformers_bit_for_bit(theta, head_dim):
    """spec M6: RoPE angles in float32 exactly as the official code computes them (transformers' Llama/Qwen2
    rotary embedding, LLaDA's rope_full_precision), at every position of an 8192 canvas: bit for bit. Angles
    in float64 instead differ by ~2e-4 at the far positions."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from veridec.models.layers import rope_cos_sin

    config = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, rope_theta=theta,
                         max_position_embeddings=8192)
    positions = torch.arange(8192)[None]  # [1, L]
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, 8192, head_dim), positions)  # [1, L, D]
    ours_cos, ours_sin = rope_cos_sin(positions, head_dim, theta)  # [1, 1, L, D]
    assert torch.equal(ours_cos[:, 0], cos) and torch.equal(ours_sin[:, 0], sin)
