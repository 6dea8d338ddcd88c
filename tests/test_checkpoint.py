"""Loading and saving official-layout folders (spec/models.md ML1-ML4)."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from veridec.models import load_pretrained, random_model, save_pretrained


def tensor_names(folder):
    names = set()
    for path in folder.glob("*.safetensors"):
        with safe_open(path, framework="pt") as f:
            names |= set(f.keys())
    return names


@pytest.mark.parametrize("layout", ["llada", "dream"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shard_bytes", [None, 30_000])
def test_save_load_round_trip_is_bit_exact(tmp_path, layout, dtype, shard_bytes):
    model = random_model(layout, seed=4, dtype=dtype)
    save_pretrained(model, tmp_path, max_shard_bytes=shard_bytes)
    loaded = load_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors.index.json").exists() == (shard_bytes is not None)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    assert loaded.special == model.special and loaded.layout == layout and loaded.cfg == model.cfg
    x = torch.randint(0, 90, (2, 9))
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)
    assert loaded.tokenizer.decode(loaded.tokenizer("veridec 1+1=2")["input_ids"]) == "veridec 1+1=2"


def test_official_names_and_config_keys(tiny_folders):
    llada, dream = tiny_folders["llada"], tiny_folders["dream"]
    assert {"model.transformer.wte.weight", "model.transformer.ln_f.weight", "model.transformer.ff_out.weight",
            "model.transformer.blocks.1.q_proj.weight", "model.transformer.blocks.0.attn_out.weight",
            "model.transformer.blocks.0.ff_proj.weight", "model.transformer.blocks.0.up_proj.weight",
            "model.transformer.blocks.0.ff_out.weight", "model.transformer.blocks.0.attn_norm.weight",
            "model.transformer.blocks.0.ff_norm.weight"} <= tensor_names(llada)
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
            "model.layers.1.self_attn.q_proj.bias", "model.layers.0.mlp.down_proj.weight",
            "model.layers.0.input_layernorm.weight"} <= tensor_names(dream)
    llada_cfg = json.loads((llada / "config.json").read_text())
    assert {"d_model", "n_heads", "n_kv_heads", "n_layers", "mlp_hidden_size", "rope_theta", "vocab_size",
            "embedding_size", "weight_tying", "mask_token_id"} <= set(llada_cfg)
    dream_cfg = json.loads((dream / "config.json").read_text())
    assert {"hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
            "mask_token_id", "pad_token_id"} <= set(dream_cfg)


def test_llada_8b_config_is_understood():
    """The published GSAI-ML/LLaDA-8B-Instruct config (as listed in its config.json) maps to the 8B shape."""
    from veridec.models import LLADA

    official = {"activation_type": "silu", "alibi": False, "block_type": "llama", "d_model": 4096,
                "embedding_size": 126464, "eos_token_id": 126081, "include_bias": False, "include_qkv_bias": False,
                "input_emb_norm": False, "layer_norm_type": "rms", "layer_norm_with_affine": True,
                "mask_token_id": 126336, "max_sequence_length": 4096, "mlp_hidden_size": 12288, "mlp_ratio": 4,
                "model_type": "llada", "multi_query_attention": None, "n_heads": 32, "n_kv_heads": 32,
                "n_layers": 32, "pad_token_id": 126081, "rms_norm_eps": 1e-05, "rope": True,
                "rope_full_precision": True, "rope_theta": 500000.0, "scale_logits": False, "vocab_size": 126464,
                "weight_tying": False}
    cfg = LLADA.to_config(official)
    assert (cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.intermediate_size, cfg.vocab_size) == (
        4096, 32, 32, 12288, 126464)
    assert len(LLADA.tensor_names(cfg)) == 3 + 32 * 9


def break_folder(folder, tmp_path, how):
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    how(broken)
    return broken


def drop_tensor(folder, name):
    path = folder / "model.safetensors"
    with safe_open(path, framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys() if k != name}
    save_file(tensors, path)


def replace_tensor(folder, name, value):
    path = folder / "model.safetensors"
    with safe_open(path, framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors[name] = value
    save_file(tensors, path)


def edit_config(folder, **changes):
    path = folder / "config.json"
    config = {**json.loads(path.read_text()), **changes}
    path.write_text(json.dumps({k: v for k, v in config.items() if v != "DELETE"}))


@pytest.mark.parametrize("how, message", [
    (lambda f: (f / "config.json").unlink(), r"config.json: missing"),
    (lambda f: (f / "model.safetensors").unlink(), r"no model.safetensors and no model.safetensors.index.json"),
    (lambda f: drop_tensor(f, "model.layers.1.mlp.up_proj.weight"), r"missing tensor.*model.layers.1.mlp.up_proj"),
    (lambda f: replace_tensor(f, "model.norm.weight", torch.ones(5)),
     r"model.safetensors: tensor model.norm.weight has shape \(5,\), config implies \(32,\)"),
    (lambda f: replace_tensor(f, "model.extra.weight", torch.ones(5)), r"unexpected tensor.*model.extra.weight"),
    (lambda f: edit_config(f, model_type="gpt2"), r"model_type 'gpt2' is not one of"),
    (lambda f: edit_config(f, use_sliding_window=True), r"use_sliding_window=True is not supported"),
    (lambda f: edit_config(f, hidden_size="DELETE"), r"missing key 'hidden_size'"),
])
def test_broken_dream_folders_fail_clearly(tiny_folders, tmp_path, how, message):
    broken = break_folder(tiny_folders["dream"], tmp_path, how)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_pretrained(broken)


def test_missing_shard_and_missing_mask_token(tiny_folders, tmp_path):
    shards = sorted(tiny_folders["llada"].glob("model-*.safetensors"))
    assert len(shards) > 2
    broken = break_folder(tiny_folders["llada"], tmp_path, lambda f: (f / shards[1].name).unlink())
    with pytest.raises(FileNotFoundError, match=rf"{shards[1].name}: missing \(listed in"):
        load_pretrained(broken)

    def no_mask(folder):
        edit_config(folder, mask_token_id="DELETE")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (folder / name).unlink()

    broken = tmp_path / "nomask"
    shutil.copytree(tiny_folders["llada"], broken)
    no_mask(broken)
    with pytest.raises(ValueError, match="no mask token"):
        load_pretrained(broken)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_pretrained(tmp_path / "nowhere")


def index_naming(shard):
    """Replace the single safetensors file by an index that maps every tensor to ``shard``."""
    def how(folder):
        with safe_open(folder / "model.safetensors", framework="pt") as f:
            keys = list(f.keys())
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys(keys, shard)}))
    return how


def retyped(dtype):
    def how(folder):
        path = folder / "model.safetensors"
        with safe_open(path, framework="pt") as f:
            save_file({k: f.get_tensor(k).to(dtype) for k in f.keys()}, path)
    return how


def moved_out_and_indexed(folder):
    index_naming("../outside.safetensors")(folder)
    shutil.move(folder / "model.safetensors", folder.parent / "outside.safetensors")


def tokenizer_of(other):
    def how(folder):
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (other / name).exists():
                shutil.copy(other / name, folder / name)
    return how


def pickle_only(folder):
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not read")


HOSTILE_FOLDERS = [  # (how, message); the dream tiny folder: mask 97, EOS = pad 98, vocabulary 100
    (lambda f: edit_config(f, mask_token_id=96), r"mask_token_id 96 disagrees with the tokenizer's mask token "
                                                 r"'<\|mask\|>' \(id 97\)"),
    (lambda f: edit_config(f, mask_token_id="97"), r"mask_token_id must be an integer token id, got '97'"),
    (lambda f: edit_config(f, mask_token_id=97.0), r"mask_token_id must be an integer token id, got 97.0"),
    (lambda f: edit_config(f, mask_token_id=True), r"mask_token_id must be an integer token id, got True"),
    (lambda f: edit_config(f, mask_token_id=100), r"mask_token_id 100 lies outside the vocabulary \[0, 100\)"),
    (lambda f: edit_config(f, eos_token_id=97), r"eos_token_id 97 equals the mask token id"),
    (lambda f: edit_config(f, pad_token_id=97), r"pad_token_id 97 equals the mask token id"),
    (lambda f: edit_config(f, eos_token_id=[98, 5]), r"eos_token_id lists 2 ids \[98, 5\]: veridec stops at one id"),
    (lambda f: edit_config(f, eos_token_id="x"), r"eos_token_id must be an integer token id, got 'x'"),
    (lambda f: edit_config(f, pad_token_id=-1), r"pad_token_id -1 lies outside the vocabulary"),
    (lambda f: (f / "config.json").write_text("[]"), r"config.json: must hold a JSON object of settings, got list"),
    (lambda f: (f / "config.json").write_text("null"), r"config.json: must hold a JSON object .* got NoneType"),
    (lambda f: (f / "config.json").write_bytes(b"\xff\xfe"), r"config.json: not valid JSON"),
    (lambda f: (f / "tokenizer.json").write_text("{"), r"the tokenizer files .* cannot be read"),
    (pickle_only, r"pytorch_model.bin found: veridec never loads pickle files"),
    (retyped(torch.int32), r"has dtype torch.int32; weights must be one of torch.float16"),
    (retyped(torch.bool), r"has dtype torch.bool; weights must be one of"),
    (moved_out_and_indexed, r"shard '../outside.safetensors' lies outside the model folder"),
    (index_naming("/etc/passwd"), r"shard '/etc/passwd' lies outside the model folder"),
    (lambda f: (f / "model.safetensors.index.json").write_text("[1]"), r"no 'weight_map' object"),
    (lambda f: (f / "model.safetensors.index.json").write_text('{"weight_map": {"a": 1}}'),
     r"'weight_map' must map tensor names to shard file names"),
]


@pytest.mark.parametrize("how, message", HOSTILE_FOLDERS)
def test_hostile_model_folders_are_refused_naming_the_file_and_the_key(tiny_folders, tmp_path, how, message):
    """Every config value checked per key, the tokenizer held to the config, shards confined to the folder."""
    broken = break_folder(tiny_folders["dream"], tmp_path, how)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_pretrained(broken)


def test_a_sharded_hugging_face_cache_snapshot_loads(tiny_folders, tmp_path):
    """snapshots/<rev>/ holds links to ../../blobs/<sha> (how the hub caches a checkpoint): an index naming them
    loads, the same weights as the folder (once refused as links leading out)."""
    source = break_folder(tiny_folders["dream"], tmp_path / "plain", index_naming("model-00001-of-00001.safetensors"))
    shutil.move(source / "model.safetensors", source / "model-00001-of-00001.safetensors")
    snapshot, blobs = tmp_path / "hub" / "snapshots" / "abc123", tmp_path / "hub" / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for file in source.iterdir():
        shutil.copy(file, blobs / f"sha-{file.name}")
        (snapshot / file.name).symlink_to(Path("../..") / "blobs" / f"sha-{file.name}")
    linked, plain = load_pretrained(snapshot), load_pretrained(source)
    assert all(torch.equal(a, b) for a, b in zip(linked.state_dict().values(), plain.state_dict().values()))


def test_another_layouts_tokenizer_is_refused(tiny_folders, tmp_path):
    broken = break_folder(tiny_folders["dream"], tmp_path, tokenizer_of(tiny_folders["llada"]))
    with pytest.raises(ValueError, match=r"the tokenizer's mask token is '<\|mdm_mask\|>', a dream tokenizer's is "
                                         r"'<\|mask\|>' \(a tokenizer from another model\?\)"):
        load_pretrained(broken)


def test_a_one_element_id_list_is_that_id(tiny_folders, tmp_path):
    """Hugging Face configs may list one EOS id: it is that id (several ids are refused above)."""
    listed = load_pretrained(break_folder(tiny_folders["dream"], tmp_path, lambda f: edit_config(
        f, eos_token_id=[98], mask_token_id=[97])))
    assert (listed.special.eos_id, listed.special.mask_id) == (98, 97)


@pytest.mark.parametrize("vocab, message", [("64", r"vocab_size must be an integer >= 1, got '64'"),
                                            (10**6, r"vocab_size 1000000 exceeds embedding_size 100")])
def test_llada_checks_vocab_size_beside_embedding_size(tiny_folders, tmp_path, vocab, message):
    broken = break_folder(tiny_folders["llada"], tmp_path, lambda f: edit_config(f, vocab_size=vocab))
    with pytest.raises(ValueError, match=message):
        load_pretrained(broken)
