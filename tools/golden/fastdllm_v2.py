"""Golden traces of Fast-dLLM v2's published loops (spec/fastdllm_v2.md), replayed on every CI run by
tests/test_fastdllm_v2_golden.py.

Runs the checkpoint's own ``Fast_dLLM_QwenForCausalLM.generate`` (``modeling.py`` of
Efficient-Large-Model/Fast_dLLM_v2_7B) and ``batch_sample`` of NVlabs/Fast-dLLM's ``v2/generation_functions.py``
(blob 76fc22d, commits d259b48..8292f3c of NVlabs's history, identical in the forks Arya333/Fast-dLLM and
ydshi0/Fast-dLLM before their own additions) on the golden data's tiny Fast-dLLM v2 checkpoints, written by veridec
(``tools.golden.checkpoints``) and loaded by the published modelling itself (``Fast_dLLM_QwenForCausalLM
.from_pretrained``, float64): no stand-in, veridec's transformer runs nowhere on the official side. Per case:
settings, seed, prompt rows, the official outcome (the returned rows, or the exception and the official line that
raised it) and every model call, one letter and the width each (p: a forward that stores the keys and values, d: a
decode step's whole block, r: a block-cache refresh, c: a sub-block against the block cache). Also, per checkpoint,
the official logits of block-causal full forwards on fixed canvases (float64), for tests/test_fastdllm_v2_models.py.

    python -m tools.golden.fastdllm_v2 --official UPSTREAM --provenance provenance.json --out tests/golden/

``UPSTREAM`` holds ``modeling.py``, ``configuration.py`` and ``generation_functions.py`` as fetched (nothing
official is copied into this repository). The checkpoint's ``modeling.py`` is published on the model hub, which this
project cannot reach; its copies on GitHub all carry their authors' additions, so ``modeling.py`` here is
Satgoy152/DualDiffusion's FastDLLM_inferencing/Fast_dLLM_v2_7B/modeling.py at d3a3470 with ``generate`` as the
unmodified copies have it (no ``steps``, no caches passed in, ``past_key_values = None`` without a prefill,
``block_past_key_values = None`` at each block, ``return input_ids``); the rest of that file equals
Arya333/Fast-dLLM's v2/research/modeling.py at c5f1fad up to that repository's trace hooks. It needs transformers
4.53 (the checkpoint's ``transformers_version``), einops, torch and veridec.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import importlib.util
import json
import random
import sys
import time
import traceback
import types
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.models import load_pretrained

from .checkpoints import CHECKPOINT_DIR, TEXT_TOKENS, content_sha256
from .record import _quiet, _sha256

V2_FILE = "fastdllm_v2.json"
FORMAT = 1
SEED = 20261205
CHECKPOINTS = ("fastdllm-v2", "fastdllm-v2-tied")
OFFICIAL_FILES = ("modeling.py", "configuration.py", "generation_functions.py")
SHAPES = [(8, 4), (8, 8), (16, 4), (16, 8), (16, 16), (32, 8), (32, 16), (32, 4)]  # (block_size, small_block_size)
THRESHOLDS = [0.05, 0.3, 0.6, 0.9, 0.99, None]  # None: generate's default (1)
SAMPLING = [(0.0, 0.95), (0.0, 0.95), (0.7, 0.9), (1.0, 0.95), (1.3, 0.8)]  # (temperature, top_p)
FORWARD_CANVASES = [(37, 16)]  # (length, block size) of the official logits recorded per checkpoint


# ------------------------------------------------------------------------------------------------ cases
def cases(specials: dict, frequent: dict) -> list[dict]:
    """``generate`` over shapes x prompts shorter than, equal to and longer than a block (whole blocks included) x
    thresholds x sampling, a stop at EOS or at a token the model often proposes (``frequent``: per checkpoint);
    ``use_block_cache`` on a quarter; ``batch_sample`` on batches of 2 and 3 of equal and unequal lengths; then the
    published defects on purpose (V2.11)."""
    rng = random.Random(SEED)
    drawn = []
    for shape in SHAPES:
        for _ in range(26 if shape[0] < 32 else 12):
            drawn.append(_case(rng, specials, frequent, "generate", shape, rows=1))  # noqa: PERF401
    for _ in range(24):
        drawn.append(_case(rng, specials, frequent, "batch_sample", rng.choice(SHAPES[:5]), rows=rng.choice([2, 3]),
                           greedy=True))
    drawn += _defect_cases(rng, specials, frequent)
    return [dict(case, id=i) for i, case in enumerate(drawn)]


def _prompt_length(rng, block: int) -> int:
    return rng.choice([1, 3, block // 2 + 1, block - 1, block, block + 1, block + block // 2 + 1, 2 * block,
                       2 * block + 3])


def _case(rng, specials, frequent, loop, shape, rows, greedy=False, lengths=None, **fixed) -> dict:
    checkpoint = "fastdllm-v2-tied" if rng.random() < 0.25 else "fastdllm-v2"
    special = specials[checkpoint]
    banned = {special.mask_id, special.eos_id, special.eot_id, special.pad_id}
    block, small = shape
    lengths = lengths or [_prompt_length(rng, block) for _ in range(rows)]
    if loop == "generate":
        lengths = [lengths[0]] * rows  # generate takes rows of one length
    prompt = [[rng.choice([t for t in range(TEXT_TOKENS) if t not in banned]) for _ in range(n)] for n in lengths]
    temperature, top_p = (0.0, 0.95) if greedy else rng.choice(SAMPLING)
    settings = {"max_new_tokens": block * rng.choice([1, 2, 2, 3]), "block_size": block,
                "small_block_size": small, "temperature": temperature, "top_p": top_p,
                "stop_token": rng.choice([special.eos_id, frequent[checkpoint], frequent[checkpoint]]),
                "use_block_cache": rng.random() < 0.25}
    threshold = rng.choice(THRESHOLDS)
    if threshold is not None or loop == "batch_sample":
        settings["threshold"] = 0.9 if threshold is None else threshold
    settings.update(fixed)
    return {"checkpoint": checkpoint, "loop": loop, "settings": settings, "prompt": prompt,
            "seed": rng.randrange(2**31), "mask_id": special.mask_id, "pad_id": special.pad_id}


def _defect_cases(rng, specials, frequent) -> list[dict]:
    """V2.11 on purpose: prompts of exactly one block (both loops), a batch at temperature > 0 (both loops), a batch
    through ``generate`` at temperature 0 (its stop reads the first row holding the stop token), ``batch_sample``
    with a row whose prompt ends on a block boundary past the shortest prompt's block, and blocks of 64 (the decode
    steps' mask is built for blocks of 32)."""
    found = []
    for shape in [(8, 4), (16, 8), (32, 8)]:
        found += [_case(rng, specials, frequent, "generate", shape, 1, lengths=[shape[0]]) for _ in range(2)]
        found.append(_case(rng, specials, frequent, "batch_sample", shape, 2, greedy=True,
                           lengths=[shape[0], shape[0] + 3]))
    for loop in ("generate", "batch_sample"):
        found += [_case(rng, specials, frequent, loop, (8, 4), 2, temperature=0.7, top_p=0.9) for _ in range(2)]
    found += [_case(rng, specials, frequent, "generate", (8, 4), 2, greedy=True, lengths=[5, 5],
                    stop_token=frequent[name], threshold=0.3) for name in ("fastdllm-v2", "fastdllm-v2")]
    found += [_case(rng, specials, frequent, "batch_sample", (8, 4), 3, greedy=True, lengths=[5, 16, 20])
              for _ in range(3)]
    found += [_case(rng, specials, frequent, "generate", (64, 8), 1, greedy=True, lengths=[n], max_new_tokens=64,
                    use_block_cache=False) for n in (10, 40)]
    found += [_case(rng, specials, frequent, "batch_sample", (8, 4), 2, greedy=True, lengths=[5, 5], threshold=0.3,
                    use_block_cache=False, stop_token="boundary") for _ in range(4)]
    found += [_case(rng, specials, frequent, "batch_sample", (8, 4), 1, greedy=True, lengths=[n], threshold=0.05,
                    use_block_cache=False, stop_token="block 0", max_new_tokens=8) for n in (1, 3, 5, 7)]
    return found


def stop_in_block_zero(models: dict, case: dict) -> dict:
    """A case whose stop token every row generates inside block 0 (V2.11.9): the first token of the first row's
    generation (``batch_sample`` run without a stop) that every row's block 0 holds after its prompt."""
    model = models[case["checkpoint"]]
    probe = {**case, "settings": {**case["settings"], "stop_token": -1}}
    with _quiet(), torch.no_grad():
        rows = _call(model, probe, dict(probe["settings"]))
    block = case["settings"]["block_size"]
    made = [row[len(prompt):block] for row, prompt in zip(rows, case["prompt"])]
    shared = [token for token in made[0] if all(token in tokens for tokens in made[1:])]
    return {**case, "settings": {**case["settings"], "stop_token": shared[0] if shared else case["pad_id"]}}


def boundary_stop(models: dict, case: dict) -> dict:
    """A case whose stop token is its first row's first boundary token (V2.11.8): the token ``generate`` puts at
    the first block boundary after the prompt when nothing stops it, where no earlier generated token is it."""
    model = models[case["checkpoint"]]
    settings = {**case["settings"], "stop_token": -1}
    with _quiet(), torch.no_grad():
        out = model.generate(torch.tensor(case["prompt"][:1]), mask_id=case["mask_id"], **settings)[0].tolist()
    length, block = len(case["prompt"][0]), settings["block_size"]
    boundary = (length // block + 1) * block
    token = out[boundary]
    clean = token not in out[length:boundary]
    return {**case, "settings": {**case["settings"], "stop_token": token if clean else case["pad_id"]}}


# ------------------------------------------------------------------------------------------ official side
def load_official(root: Path):
    """The published modelling and generation functions, imported as a package from ``root`` (relative imports)."""
    name = "veridec_official_fastdllm_v2"
    package = types.ModuleType(name)
    package.__path__ = [str(root)]
    package.__spec__ = importlib.util.spec_from_loader(name, None, is_package=True)
    package.__spec__.submodule_search_locations = [str(root)]
    sys.modules[name] = package
    with _quiet():
        config = importlib.import_module(f"{name}.configuration").Fast_dLLM_QwenConfig
        model = importlib.import_module(f"{name}.modeling").Fast_dLLM_QwenForCausalLM
        functions = importlib.import_module(f"{name}.generation_functions").Fast_dLLM_QwenForCausalLM
    return config, model, functions


def load_official_model(official, folder: Path):
    config_class, model_class, functions = official
    config = config_class.from_pretrained(str(folder))
    with _quiet():
        model = model_class.from_pretrained(str(folder), config=config, torch_dtype=torch.float64).eval()
    model.batch_sample = types.MethodType(functions.batch_sample, model)
    return model


class Calls:
    """``model.forward`` wrapped (the loops call it directly, so hooks never fire): one letter and width a call."""

    def __init__(self, model):
        self.model, self.calls = model, []
        self.forward = model.forward
        model.forward = self.wrapped

    def wrapped(self, *args, **kwargs):
        width = kwargs["input_ids"].shape[1]
        kind = "p" if kwargs.get("update_past_key_values") else \
            ("c" if kwargs.get("block_past_key_values") is not None else "r") if kwargs.get("use_block_cache") else "d"
        self.calls.append(f"{kind}{width}")
        return self.forward(*args, **kwargs)

    def remove(self):
        del self.model.forward


def run_official(models: dict, case: dict) -> dict:
    model = models[case["checkpoint"]]
    calls = Calls(model)
    settings = dict(case["settings"])
    torch.manual_seed(case["seed"])
    try:
        with _quiet(), torch.no_grad():
            rows = _call(model, case, settings)
        result = {"status": "ok", "output": rows}
    except Exception as err:  # noqa: BLE001 - the official failure is the record
        frame = traceback.extract_tb(err.__traceback__)[-1]
        result = {"status": "raises", "error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  "where": f"{Path(frame.filename).name}:{frame.lineno}"}
    finally:
        calls.remove()
    return {**result, "calls": " ".join(calls.calls)}


def _call(model, case: dict, settings: dict) -> list:
    mask_id = case["mask_id"]
    if case["loop"] == "generate":
        out = model.generate(torch.tensor(case["prompt"]), mask_id=mask_id, **settings)
        return out.tolist()
    lengths = [len(row) for row in case["prompt"]]
    padded = [row + [mask_id] * (max(lengths) - len(row)) for row in case["prompt"]]  # v2/eval.py's padding
    tokenizer = types.SimpleNamespace(pad_token_id=case["pad_id"])
    block, new, small = settings.pop("block_size"), settings.pop("max_new_tokens"), settings.pop("small_block_size")
    out = model.batch_sample(torch.tensor(padded), tokenizer, block, new, small, min(lengths), torch.tensor(lengths),
                             mask_id=mask_id,
                             **settings)
    return [out[i].tolist() for i in range(len(lengths))]


def frequent_tokens(models: dict) -> dict:
    """Per checkpoint, the token the official model proposes most often at masked positions of random canvases:
    a stop token that ends decodes inside a block."""
    found = {}
    for name, model in models.items():
        generator = torch.Generator().manual_seed(5)
        x = torch.randint(0, TEXT_TOKENS, (8, 16), generator=generator)
        x[:, 8:] = model.config.mask_token_id
        with torch.no_grad():
            winners = model(input_ids=x, block_size=8).logits[:, 7:-1].argmax(-1).flatten()
        found[name] = int(torch.bincount(winners).argmax())
    return found


def forward_logits(models: dict, ours: dict) -> dict:
    """Per checkpoint: fixed canvases, the official raw logits of a block-causal full forward (float64, base64;
    position j scores token j + 1) and their largest difference from veridec's at recording."""
    found = {}
    for name, model in models.items():
        generator = torch.Generator().manual_seed(7)
        entries = []
        for length, block in FORWARD_CANVASES:
            x = torch.randint(0, TEXT_TOKENS, (1, length), generator=generator)
            x[0, torch.rand(length, generator=generator) < 0.4] = ours[name].special.mask_id
            with torch.no_grad():
                theirs = model(input_ids=x, block_size=block).logits[0]  # [L, V]
                mine = ours[name](x, block_size=block).logits[0, 1:]  # token-aligned: token j + 1 from query j
            entries.append({"tokens": x[0].tolist(), "block_size": block,
                            "logits": base64.b64encode(theirs.double().contiguous().numpy().tobytes()).decode(),
                            "max_difference_at_record": float((mine - theirs[:-1]).abs().max())})
        found[name] = entries
    return found


# ------------------------------------------------------------------------------------------------ record
def load_weights(folder: Path):
    """veridec's load of a checkpoint without its tokenizer files (transformers 4.53 cannot read the
    tokenizer_config.json that transformers 5 writes), the end-of-turn id read from tokenizer.json itself."""
    import dataclasses
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for name in ("config.json", "model.safetensors"):
            shutil.copy(folder / name, Path(scratch) / name)
        model = load_pretrained(scratch)
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    model.special = dataclasses.replace(model.special, eot_id=vocab["<|im_end|>"])
    return model


def record(root: Path, out: Path, provenance: dict, log=print) -> dict:
    official = load_official(root)
    folder = out / CHECKPOINT_DIR
    ours = {name: load_weights(folder / name) for name in CHECKPOINTS}
    models = {name: load_official_model(official, folder / name) for name in CHECKPOINTS}
    recorded = []
    started = time.time()
    for case in cases({name: model.special for name, model in ours.items()}, frequent_tokens(models)):
        if case["settings"]["stop_token"] in STOP_PROBES:
            case = STOP_PROBES[case["settings"]["stop_token"]](models, case)  # noqa: PLW2901
        result = run_official(models, case)
        recorded.append({**case, "official": result})
        log(f"case {case['id']}: {result['status']} {result.get('error', '')} ({len(result['calls'].split())} calls)")
    import transformers

    log(f"{len(recorded)} cases in {time.time() - started:.0f} s")
    return {"format": FORMAT, "recorded": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "transformers": transformers.__version__,
            "files": {name: {**provenance.get(name, {}), "sha256": _sha256(root / name)} for name in OFFICIAL_FILES},
            "checkpoints": {name: {"committed": True, "content_sha256": content_sha256(folder / name),
                                   "special": ours[name].special.__dict__} for name in CHECKPOINTS},
            "forward": forward_logits(models, ours), "cases": recorded}


STOP_PROBES = {"boundary": boundary_stop, "block 0": stop_in_block_zero}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", type=Path, required=True,
                        help="folder with modeling.py, configuration.py and generation_functions.py (see above)")
    parser.add_argument("--provenance", type=Path, default=None,
                        help="JSON: {file: {repository, commit, ...}} recorded beside each file's sha256")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"), help="where fastdllm_v2.json goes")
    parser.add_argument("--write-checkpoints", action="store_true",
                        help="(re)write the Fast-dLLM v2 checkpoints under OUT/checkpoints first")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    if args.write_checkpoints:
        from .checkpoints import write_checkpoint

        for name in CHECKPOINTS:
            write_checkpoint(name, args.out / CHECKPOINT_DIR / name)
    provenance = json.loads(args.provenance.read_text()) if args.provenance else {}
    golden = record(args.official, args.out, provenance)
    write_text_atomic(args.out / V2_FILE, json.dumps(golden, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
