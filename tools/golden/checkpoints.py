"""The golden data's tiny checkpoints: how each is built (bit-reproducibly from a seed), written in its official
layout, hashed by content, and loaded back with veridec's loader (spec SQ1.8, SQ2.6, FD4, FD8)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from veridec.models import SpecialTokens, load_pretrained, random_model, save_pretrained
from veridec.models.tokenizer import DEFAULT_ALPHABET, LAYOUT_SPECIALS

GOLDEN_FILE = "golden.json"
CHECKPOINT_DIR = "checkpoints"

# ------------------------------------------------------------------------------------------ checkpoints
SMALL = {"hidden_size": 16, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 32}
BIG = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 16}
LLADA_8B_IDS = SpecialTokens(mask_id=126336, eos_id=126081, eot_id=126348, pad_id=126081)  # hard-coded upstream
LLADA_8B_VOCAB = 126464
TEXT_TOKENS = len(DEFAULT_ALPHABET)  # ids below are characters in every tiny tokenizer


@dataclass(frozen=True)
class CheckpointSpec:
    """A tiny checkpoint: ``random_model(layout, seed, float64, **sizes)`` with its LM head scaled by
    ``logit_scale`` (confidences spread over (0, 1), so thresholds and factors decide something), the mask
    token's head row multiplied by ``mask_row_scale``: 0 gives the mask logit 0, never the argmax (a trained
    model never proposes the mask token); the ``llada-proposes-mask`` checkpoint scales it by 1.8 instead, so
    that about 7% of masked positions propose the mask token at temperature 0 (what makes the upstream loops
    fail); and for the 126464-token model the official LLaDA-8B ids, with the EOS and EoT head rows swapped
    with those of the two tokens that most often win at masked positions (``eos_eot_swap``), so that masked
    positions propose EOS and EoT and the EOS flags change something."""

    layout: str
    seed: int
    sizes: dict = field(default_factory=lambda: dict(SMALL))
    logit_scale: float = 4.0
    mask_row_scale: float = 0.0
    vocab_size: int | None = None
    official_ids: bool = False
    eos_eot_swap: bool = False
    committed: bool = True  # False: written bit-reproducibly at test time (too big to commit)


CHECKPOINTS = {
    "llada": CheckpointSpec("llada", 101),
    "llada-proposes-mask": CheckpointSpec("llada", 102, mask_row_scale=1.8),
    "dream": CheckpointSpec("dream", 103),
    "llada-126k": CheckpointSpec("llada", 104, dict(BIG), logit_scale=2.0, vocab_size=LLADA_8B_VOCAB,
                                 official_ids=True, eos_eot_swap=True, committed=False),
    "sdar": CheckpointSpec("sdar", 105),  # head_dim 16 apart from hidden / heads = 8, grouped K/V, q/k norms
    "sdar-tied": CheckpointSpec("sdar", 106, {**SMALL, "tie_embeddings": True}, logit_scale=2.0,
                                mask_row_scale=1.0),  # the tied head proposes the mask token (spec BD7.4)
    "fastdllm-v2": CheckpointSpec("fastdllm_v2", 107),  # Qwen2 names, q/k/v biases, grouped K/V (spec V2.1)
    "fastdllm-v2-tied": CheckpointSpec("fastdllm_v2", 108, {**SMALL, "tie_embeddings": True}, logit_scale=3.0),
}


def official_id_tokenizer():
    """A character tokenizer whose mask / EOS / EoT sit at LLaDA-8B's ids (126336 / 126081 / 126348), so the
    loader reads EoT = 126348; the ids in between are unused (a sparse vocabulary loads in milliseconds, a
    dense 126464-token one in seconds)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    mask, eos, eot = LAYOUT_SPECIALS["llada"]
    vocab = {c: i for i, c in enumerate(DEFAULT_ALPHABET)}
    vocab.update({mask: LLADA_8B_IDS.mask_id, eos: LLADA_8B_IDS.eos_id, eot: LLADA_8B_IDS.eot_id})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=eos))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=backend, mask_token=mask, eos_token=eos, pad_token=eos,
                                   additional_special_tokens=[eot], padding_side="left")


def build_model(name: str):
    """The checkpoint's model, bit-reproducibly from its seed (torch's CPU generator, float64)."""
    spec = CHECKPOINTS[name]
    model = random_model(spec.layout, spec.seed, torch.float64, vocab_size=spec.vocab_size, **spec.sizes)
    if spec.official_ids:
        model.special = LLADA_8B_IDS
        model.tokenizer = official_id_tokenizer()
    with torch.no_grad():
        head = model.embed.weight if model.lm_head is None else model.lm_head.weight  # [V, hidden] (tied: both)
        head.mul_(spec.logit_scale)
        head[model.special.mask_id] *= spec.mask_row_scale
        if spec.eos_eot_swap:
            generator = torch.Generator().manual_seed(spec.seed)
            x = torch.randint(0, TEXT_TOKENS, (8, 10), generator=generator, device=generator.device)
            x[:, 4:] = model.special.mask_id
            winners = torch.bincount(model(x).logits[:, 4:].argmax(-1).flatten(), minlength=head.shape[0])
            for special_id, token in zip((model.special.eos_id, model.special.eot_id), winners.topk(2).indices):
                head[[special_id, int(token)]] = head[[int(token), special_id]].clone()
    return model


def write_checkpoint(name: str, folder: str | Path) -> Path:
    """Write checkpoint ``name`` in its official layout with veridec's writer (``save_pretrained``)."""
    return save_pretrained(build_model(name), folder)


def content_sha256(folder: str | Path) -> str:
    """sha256 over what decoding depends on: config.json (canonical JSON) and every tensor (name, dtype,
    shape, bytes, sorted by name). Independent of safetensors' file layout."""
    from safetensors import safe_open

    folder = Path(folder)
    digest = hashlib.sha256()
    digest.update(json.dumps(json.loads((folder / "config.json").read_text()), sort_keys=True).encode())
    tensors = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, framework="pt") as f:
            for key in f.keys():  # noqa: SIM118 -- safe_open is not iterable
                tensors[key] = f.get_tensor(key)
    for key in sorted(tensors):
        t = tensors[key].contiguous()
        digest.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def load_checkpoints(golden: dict, root: str | Path, scratch: str | Path) -> dict:
    """veridec's loader on every checkpoint of ``golden``: committed ones from ``root/checkpoints``, the others
    written into ``scratch`` first. Raises if a content hash differs from the recorded one."""
    models = {}
    for name, info in golden["checkpoints"].items():
        folder = Path(root) / CHECKPOINT_DIR / name if info["committed"] else \
            write_checkpoint(name, Path(scratch) / name)
        found = content_sha256(folder)
        if found != info["content_sha256"]:
            raise ValueError(f"checkpoint {name}: content sha256 {found} != recorded {info['content_sha256']}")
        model = load_pretrained(folder)
        if asdict(model.special) != info["special"]:
            raise ValueError(f"checkpoint {name}: special ids {model.special} != recorded {info['special']}")
        models[name] = model
    return models
