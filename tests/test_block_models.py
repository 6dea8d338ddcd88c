"""The SDAR layout and block-causal attention (spec/block_diffusion.md BD1, spec/models.md M8): the checkpoint's
official names and config keys, our forward against transformers' Qwen3 under the same block mask (SDAR's
modelling is Qwen3's, spec BD1), block-causality itself, and the block cache (``forward_blocks``) against the full
forward, with whole blocks of padding before a row."""

import json

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from veridec.models import LAYOUTS, load_pretrained, random_model, write_tiny_checkpoint
from veridec.models.transformer import block_causal_bias
from veridec.numerics import max_abs, ulp32

SIZES = dict(hidden_size=48, num_heads=4, num_kv_heads=2, intermediate_size=40, num_layers=2, rope_theta=5000.0,
             explicit_head_dim=24)  # head_dim 24: neither hidden / heads (12) nor a power of two


def qwen3_twin(model):
    """transformers' Qwen3 with our weights (SDAR's tensor names are Qwen3's)."""
    cfg = model.cfg
    hf = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim, rms_norm_eps=cfg.rms_norm_eps, tie_word_embeddings=cfg.tie_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta}, attention_bias=False,
        max_position_embeddings=cfg.max_length, use_sliding_window=False))
    state = model.state_dict()
    official = {name: state[internal] for internal, name in LAYOUTS["sdar"].tensor_names(cfg).items()}
    missing, unexpected = hf.load_state_dict(official, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m and m != "lm_head.weight"], missing
    hf.config._attn_implementation = "eager"
    return hf.to(model.dtype).eval()


def hf_block_logits(hf, x, block_size):
    bias = block_causal_bias(x.shape[1], block_size).to(hf.dtype)[None, None]  # [1, 1, L, L] additive
    return hf(input_ids=x, attention_mask=bias.expand(x.shape[0], -1, -1, -1), use_cache=False).logits


@pytest.mark.parametrize("tied", [False, True])
def test_forward_equals_transformers_qwen3_under_the_block_mask(tied):
    model64 = random_model("sdar", seed=3, dtype=torch.float64, tie_embeddings=tied, **SIZES)
    model32 = random_model("sdar", seed=3, dtype=torch.float32, tie_embeddings=tied, **SIZES)
    hf64, hf32 = qwen3_twin(model64), qwen3_twin(model32)
    x = torch.randint(0, model32.special.mask_id + 1, (2, 97), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref64, ref32 = hf_block_logits(hf64, x, 8), hf_block_logits(hf32, x, 8)
        ours64, ours32 = model64(x, block_size=8).logits, model32(x, block_size=8).logits
    ref_error = max_abs(ref32, ref64)  # transformers' own float32 rounding
    assert 0 < ref_error and max_abs(ours32, ref64) <= 2 * ref_error + ulp32(ref64)
    assert max_abs(ours64, ref64) <= ref_error
    with torch.no_grad():  # negative control: the same twin without the block mask is another function
        bidirectional = hf64(input_ids=x, attention_mask=torch.zeros(2, 1, 97, 97, dtype=torch.float64)).logits
    assert max_abs(bidirectional, ref64) > 1e3 * ref_error


def test_a_token_moves_its_own_and_later_blocks_only():
    model = random_model("sdar", seed=1, dtype=torch.float64)
    x = torch.randint(0, 90, (1, 16), generator=torch.Generator().manual_seed(1))
    y = x.clone()
    y[0, 9] = (x[0, 9] + 1) % 90  # block 2 of size 4
    a, b = model(x, block_size=4).logits[0], model(y, block_size=4).logits[0]
    moved = (a - b).abs().amax(dim=-1) > 0  # [L]
    assert not moved[:8].any() and moved[8:].all()
    bidirectional = (model(x).logits[0] - model(y).logits[0]).abs().amax(dim=-1) > 0
    assert bidirectional[:8].all()  # the control: without the block mask every position moves


def test_the_block_cache_equals_the_full_forward_with_whole_blocks_of_padding():
    """forward_blocks: a prefill of two blocks, a denoising call (not stored) and a store of the third block
    give the full block-causal forward's logits; a row shifted right by one block of padding gives its own."""
    model = random_model("sdar", seed=2, dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    row = torch.randint(0, 90, (12,), generator=g)
    full = model(row[None], block_size=4).logits[0]  # [12, V]
    x = torch.stack([torch.cat([row, torch.full((4,), 5)]), torch.cat([torch.full((4,), 7), row])])  # [2, 16]
    shift = torch.tensor([0, 4])
    cache = model.block_cache(*x.shape, first_real=shift)
    prefill = model.forward_blocks(x[:, :8], 0, cache, 4, store=True, first_real=shift).logits
    assert max_abs(prefill[0], full[:8]) < 1e-12 and max_abs(prefill[1, 4:], full[:4]) < 1e-12
    third = model.forward_blocks(x[:, 8:12], 8, cache, 4, store=False, first_real=shift).logits
    assert max_abs(third[0], full[8:12]) < 1e-12 and max_abs(third[1], full[4:8]) < 1e-12
    model.forward_blocks(x[:, 8:12], 8, cache, 4, store=True, first_real=shift)
    last = model.forward_blocks(x[:, 12:16], 12, cache, 4, store=False, first_real=shift).logits
    assert max_abs(last[1], full[8:12]) < 1e-12
    with pytest.raises(ValueError, match="whole blocks of 4"):
        model.forward_blocks(x[:, 1:5], 1, cache, 4, store=False)


def test_the_sdar_folder_has_the_official_names_and_keys(tmp_path):
    for tied in (False, True):
        folder = write_tiny_checkpoint(tmp_path / f"tied{tied}", "sdar", seed=0, tie_embeddings=tied)
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "sdar" and config["head_dim"] == 16 and config["hidden_size"] == 32
        assert config["tie_word_embeddings"] is tied and config["attention_bias"] is False
        from safetensors import safe_open

        with safe_open(folder / "model.safetensors", framework="pt") as f:
            names = set(f.keys())
        assert "model.layers.1.self_attn.q_norm.weight" in names and "model.layers.0.self_attn.k_norm.weight" in names
        assert ("lm_head.weight" in names) is not tied
        loaded = load_pretrained(folder)
        assert loaded.cfg.qk_norm and loaded.cfg.head_dim == 16 and loaded.special.mask_id == 97
    config["attention_bias"] = True
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="attention_bias=True is not supported"):
        load_pretrained(folder)
