"""Fast-dLLM v2's model layer (spec/fastdllm_v2.md V2.1): the fastdllm_v2 layout written and loaded with the official
tensor names, its block-causal forward equal to transformers' Qwen2 under the same block mask (float32 and float64,
tolerance from transformers' own float32 rounding) and to the published modelling's recorded logits (float64), and
the token shift of a block forward against the cache equal to the full forward's."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from veridec.models import LAYOUTS, load_pretrained, random_model, write_tiny_checkpoint
from veridec.models.transformer import block_causal_bias
from veridec.numerics import max_abs, ulp32
from veridec.rules.fastdllm_v2 import token_shift

GOLDEN = Path(__file__).parent / "golden"
SIZES = dict(hidden_size=96, num_heads=4, num_kv_heads=2, intermediate_size=80, num_layers=2, rope_theta=5000.0)
QWEN2_NAMES = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
               *(f"model.layers.0.{n}" for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                                 "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                                                 "self_attn.k_proj.weight", "self_attn.k_proj.bias",
                                                 "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                                                 "self_attn.o_proj.weight", "mlp.gate_proj.weight",
                                                 "mlp.up_proj.weight", "mlp.down_proj.weight"))}


def qwen2_twin(model):
    """transformers' Qwen2 with our weights by their official names, eager attention (an additive 4D mask)."""
    cfg = model.cfg
    hf = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
        rms_norm_eps=cfg.rms_norm_eps, rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        max_position_embeddings=cfg.max_length, tie_word_embeddings=False, use_sliding_window=False))
    state = model.state_dict()
    missing, unexpected = hf.load_state_dict(
        {official: state[internal] for internal, official in LAYOUTS["fastdllm_v2"].tensor_names(cfg).items()},
        strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)
    hf.config._attn_implementation = "eager"
    return hf.to(model.dtype).eval()


def twin_raw(hf, x, bias):
    """Raw logits [1, L, V] (position j scores token j + 1) under the additive mask ``bias`` [L, L]."""
    length = x.shape[1]
    return hf(input_ids=x, attention_mask=bias.to(hf.dtype)[None, None], position_ids=torch.arange(length)[None],
              use_cache=False).logits


def test_the_layout_writes_and_reads_the_official_names(tmp_path):
    folder = write_tiny_checkpoint(tmp_path / "v2", "fastdllm_v2", seed=1, dtype=torch.float64)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "Fast_dLLM_Qwen" and config["architectures"] == ["Fast_dLLM_QwenForCausalLM"]
    assert config["bd_size"] == 32 and set(config["layer_types"]) == {"full_attention"}
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", framework="pt") as f:
        assert QWEN2_NAMES <= set(f.keys())
    model = load_pretrained(folder)
    assert (model.layout, model.logit_shift, model.cfg.qkv_bias) == ("fastdllm_v2", 1, True)
    again = random_model("fastdllm_v2", seed=1, dtype=torch.float64)
    x = torch.randint(0, 90, (2, 11))
    with torch.no_grad():  # the same weights; kernels on other memory layouts round apart at 1e-15
        assert max_abs(model(x, block_size=4).logits, again(x, block_size=4).logits) < 1e-12


@pytest.mark.parametrize("change, message", [({"use_sliding_window": True}, "use_sliding_window"),
                                             ({"layer_types": ["sliding_attention"] * 2}, "layer_types"),
                                             ({"bd_size": 0}, "bd_size")])
def test_the_layout_refuses_what_it_cannot_run(tmp_path, change, message):
    folder = write_tiny_checkpoint(tmp_path / "v2", "fastdllm_v2", seed=1)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError, match=message):
        load_pretrained(folder)


def test_the_mask_id_comes_from_the_tokenizer_token_when_the_config_has_none(tmp_path):
    """The official v2 config has no mask_token_id and its tokenizer no mask_token: the id of |<MASK>|."""
    folder = write_tiny_checkpoint(tmp_path / "v2", "fastdllm_v2", seed=1)
    config = json.loads((folder / "config.json").read_text())
    del config["mask_token_id"]
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config.pop("mask_token", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    model = load_pretrained(folder)
    assert model.special.mask_id == model.tokenizer.convert_tokens_to_ids("|<MASK>|")


@pytest.mark.parametrize("length, block", [(37, 8), (40, 16), (33, 32)])
def test_block_causal_forward_equals_transformers_qwen2_with_the_same_mask(length, block):
    """Float64 within transformers' own float32 error, float32 within twice it; the twin without the block mask
    (its default causal mask) is far off: the mask is what is compared (the negative control)."""
    ours64 = random_model("fastdllm_v2", seed=3, dtype=torch.float64, **SIZES)
    ours32 = random_model("fastdllm_v2", seed=3, dtype=torch.float32, **SIZES)
    hf64, hf32 = qwen2_twin(ours64), qwen2_twin(ours32)
    x = torch.randint(0, 90, (1, length), generator=torch.Generator().manual_seed(length))
    x[0, torch.rand(length, generator=torch.Generator().manual_seed(1)) < 0.4] = ours64.special.mask_id
    bias = block_causal_bias(length, block)
    with torch.no_grad():
        ref64, ref32 = twin_raw(hf64, x, bias)[0, :-1], twin_raw(hf32, x, bias)[0, :-1]
        mine64, mine32 = ours64(x, block_size=block).logits[0, 1:], ours32(x, block_size=block).logits[0, 1:]
        causal = hf64(input_ids=x, position_ids=torch.arange(length)[None], use_cache=False).logits[0, :-1]
    rounding = max_abs(ref32, ref64)
    assert 0 < rounding < 1e-3
    assert max_abs(mine64, ref64) <= rounding, (max_abs(mine64, ref64), rounding)
    assert max_abs(mine32, ref64) <= 2 * rounding + ulp32(ref64), (max_abs(mine32, ref64), rounding)
    assert max_abs(causal, ref64) > 1000 * rounding


def test_forward_equals_the_published_modelling_recorded_logits():
    """The published Fast_dLLM_QwenForCausalLM (modeling.py, loaded in float64) on the golden checkpoints,
    block-causal full forwards recorded by tools/golden/fastdllm_v2.py. Its RMSNorm normalises in float32 whatever
    the model's dtype, so the tolerance is our own float32 run's error against our float64 run (measured here);
    a forward with another block size is far off (negative control)."""
    data = json.loads((GOLDEN / "fastdllm_v2.json").read_text())
    for name, entries in data["forward"].items():
        model = load_pretrained(GOLDEN / "checkpoints" / name)
        for entry in entries:
            x = torch.tensor([entry["tokens"]])
            raw = np.frombuffer(base64.b64decode(entry["logits"]), dtype=np.float64)
            theirs = torch.from_numpy(raw.copy()).reshape(x.shape[1], model.vocab_size)[:-1]
            with torch.no_grad():
                mine = model(x, block_size=entry["block_size"]).logits[0, 1:]
                rounding = max_abs(model.float()(x, block_size=entry["block_size"]).logits[0, 1:], mine)
                model.double()
                other = model(x, block_size=entry["block_size"] * 2).logits[0, 1:]
            assert 0 < max_abs(mine, theirs) <= rounding, (name, max_abs(mine, theirs), rounding)
            assert max_abs(other, theirs) > 1000 * rounding


def test_token_shift_of_a_cached_block_equals_the_full_forward():
    """V2.1: a block forward against the finished blocks' cache, shifted (position i from output i - 1, the first
    from its own), equals the full block-causal forward's token-aligned logits at positions 1..b-1 of the block;
    unshifted it does not (negative control)."""
    model = random_model("fastdllm_v2", seed=4, dtype=torch.float64)
    b, x = 8, torch.randint(0, 90, (2, 24), generator=torch.Generator().manual_seed(2))
    cache = model.block_cache(2, 24)
    with torch.no_grad():
        model.forward_blocks(x[:, :16], 0, cache, b, store=True)
        raw = model.forward_blocks(x[:, 16:24], 16, cache, b, store=False).logits  # [2, 8, V]
        full = model(x, block_size=b).logits[:, 16:24]
    assert max_abs(token_shift(raw)[:, 1:], full[:, 1:]) < 1e-12
    assert max_abs(raw[:, 1:], full[:, 1:]) > 1e-3
    assert torch.equal(token_shift(raw)[:, 0], raw[:, 0])
