"""Golden traces of LLaDA2.0's block-diffusion samplers (spec/block_diffusion.md BD12), replayed on every CI run by
tests/test_llada2_golden.py.

Runs, as published, ``LLaDA2MoeModelLM.generate`` (and the helpers it calls: ``_sample_with_temperature_topk_topp``,
``_top_k_logits``, ``_top_p_logits``, ``_get_num_transfer_tokens``) from ZHZisZZ/dllm
``dllm/pipelines/llada2/models/modeling_llada2_moe.py``, and ``LLaDA2Sampler.sample`` from
``dllm/pipelines/llada2/sampler.py``. Only the decode loops run: the methods are taken from the file's syntax tree
and bound to a stand-in whose ``forward`` is veridec's SDAR-layout transformer under the 4-D additive mask the
loop passes (LLaDA2's own architecture, a mixture of experts, is not veridec's; the loop only reads ``.logits``).
The sampler's base classes (``dllm.core.samplers.base``) are replaced by dataclasses of the same fields. The
golden data's tiny SDAR checkpoints (``tools.golden.checkpoints``: ``sdar``, ``sdar-tied``) in float64. Per case:
settings, seed (torch's global RNG, seeded before the call), prompt rows, the official output and every model
call (its width and the tokens of its last block).

    git -C DLLM show HEAD:dllm/pipelines/llada2/models/modeling_llada2_moe.py > UPSTREAM/modeling_llada2_moe.py
    git -C DLLM show HEAD:dllm/pipelines/llada2/sampler.py > UPSTREAM/sampler.py
    python -m tools.golden.llada2 --official UPSTREAM --source "ZHZisZZ/dllm ca17675" --out tests/golden/

Needs torch and veridec only (no transformers internals are imported: nothing of the modelling file runs but the
loop's methods).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import random
import sys
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as F

from veridec.files import write_text_atomic
from veridec.models import load_pretrained

from .checkpoints import CHECKPOINT_DIR, TEXT_TOKENS, content_sha256
from .record import _sha256

LLADA2_FILE = "llada2.json"
FORMAT = 1
SEED = 20261204
CHECKPOINTS = ("sdar", "sdar-tied")
METHODS = ("generate", "_sample_with_temperature_topk_topp", "_top_k_logits", "_top_p_logits",
           "_get_num_transfer_tokens")
SPLITS = [(4, 4), (4, 2), (4, 1), (8, 8), (8, 3), (4, 6), (2, 2)]  # (block_length, steps)
SAMPLING = [(0.0, None, None), (0.0, None, None), (1.0, None, None), (0.7, None, None), (1.3, 3, None),
            (1.0, None, 0.8), (0.8, 5, 0.6)]  # (temperature, top_k, top_p)
THRESHOLDS = (0.95, 0.5, 0.2)


# ------------------------------------------------------------------------------------------------ cases
def cases(specials: dict) -> list[dict]:
    """The modelling's ``generate`` (one row) and the sampler (one row, or 2-3 rows at temperature 0) over the
    splits, sampling settings, thresholds, ``minimal_topk`` 1 or 2, prompts that are and are not whole blocks."""
    rng = random.Random(SEED)
    drawn = []
    for loop in ("generate", "sampler"):
        for split in SPLITS:
            for sampling in SAMPLING:
                drawn += [_case(rng, specials, loop, split, sampling) for _ in range(2)]
    drawn += [_case(rng, specials, "sampler", rng.choice(SPLITS), (0.0, None, None), rows=rng.choice([2, 3]))
              for _ in range(12)]
    return [dict(case, id=i) for i, case in enumerate(drawn)]


def _case(rng, specials, loop: str, split, sampling, rows: int = 1) -> dict:
    checkpoint = "sdar-tied" if rng.random() < 0.25 else "sdar"
    special = specials[checkpoint]
    banned = {special["mask_id"], special["eos_id"], special["eot_id"], special["pad_id"]}
    length = rng.choice([1, 2, 3, 4, 5, 8, 9])
    prompt = [[rng.choice([t for t in range(TEXT_TOKENS) if t not in banned]) for _ in range(length)]
              for _ in range(rows)]
    block, steps = split
    settings = {"block_length": block, "steps": steps, "gen_length": rng.randint(1, 12), "temperature": sampling[0],
                "top_k": sampling[1], "top_p": sampling[2], "threshold": rng.choice(THRESHOLDS),
                "minimal_topk": rng.choice([1, 1, 2])}
    return {"checkpoint": checkpoint, "loop": loop, "settings": settings, "prompt": prompt,
            "seed": rng.randrange(2**31), "mask_id": special["mask_id"], "eos_id": special["eos_id"]}


# ------------------------------------------------------------------------------------------ official side
class StandInModel:
    """What the loops read of a model: ``forward`` / ``__call__`` (input ids [B, W], a 4-D additive mask, position
    ids) -> an object with ``.logits`` [B, W, V], ``device``; veridec's transformer computes the logits. ``calls``:
    every call's width and the tokens of its last ``block`` positions (the block being decoded)."""

    def __init__(self, model, block: int):
        self.model, self.block, self.device, self.calls = model, block, model.device, []

    def forward(self, x, attention_mask=None, position_ids=None):
        self.calls.append([x.shape[1], x[:, -self.block:].tolist()])
        positions = position_ids.expand(x.shape[0], -1)  # [B, W]
        bias = attention_mask.to(self.model.dtype)  # [1, 1, W, W]: 0 or -inf
        return types.SimpleNamespace(logits=self.model.raw_forward(x, positions, attn_bias=bias).logits)

    __call__ = forward


def load_official(root: Path) -> dict:
    """{"generate": a class holding the modelling's loop methods, "sampler": LLaDA2Sampler} from ``root``."""
    source = (root / "modeling_llada2_moe.py").read_text()
    tree = ast.parse(source)
    owner = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "LLaDA2MoeModelLM")
    methods = [node for node in owner.body if isinstance(node, ast.FunctionDef) and node.name in METHODS]
    missing = set(METHODS) - {node.name for node in methods}
    if missing:
        raise SystemExit(f"modeling_llada2_moe.py: LLaDA2MoeModelLM lacks {sorted(missing)}")
    module = ast.Module(body=[ast.ClassDef(name="Loop", bases=[], keywords=[], body=methods, decorator_list=[])],
                        type_ignores=[])
    namespace = {"torch": torch, "F": F, "Optional": __import__("typing").Optional}
    exec(compile(ast.fix_missing_locations(module), str(root / "modeling_llada2_moe.py"), "exec"), namespace)
    _install_sampler_base()
    sampler = types.ModuleType("veridec_official_llada2_sampler")
    sys.modules[sampler.__name__] = sampler  # its dataclasses look their module up
    exec(compile((root / "sampler.py").read_text(), str(root / "sampler.py"), "exec"), sampler.__dict__)
    return {"generate": namespace["Loop"], "sampler": sampler.LLaDA2Sampler}


def _install_sampler_base() -> None:
    """``dllm.core.samplers.base`` as the dataclasses it defines (the abstract base's scheduler is not used)."""
    @dataclasses.dataclass
    class BaseSamplerOutput:
        sequences: torch.Tensor
        histories: list | None = None

    @dataclasses.dataclass
    class BaseSamplerConfig:
        return_dict: bool = False

    @dataclasses.dataclass
    class BaseSampler:
        model: object
        tokenizer: object
        scheduler: object = None

    base = types.ModuleType("dllm.core.samplers.base")
    base.BaseSampler, base.BaseSamplerConfig, base.BaseSamplerOutput = BaseSampler, BaseSamplerConfig, \
        BaseSamplerOutput
    for name in ("dllm", "dllm.core", "dllm.core.samplers"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["dllm.core.samplers.base"] = base


def run_official(official: dict, models: dict, case: dict) -> dict:
    model, settings = models[case["checkpoint"]], case["settings"]
    stand_in = StandInModel(model, settings["block_length"])
    prompt = torch.tensor(case["prompt"])
    torch.manual_seed(case["seed"])
    try:
        with torch.no_grad():
            if case["loop"] == "generate":
                loop = official["generate"]()
                loop.forward, loop.device = stand_in.forward, stand_in.device
                out = loop.generate(prompt, eos_id=case["eos_id"], mask_id=case["mask_id"], **settings)
            else:
                tokenizer = types.SimpleNamespace(mask_token_id=case["mask_id"], eos_token_id=case["eos_id"])
                sampler = official["sampler"](model=stand_in, tokenizer=tokenizer)
                kw = dict(settings, max_new_tokens=settings["gen_length"], block_size=settings["block_length"],
                          steps_per_block=settings["steps"])
                for name in ("gen_length", "block_length", "steps"):
                    del kw[name]
                out = sampler.sample([row for row in prompt], **kw)
        result = {"status": "ok", "output": out.tolist()}
    except Exception as err:  # noqa: BLE001 - the official failure is the record
        result = {"status": "raises", "error": f"{type(err).__name__}: {err}"}
    return {**result, "calls": stand_in.calls}


def record(official_root: Path, source: str, out: Path) -> dict:
    models, specials, checkpoints = {}, {}, {}
    for name in CHECKPOINTS:
        folder = out / CHECKPOINT_DIR / name
        model = load_pretrained(folder, dtype=torch.float64)
        models[name] = model
        specials[name] = dataclasses.asdict(model.special)
        checkpoints[name] = {"content_sha256": content_sha256(folder), "special": specials[name]}
    official = load_official(official_root)
    drawn = cases(specials)
    for case in drawn:
        case["official"] = run_official(official, models, case)
    files = {name: _sha256(official_root / name) for name in ("modeling_llada2_moe.py", "sampler.py")}
    data = {"format": FORMAT, "recorded": time.strftime("%Y-%m-%d"), "source": source, "torch": torch.__version__,
            "files": files, "checkpoints": checkpoints, "cases": drawn}
    write_text_atomic(out / LLADA2_FILE, json.dumps(data, separators=(",", ":")) + "\n")
    return data


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.golden.llada2", description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True,
                        help="folder with modeling_llada2_moe.py and sampler.py as fetched")
    parser.add_argument("--source", required=True, help="where they come from (repository and commit)")
    parser.add_argument("--out", type=Path, required=True, help="the golden folder (tests/golden)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("modeling_llada2_moe.py", "sampler.py"):
        if not (args.official / name).is_file():
            raise SystemExit(f"--official {args.official}: no {name} there (see the module's docstring)")
    data = record(args.official, args.source, args.out)
    outcomes = {}
    for case in data["cases"]:
        key = f"{case['loop']}:{case['official']['status']}"
        outcomes[key] = outcomes.get(key, 0) + 1
    print(f"{len(data['cases'])} cases -> {args.out / LLADA2_FILE}: {outcomes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
