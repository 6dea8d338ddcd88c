"""A feature cache that hooks a transformers model, written from scratch in the manner of dLLM-Cache: the
user's model is transformers' ``LlamaForCausalLM`` made bidirectional and loaded with a LLaDA-layout checkpoint
folder's weights (``load``); the decoder is LLaDA's sampler (``examples/llada_sampler.py``) with forward hooks on
every decoder layer that keep the prompt positions' outputs from a refresh every ``refresh`` forwards and hand
them back in between (``refresh=1``: recomputed every forward, exact). ``left_installed`` forgets to remove its
hooks, so the model keeps serving stale prompt features in the decodes after it. Written against transformers
5 (`rope_parameters`):

    veridec check examples/hf_feature_cache.py:generate --against llada --model FOLDER \\
        --candidate-model examples/hf_feature_cache.py:load --tier A
"""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

from llada_sampler import generate as llada_generate

LAYER_NAMES = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
               "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
               "ff_out": "mlp.down_proj", "attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm"}
TOP_NAMES = {"wte": "model.embed_tokens", "ln_f": "model.norm", "ff_out": "lm_head"}


def load(folder):
    """The folder's LLaDA checkpoint as a bidirectional transformers Llama (eager attention, no causal mask)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=config["embedding_size"], hidden_size=config["d_model"], intermediate_size=config["mlp_hidden_size"],
        num_hidden_layers=config["n_layers"], num_attention_heads=config["n_heads"],
        num_key_value_heads=config["n_kv_heads"], rms_norm_eps=config["rms_norm_eps"],
        rope_parameters={"rope_type": "default", "rope_theta": config["rope_theta"]},
        max_position_embeddings=config["max_sequence_length"], tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False))
    missing, unexpected = llama.load_state_dict({_llama_name(k): v for k, v in _tensors(folder).items()}, strict=False)
    if unexpected or [name for name in missing if "rotary" not in name]:
        raise ValueError(f"{folder}: tensors do not fit Llama (missing {missing}, unexpected {unexpected})")
    llama.config.is_causal = False
    llama.config._attn_implementation = "eager"
    for layer in llama.model.layers:
        layer.self_attn.is_causal = False
    return llama.eval()


def _tensors(folder: Path) -> dict:
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else \
        ["model.safetensors"]
    return {name: tensor for file in files for name, tensor in load_file(folder / file).items()}


def _llama_name(name: str) -> str:
    parts = name.split(".")  # model.transformer.wte.weight | model.transformer.blocks.3.q_proj.weight
    if parts[2] == "blocks":
        return f"model.layers.{parts[3]}.{LAYER_NAMES[parts[4]]}.{parts[5]}"
    return f"{TOP_NAMES[parts[2]]}.{parts[3]}"


def install_prompt_cache(model, prompt_length: int, refresh: int) -> list:
    """Hooks on every decoder layer: the prompt positions' outputs are recomputed on every ``refresh``-th forward
    and reused in between. Returns the hook handles."""
    forwards, kept = [0], {}

    def count(module, args, kwargs):
        forwards[0] += 1

    def stale_prompt(index):
        def hook(module, args, output):
            hidden = output[0] if isinstance(output, tuple) else output  # [B, L, hidden]
            if (forwards[0] - 1) % refresh == 0 or index not in kept or kept[index].shape[0] != hidden.shape[0]:
                kept[index] = hidden[:, :prompt_length].detach().clone()
                return output
            served = torch.cat([kept[index], hidden[:, prompt_length:]], dim=1)
            return (served, *output[1:]) if isinstance(output, tuple) else served

        return hook

    handles = [model.register_forward_pre_hook(count, with_kwargs=True)]
    return handles + [layer.register_forward_hook(stale_prompt(i)) for i, layer in enumerate(model.model.layers)]


def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
             remasking="low_confidence", mask_id=126336, refresh=4):
    """LLaDA's sampler with the prompt's features refreshed every ``refresh`` forwards; hooks removed after."""
    handles = install_prompt_cache(model, prompt.shape[1], refresh)
    try:
        return llada_generate(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id)
    finally:
        for handle in handles:
            handle.remove()


def left_installed(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                   remasking="low_confidence", mask_id=126336, refresh=4):
    """The broken variant: its hooks stay on the model, so in every later decode on the same model the earlier
    decodes' hooks serve their own, stale prompt features between their refreshes."""
    install_prompt_cache(model, prompt.shape[1], refresh)
    return llada_generate(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id)
