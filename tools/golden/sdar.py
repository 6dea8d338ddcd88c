"""Golden traces of the official block-diffusion decoders (spec/block_diffusion.md), replayed on every CI run by
tests/test_block_diffusion_golden.py.

Runs ``block_diffusion_generate`` of Gen-Verse/dLLM-RL (``generate.py``, with its SDAR modelling
``models/sdar/modeling_sdar.py``) and of JetAstra/SDAR (``generate.py``, with the SDAR modelling of its
``training/model/SDAR-4B-Chat/``, the only one that repository holds) on the golden data's tiny SDAR checkpoints,
written by veridec (``tools.golden.checkpoints``). Per case: settings, seed, prompt, the official outcome (the
returned canvas, or the exception and the official line that raised it) and every model call (its first
position, width, ``store_kv`` and the tokens fed). Also, per checkpoint and modelling, the official logits of a
block-causal full forward on fixed canvases (float64), for tests/test_block_models.py.

    python -m tools.golden.sdar --official UPSTREAM --provenance provenance.json --out tests/golden/

``UPSTREAM`` holds ``dllm_rl/generate.py``, ``dllm_rl/models/sdar/{__init__,configuration_sdar,modeling_sdar}.py``,
``jetastra/generate.py`` and ``jetastra/model_4b/{configuration_sdar,modeling_sdar}.py`` as fetched (nothing
official is copied into this repository). It needs transformers 4.53 (4.54 removed ``LossKwargs``, which both
modelling files import), einops, torch and veridec. flash-attn is not needed: the modelling files import its
fused RMSNorm and its attention function, and ``_install_stand_ins`` provides both in plain PyTorch with the
same math (flash-attn's RMSNorm in at least float32, then cast back; attention as scaled dot product with grouped
K/V heads).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import importlib.machinery
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
from veridec.models.transformer import block_causal_bias

from .checkpoints import CHECKPOINT_DIR, TEXT_TOKENS, content_sha256
from .record import _quiet, _sha256

SDAR_FILE = "sdar.json"
FORMAT = 1
SEED = 20261203
CHECKPOINTS = ("sdar", "sdar-tied")
VARIANTS = {"dllm_rl": ("dllm_rl/generate.py", "dllm_rl/models/sdar"),
            "jetastra": ("jetastra/generate.py", "jetastra/model_4b")}
STRATEGIES = ("sequential", "low_confidence_static", "low_confidence_dynamic")
SPLITS = [(4, 4), (4, 2), (8, 8), (8, 3), (2, 1), (4, 6), (8, 4)]  # (block_length, denoising_steps)
SAMPLING = [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 0, 1.0), (1.0, 3, 1.0), (1.0, 1, 1.0), (1.0, 0, 0.9),
            (0.8, 5, 0.6)]  # (temperature, top_k, top_p)
FORWARD_CANVASES = [(12, 4), (16, 8), (9, 3)]  # (length, block size) of the logits recorded per checkpoint


# ------------------------------------------------------------------------------------------------ cases
def cases(specials: dict) -> list[dict]:
    """Both published files: every strategy x split (five draws each over checkpoints, sampling, prompts, lengths,
    thresholds and stop ids), then the published defects on purpose: temperature 0, ``entropy_bounded``,
    JetAstra's file on dLLM-RL's modelling, a batch of two."""
    rng = random.Random(SEED)
    drawn = []
    for generate in VARIANTS:
        for strategy in STRATEGIES:
            for split in SPLITS:
                drawn += [_case(rng, specials, generate, strategy, split, rng.choice(SAMPLING)) for _ in range(5)]
    for generate in VARIANTS:
        drawn += [_case(rng, specials, generate, rng.choice(STRATEGIES), rng.choice(SPLITS), (0.0, 0, 1.0))
                  for _ in range(4)]
        drawn += [_case(rng, specials, generate, "entropy_bounded", rng.choice(SPLITS), rng.choice(SAMPLING),
                        eb_threshold=rng.choice([0.35, 1.0, 5.0])) for _ in range(3)]
    drawn += [dict(_case(rng, specials, "jetastra", rng.choice(STRATEGIES), rng.choice(SPLITS),
                         rng.choice(SAMPLING)), modelling="dllm_rl") for _ in range(3)]
    drawn += [_case(rng, specials, "dllm_rl", rng.choice(STRATEGIES), rng.choice(SPLITS), rng.choice(SAMPLING),
                    rows=2) for _ in range(3)]
    return [dict(case, id=i) for i, case in enumerate(drawn)]


def _case(rng, specials, generate, strategy, split, sampling, eb_threshold=None, rows=1) -> dict:
    checkpoint = "sdar-tied" if rng.random() < 0.2 else "sdar"
    special = specials[checkpoint]
    banned = {special.mask_id, special.eos_id, special.eot_id, special.pad_id}
    length = rng.choice([1, 2, 3, 4, 5, 8, 9])
    prompt = [[rng.choice([t for t in range(TEXT_TOKENS) if t not in banned]) for _ in range(length)]
              for _ in range(rows)]
    stops = rng.choice([None, None, [special.eos_id], [rng.randrange(TEXT_TOKENS)]])
    settings = {"gen_length": rng.randint(1, 12), "block_length": split[0], "denoising_steps": split[1],
                "temperature": sampling[0], "top_k": sampling[1], "top_p": sampling[2],
                "remasking_strategy": strategy, "confidence_threshold": rng.choice([0.85, 0.5, 0.3]),
                "stopping_criteria_idx": stops}
    if generate == "jetastra":
        settings["eb_threshold"] = eb_threshold
    return {"checkpoint": checkpoint, "generate": generate, "modelling": generate, "settings": settings,
            "prompt": prompt, "seed": rng.randrange(2**31), "mask_id": special.mask_id}


# ------------------------------------------------------------------------------------------ official side
def _install_stand_ins() -> None:
    """flash-attn's fused RMSNorm and attention function as plain PyTorch (the modelling files import them),
    and a stub for JetAstra's training-only loss module (it imports triton)."""
    flash = types.ModuleType("flash_attn")

    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **unused):
        """q [B, Lq, H, D], k, v [B, Lk, Hkv, D] -> [B, Lq, H, D]; causal aligned to the bottom right."""
        groups = q.shape[2] // k.shape[2]
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(groups, 1), \
            v.transpose(1, 2).repeat_interleave(groups, 1)
        mask = None
        if causal:
            lq, lk = q.shape[1], k.shape[1]
            mask = torch.arange(lk)[None] <= torch.arange(lq)[:, None] + (lk - lq)
        out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=softmax_scale)
        return out.transpose(1, 2)

    def rms_norm_fn(x, weight, bias, eps=1e-6, **unused):
        """In float32 at least (flash-attn's kernel: half precisions in float32; it takes no float64, which
        stays float64 here)."""
        dtype = torch.promote_types(x.dtype, torch.float32)
        y = x.to(dtype) * torch.rsqrt(x.to(dtype).square().mean(-1, keepdim=True) + eps) * weight.to(dtype)
        return (y if bias is None else y + bias.to(dtype)).to(x.dtype)

    flash.flash_attn_func = flash_attn_func
    flash.__path__ = []
    modules = {"flash_attn": flash, "flash_attn.bert_padding": types.ModuleType("flash_attn.bert_padding"),
               "flash_attn.ops": types.ModuleType("flash_attn.ops"),
               "flash_attn.ops.triton": types.ModuleType("flash_attn.ops.triton"),
               "flash_attn.ops.triton.layer_norm": types.ModuleType("flash_attn.ops.triton.layer_norm")}
    for name in ("index_first_axis", "pad_input", "unpad_input"):
        setattr(modules["flash_attn.bert_padding"], name, None)
    modules["flash_attn.ops.triton.layer_norm"].rms_norm_fn = rms_norm_fn
    for name, module in modules.items():
        module.__path__ = []
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        sys.modules.setdefault(name, module)


def load_official(root: Path) -> dict:
    """Each variant's (generate module, SDARConfig, SDARForCausalLM), imported as packages from ``root``."""
    from .record import _load_file, _package

    _install_stand_ins()
    found = {}
    for variant, (generate, modelling) in VARIANTS.items():
        package = _package(f"veridec_official_sdar_{variant}", root / modelling)
        stub = types.ModuleType(f"{package.__name__}.fused_linear_diffusion_cross_entropy")
        stub.FusedLinearDiffusionCrossEntropyLoss = None  # JetAstra's training loss (triton); never used here
        sys.modules.setdefault(stub.__name__, stub)
        with _quiet():
            config = importlib.import_module(f"{package.__name__}.configuration_sdar").SDARConfig
            model = importlib.import_module(f"{package.__name__}.modeling_sdar").SDARForCausalLM
        found[variant] = (_load_file(f"veridec_official_sdar_generate_{variant}", root / generate), config, model)
    return found


def load_official_model(official: dict, variant: str, folder: Path):
    _, config_class, model_class = official[variant]
    config = config_class.from_pretrained(str(folder))
    with _quiet():
        return model_class.from_pretrained(str(folder), config=config, torch_dtype=torch.float64).eval()


class Calls:
    """A forward pre-hook on the official model: [first position, width, store_kv, tokens] of every call."""

    def __init__(self, model):
        self.calls = []
        self.handle = model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        x = args[0] if args else kwargs["input_ids"]
        start = int(kwargs["position_ids"][0, 0])
        self.calls.append([start, x.shape[1], bool(kwargs.get("store_kv")), x[0].tolist()])


def run_official(official: dict, models: dict, case: dict) -> dict:
    generate = official[case["generate"]][0]
    model = models[(case["checkpoint"], case["modelling"])]
    calls = Calls(model)
    settings = dict(case["settings"])
    torch.manual_seed(case["seed"])
    try:
        with _quiet(), torch.no_grad():
            out = generate.block_diffusion_generate(model, {"input_ids": torch.tensor(case["prompt"])},
                                                    case["mask_id"], **settings)
        result = {"status": "ok", "output": out[0].tolist()}
    except Exception as err:  # noqa: BLE001 - the official failure is the record
        frame = traceback.extract_tb(err.__traceback__)[-1]
        result = {"status": "raises", "error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  "where": f"{Path(frame.filename).name}:{frame.lineno}"}
    finally:
        calls.handle.remove()
    return {**result, "calls": calls.calls}


def forward_logits(models: dict, ours: dict) -> dict:
    """Per checkpoint and modelling: fixed canvases, the official logits of a block-causal full forward
    (float64, base64) and the largest difference from veridec's."""
    found = {}
    for (checkpoint, variant), model in models.items():
        generator = torch.Generator().manual_seed(7)
        entries = []
        for length, block in FORWARD_CANVASES:
            x = torch.randint(0, TEXT_TOKENS, (1, length), generator=generator)
            x[0, torch.rand(length, generator=generator) < 0.4] = ours[checkpoint].special.mask_id
            visible = (block_causal_bias(length, block) == 0).double()[None, None]  # [1, 1, L, L] 1 = attend
            with torch.no_grad():
                theirs = model(x, attention_mask=visible if variant == "dllm_rl" else visible[:, 0],
                               position_ids=torch.arange(length)[None]).logits[0]  # [L, V]
                mine = ours[checkpoint](x, block_size=block).logits[0]
            entries.append({"tokens": x[0].tolist(), "block_size": block,
                            "logits": base64.b64encode(theirs.double().contiguous().numpy().tobytes()).decode(),
                            "max_difference_at_record": float((mine - theirs).abs().max())})
        found[f"{checkpoint}/{variant}"] = entries
    return found


# ------------------------------------------------------------------------------------------------ record
def record(root: Path, out: Path, provenance: dict, log=print) -> dict:
    official = load_official(root)
    folder = out / CHECKPOINT_DIR
    ours = {name: load_pretrained(folder / name) for name in CHECKPOINTS}
    models = {(name, variant): load_official_model(official, variant, folder / name)
              for name in CHECKPOINTS for variant in VARIANTS}
    recorded = []
    started = time.time()
    for case in cases({name: model.special for name, model in ours.items()}):
        result = run_official(official, models, case)
        recorded.append({**case, "official": result})
        log(f"case {case['id']}: {result['status']} {result.get('error', '')} ({len(result['calls'])} calls)")
    files = {f"{variant}/{name}": {**provenance.get(variant, {}), "sha256": _sha256(root / variant / name)}
             for variant, name in [("dllm_rl", "generate.py"), ("dllm_rl", "models/sdar/modeling_sdar.py"),
                                   ("dllm_rl", "models/sdar/configuration_sdar.py"), ("jetastra", "generate.py"),
                                   ("jetastra", "model_4b/modeling_sdar.py"),
                                   ("jetastra", "model_4b/configuration_sdar.py")]}
    import transformers

    log(f"{len(recorded)} cases in {time.time() - started:.0f} s")
    return {"format": FORMAT, "recorded": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "transformers": transformers.__version__, "files": files,
            "checkpoints": {name: {"committed": True, "content_sha256": content_sha256(folder / name),
                                   "special": ours[name].special.__dict__} for name in CHECKPOINTS},
            "forward": forward_logits(models, ours), "cases": recorded}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", type=Path, required=True,
                        help="folder with dllm_rl/ and jetastra/ as fetched (see above)")
    parser.add_argument("--provenance", type=Path, default=None,
                        help="JSON: {variant: {repository, commit}} recorded beside each file's sha256")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"), help="where sdar.json goes")
    parser.add_argument("--write-checkpoints", action="store_true",
                        help="(re)write the SDAR checkpoints under OUT/checkpoints first")
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
    write_text_atomic(args.out / SDAR_FILE, json.dumps(golden, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
