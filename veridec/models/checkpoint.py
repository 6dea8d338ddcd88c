"""Load and save checkpoints in the official LLaDA / Dream folder layouts (config.json, safetensors, tokenizer).

No trust_remote_code and no pickles: config.json is read as JSON, tensors come from safetensors, the tokenizer
through ``AutoTokenizer`` from the folder's own files. Every missing or mismatched piece is an error that
names the file and the tensor.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..checks import is_integer
from .interface import SpecialTokens
from .layouts import LAYOUTS, Layout, layout_for
from .transformer import BidirectionalTransformer

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
WEIGHT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def load_pretrained(folder: str | Path, dtype: torch.dtype | None = None,
                    device: str | torch.device = "cpu") -> BidirectionalTransformer:
    """Build the model a local folder describes; its tokenizer (if any) is attached as ``model.tokenizer``."""
    folder = Path(folder)
    config = _read_config(folder)
    layout = layout_for(config, str(folder / "config.json"))
    try:
        cfg = layout.to_config(config)
    except (TypeError, ValueError) as err:  # a value of the wrong type or out of range
        raise ValueError(f"{folder / 'config.json'}: {err}") from err
    tokenizer = _load_tokenizer(folder)
    if tokenizer is not None and len(tokenizer) > cfg.vocab_size:
        raise ValueError(f"{folder / 'tokenizer.json'}: the tokenizer has {len(tokenizer)} tokens, more than the "
                         f"model's vocabulary of {cfg.vocab_size} (config.json): its last ids have no embedding")
    special = _special_tokens(config, tokenizer, layout, folder, cfg.vocab_size)
    with torch.device("meta"):
        model = BidirectionalTransformer(cfg, special, layout.name, layout.logit_shift)
    state = _read_tensors(folder, layout.tensor_names(cfg), model.state_dict(), dtype, device)
    model.load_state_dict(state, assign=True)
    model.tokenizer = tokenizer
    return model.eval()


def save_pretrained(model: BidirectionalTransformer, folder: str | Path, max_shard_bytes: int | None = None) -> Path:
    """Write config.json, safetensors (sharded with an index when ``max_shard_bytes`` is exceeded), tokenizer."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    layout = LAYOUTS[model.layout]
    (folder / "config.json").write_text(json.dumps(layout.from_config(model.cfg, model.special), indent=2))
    state = model.state_dict()
    tensors = {official: state[internal].detach().contiguous().cpu()
               for internal, official in layout.tensor_names(model.cfg).items()}
    shards = _split_shards(tensors, max_shard_bytes)
    if len(shards) == 1:
        save_file(shards[0], folder / SINGLE_FILE, metadata={"format": "pt"})
    else:
        weight_map = {}
        for n, shard in enumerate(shards, start=1):
            name = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, folder / name, metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, name))
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / INDEX_FILE).write_text(json.dumps(index, indent=2))
    if model.layout == "dream":  # Dream's own DreamModel.from_pretrained (modeling_dream.py) requires this file
        ids = model.special
        generation = {"bos_token_id": ids.eos_id, "eos_token_id": ids.eos_id, "pad_token_id": ids.pad_id,
                      "mask_token_id": ids.mask_id}
        (folder / "generation_config.json").write_text(json.dumps(generation, indent=2))
    if model.tokenizer is not None:
        _save_tokenizer(model.tokenizer, folder)
    return folder


def _save_tokenizer(tokenizer, folder: Path) -> None:
    """Save tokenizer files under the class name every transformers version (4.x and 5.x) can load."""
    tokenizer.save_pretrained(folder)
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2))


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (a model folder needs config.json)")
    config = _read_json(path)
    if not isinstance(config, dict):
        raise ValueError(f"{path}: must hold a JSON object of settings, got {type(config).__name__}")
    return config


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err


def _load_tokenizer(folder: Path):
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer, PretrainedConfig

    # An empty config keeps AutoTokenizer from re-reading config.json (whose model_type it does not know).
    try:
        return AutoTokenizer.from_pretrained(str(folder), config=PretrainedConfig(), trust_remote_code=False,
                                             local_files_only=True)
    except Exception as err:  # transformers and tokenizers raise many types (JSON, OSError, their own)
        raise ValueError(f"{folder}: the tokenizer files ({', '.join(TOKENIZER_FILES)}) cannot be read "
                         f"({type(err).__name__}: {err})") from err


def _token_id(config: dict, key: str, vocab_size: int, source: Path) -> int | None:
    """config[key] as one token id in [0, vocab_size) (a one-element list is that id), None when absent; an
    error naming the file and the key otherwise (a float, a string, a boolean, several ids)."""
    value = config.get(key)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None:
        return None
    if isinstance(value, list):
        raise ValueError(f"{source}: {key} lists {len(value)} ids {value[:4]}: veridec stops at one id per "
                         "role; give one integer")
    if not is_integer(value):
        raise ValueError(f"{source}: {key} must be an integer token id, got {value!r}")
    if not 0 <= value < vocab_size:
        raise ValueError(f"{source}: {key} {value} lies outside the vocabulary [0, {vocab_size})")
    return value


def _special_tokens(config: dict, tokenizer, layout: Layout, folder: Path, vocab_size: int) -> SpecialTokens:
    """Mask/EOS/pad ids from config.json (tokenizer as fallback), each checked; end-of-turn from the tokenizer."""
    source = folder / "config.json"
    mask_id = _token_id(config, "mask_token_id", vocab_size, source)
    tokenizer_mask = None if tokenizer is None else tokenizer.mask_token_id
    if mask_id is None:
        mask_id = tokenizer_mask
    if mask_id is None and tokenizer is not None and layout.mask_token in tokenizer.get_vocab():
        mask_id = tokenizer.convert_tokens_to_ids(layout.mask_token)  # Fast-dLLM v2: an additional special token
    if mask_id is None:
        raise ValueError(f"{source}: no mask token (mask_token_id is missing and the tokenizer has none)")
    if tokenizer_mask is not None and tokenizer.mask_token != layout.mask_token:
        raise ValueError(f"{folder / 'tokenizer.json'}: the tokenizer's mask token is {tokenizer.mask_token!r}, a "
                         f"{layout.name} tokenizer's is {layout.mask_token!r} (a tokenizer from another model?)")
    if tokenizer_mask is not None and tokenizer_mask != mask_id:
        raise ValueError(f"{source}: mask_token_id {mask_id} disagrees with the tokenizer's mask token "
                         f"{tokenizer.mask_token!r} (id {tokenizer_mask}): the prompt's mask text would never be "
                         "infilled (a tokenizer from another model?)")
    eos_id = _token_id(config, "eos_token_id", vocab_size, source)
    if eos_id is None and tokenizer is not None:
        eos_id = tokenizer.eos_token_id
    pad_id = _token_id(config, "pad_token_id", vocab_size, source)
    for name, token in (("eos_token_id", eos_id), ("pad_token_id", pad_id)):
        if token == mask_id:
            raise ValueError(f"{source}: {name} {token} equals the mask token id: a committed token would read as "
                             "still masked")
    _agree_with_tokenizer(tokenizer, folder, (("eos_token_id", eos_id, "EOS", "eos_token"),
                                              ("pad_token_id", pad_id, "pad", "pad_token")))
    eot_id = None
    if tokenizer is not None and layout.eot_token in tokenizer.get_vocab():
        eot_id = tokenizer.convert_tokens_to_ids(layout.eot_token)
    if eot_id is not None and not 0 <= eot_id < vocab_size:  # the tokenizer may be larger than the embedding
        raise ValueError(f"{folder / 'tokenizer.json'}: the end-of-turn token id {eot_id} lies outside the "
                         f"vocabulary [0, {vocab_size})")
    return SpecialTokens(mask_id=mask_id, eos_id=eos_id, eot_id=eot_id, pad_id=pad_id)


def _agree_with_tokenizer(tokenizer, folder: Path, roles) -> None:
    """Each id config.json names (EOS, pad) should be the tokenizer's token for that role, when it has one;
    where not, a warning says which one decoding uses (config.json's). Not an error: official releases ship
    such pairs (a chat tokenizer's end-of-turn as its EOS beside the config's end-of-text)."""
    if tokenizer is None:
        return
    for key, configured, role, attribute in roles:
        token = getattr(tokenizer, attribute)
        own = None if token is None else getattr(tokenizer, f"{attribute}_id")
        if configured is not None and own is not None and own != configured:
            warnings.warn(f"{folder / 'config.json'}: {key} {configured} differs from the tokenizer's {role} token "
                          f"{token!r} (id {own}, {folder / 'tokenizer_config.json'}); decoding uses config.json's "
                          f"{configured} (a tokenizer from another model?)", stacklevel=2)


def _tensor_files(folder: Path) -> dict[str, Path]:
    """Official tensor name -> the safetensors file that must hold it (None-keyed for a single file)."""
    index = folder / INDEX_FILE
    if index.is_file():
        weight_map = _weight_map(index)
        for name in sorted(set(weight_map.values())):
            _check_inside(folder, name, index)
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / name}: missing (listed in {INDEX_FILE})")
        return {tensor: folder / name for tensor, name in weight_map.items()}
    single = folder / SINGLE_FILE
    if not single.is_file():
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
        hint = (f" ({', '.join(pickles[:3])} found: veridec never loads pickle files, which can run code when "
                "read; convert them to safetensors)") if pickles else ""
        raise FileNotFoundError(f"{folder}: no {SINGLE_FILE} and no {INDEX_FILE}{hint}")
    return dict.fromkeys(_open_safetensors(single).keys(), single)


def _weight_map(index: Path) -> dict[str, str]:
    """The index's tensor -> shard file name table, checked to be a JSON object of strings."""
    content = _read_json(index)
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not weight_map or not isinstance(weight_map, dict):
        raise ValueError(f"{index}: no 'weight_map' object (tensor name -> shard file)")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise ValueError(f"{index}: 'weight_map' must map tensor names to shard file names (strings)")
    return weight_map


def _check_inside(folder: Path, name: str, index: Path) -> None:
    """A shard the index names must be a file name of the folder itself: no path, no '..'. A link in the folder
    is the folder's own content and is followed, as for a single file (a Hugging Face cache snapshot is made of
    links to ../../blobs)."""
    if Path(name).name != name or name in (".", ".."):
        raise ValueError(f"{index}: shard {name!r} lies outside the model folder {folder} (an index may only "
                         "name files in its own folder)")


def _open_safetensors(path: Path):
    """A safetensors file opened for reading; a truncated or corrupt one is a ValueError naming it."""
    try:
        return safe_open(path, framework="pt", device="cpu")
    except Exception as err:  # safetensors raises its own SafetensorError, or OSError
        raise ValueError(f"{path}: not a readable safetensors file ({err})") from err


def _read_tensors(folder: Path, names: dict[str, str], expected: dict[str, torch.Tensor], dtype, device):
    files = _tensor_files(folder)
    missing = [official for official in names.values() if official not in files]
    if missing:
        raise ValueError(f"{folder}: missing tensor(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    unexpected = sorted(set(files) - set(names.values()))
    if unexpected:
        raise ValueError(f"{folder}: unexpected tensor(s) {unexpected[:5]} (not part of this model's layout)")
    state = {}
    handles = {path: _open_safetensors(path) for path in set(files.values())}
    for internal, official in names.items():
        try:
            tensor = handles[files[official]].get_tensor(official)
        except Exception as err:  # the header lists it but the data is truncated or corrupt
            raise ValueError(f"{files[official]}: tensor {official} cannot be read ({err})") from err
        if tensor.dtype not in WEIGHT_DTYPES:
            raise ValueError(f"{files[official]}: tensor {official} has dtype {tensor.dtype}; weights must be one "
                             f"of {', '.join(str(d) for d in WEIGHT_DTYPES)}")
        want = tuple(expected[internal].shape)
        if tuple(tensor.shape) != want:
            raise ValueError(f"{files[official]}: tensor {official} has shape {tuple(tensor.shape)}, config "
                             f"implies {want}")
        state[internal] = tensor.to(device=device, dtype=dtype or tensor.dtype)
    if dtype is None:
        _check_one_dtype({official: state[internal].dtype for internal, official in names.items()}, files)
    return state


def _check_one_dtype(dtypes: dict[str, torch.dtype], files: dict[str, Path]) -> None:
    """Loaded as stored, every tensor must have one dtype (a model runs at one); the first tensor off the most
    common dtype is named."""
    counts = Counter(dtypes.values())
    if len(counts) == 1:
        return
    common = counts.most_common(1)[0][0]
    odd = next(name for name, kind in dtypes.items() if kind != common)
    raise ValueError(f"{files[odd]}: tensor {odd} has dtype {dtypes[odd]}, the other {counts[common]} of "
                     f"{len(dtypes)} tensors {common}: a model runs at one dtype; convert the checkpoint to one, or "
                     "load it at one (load_pretrained(dtype=...), --dtype where the command takes it)")


def _split_shards(tensors: dict[str, torch.Tensor], max_shard_bytes: int | None) -> list[dict[str, torch.Tensor]]:
    if max_shard_bytes is None:
        return [tensors]
    shards, size = [{}], 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards
