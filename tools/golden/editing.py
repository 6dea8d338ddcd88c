"""Golden traces of the official LLaDA2.1 editing sampler (spec/editing.md), replayed by tests/test_editing.py.

Runs ZHZisZZ/dllm's ``dllm/pipelines/llada21/sampler.py: LLaDA21Sampler.sample`` (with the package's
``core/samplers/base.py`` and ``core/schedulers``, loaded from a local copy) on the golden data's tiny LLaDA
checkpoints. The sampler passes the model an additive block-causal mask and position ids; the LLaDA2.1 MoE
modelling itself is not run (veridec has no MoE layout), so the model behind the sampler is veridec's, through
a one-line adapter (``raw_forward(x, position_ids, attn_bias=attention_mask)``): what the data pins is the
sampler's loop, on identical logits. Per case: settings, seed, prompt, outcome, canvas, and per forward the
positions whose token changed before the next forward.

    python -m tools.golden.editing --dllm dllm-checkout --provenance provenance.json --out tests/golden/
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
import types
from pathlib import Path

import torch

from veridec.decoding import DecodeStalled
from veridec.events import visible_changes
from veridec.files import write_text_atomic
from veridec.models import load_pretrained
from veridec.reference.editing import generate

from .checkpoints import CHECKPOINT_DIR, TEXT_TOKENS
from .record import _quiet, _sha256
from .wino import checkpoint_records

EDITING_FILE = "editing.json"
FORMAT = 1
SEED = 20260213
CHECKPOINTS = ("llada", "llada-proposes-mask")
FILES = ("dllm/pipelines/llada21/sampler.py", "dllm/core/samplers/base.py", "dllm/core/schedulers/__init__.py",
         "dllm/core/schedulers/alpha.py", "dllm/core/schedulers/kappa.py")


# ------------------------------------------------------------------------------------------------ cases
def cases(specials: dict) -> list[dict]:
    """Greedy cases over block sizes, thresholds, transfer counts and post-step budgets on both checkpoints,
    then sampled ones with top-k / top-p, and early stops at EOS."""
    rng = random.Random(SEED)
    drawn = []
    for i in range(120):
        checkpoint = "llada" if i % 4 else "llada-proposes-mask"
        temperature = 0.0 if i < 90 else rng.choice([0.7, 1.0])
        drawn.append(_case(rng, checkpoint, specials[checkpoint], temperature, eos_stop=i % 10 == 9))
    return [dict(case, id=i) for i, case in enumerate(drawn)]


def _case(rng, checkpoint, special, temperature, eos_stop) -> dict:
    banned = {special.mask_id, special.eos_id, special.eot_id, special.pad_id}
    prompt = [rng.choice([t for t in range(TEXT_TOKENS) if t not in banned]) for _ in range(rng.randint(1, 9))]
    if rng.random() < 0.2 and len(prompt) > 2:
        prompt[rng.randrange(1, len(prompt))] = special.mask_id  # a mask in the prompt's last block is decoded
    threshold = rng.choice([0.2, 0.4, 0.6, 0.8, 0.95])
    settings = {"max_new_tokens": rng.randint(2, 14), "block_size": rng.choice([2, 3, 4, 6, 8]),
                "temperature": temperature, "threshold": threshold,
                "editing_threshold": rng.choice([0.2, 0.4, 0.6, 0.9]), "max_post_steps": rng.choice([0, 1, 2, 4, 16]),
                "num_to_transfer": rng.choice([1, 1, 2, 3]), "eos_early_stop": eos_stop}
    if temperature:
        settings.update(top_k=rng.choice([None, 3, 10]), top_p=rng.choice([None, 0.5, 0.9]))
    return {"checkpoint": checkpoint, "settings": settings, "prompt": [prompt], "seed": rng.randrange(2**31)}


# ------------------------------------------------------------------------------------------ official side
def load_official(root: Path) -> type:
    """LLaDA21Sampler from a dllm checkout, without running the package's __init__ files (which import the
    whole training stack): dllm, dllm.core, dllm.core.samplers and the pipeline are bare packages."""
    for name, folder in [("dllm", "dllm"), ("dllm.core", "dllm/core"), ("dllm.core.samplers", "dllm/core/samplers"),
                         ("dllm.pipelines", "dllm/pipelines"), ("dllm.pipelines.llada21", "dllm/pipelines/llada21")]:
        module = types.ModuleType(name)
        module.__path__ = [str(root / folder)]
        sys.modules[name] = module
    return importlib.import_module("dllm.pipelines.llada21.sampler").LLaDA21Sampler


class _Capped(Exception):
    pass


class OfficialModel:
    """veridec's model in the sampler's calling convention, logging each call's window and capping the calls
    per block (a new block is a longer window) at ``limit``."""

    def __init__(self, model, limit: int):
        self.model, self.limit, self.windows, self.in_block, self.width = model, limit, [], 0, None
        self.device = model.device

    def __call__(self, x, attention_mask=None, position_ids=None):
        if x.shape[1] != self.width:
            self.width, self.in_block = x.shape[1], 0
        if self.in_block == self.limit:
            raise _Capped()
        self.in_block += 1
        self.windows.append(x[0].tolist())
        return self.model.raw_forward(x, position_ids, attn_bias=attention_mask)


class Tokenizer:
    def __init__(self, special):
        self.mask_token_id, self.eos_token_id = special.mask_id, special.eos_id


def run_official(sampler_class, model, case: dict) -> dict:
    settings = case["settings"]
    limit = 4 * settings["block_size"] + settings["max_post_steps"]
    proxy = OfficialModel(model, limit)
    sampler = sampler_class(model=proxy, tokenizer=Tokenizer(model.special))
    torch.manual_seed(case["seed"])
    try:
        with _quiet(), torch.no_grad():
            out = sampler.sample([case["prompt"][0]], **settings)
        status = "ok"
    except _Capped:
        status, out = "endless", None
    length = -(-(len(case["prompt"][0]) + settings["max_new_tokens"]) // settings["block_size"]) * settings[
        "block_size"]
    canvases = [w + [model.special.mask_id] * (length - len(w)) for w in proxy.windows]  # placed on the canvas
    chain = canvases + ([out[0].tolist()] if out is not None else [])
    changes = [[[p, a, b] for p, (a, b) in enumerate(zip(x, y)) if a != b] for x, y in zip(chain, chain[1:])]
    result = {"status": status, "forwards": len(proxy.windows), "changes": changes}
    if out is not None:
        result["canvas"] = out[0].tolist()
    return result


# ------------------------------------------------------------------------------------------ veridec side
def run_veridec(model, case: dict) -> dict:
    torch.manual_seed(case["seed"])
    try:
        result = generate(model, torch.tensor(case["prompt"]), **case["settings"], ties="torch")
    except DecodeStalled as stalled:
        return {"status": "endless", "events": stalled.trace.events, "forwards": stalled.trace.forwards[0]}
    return {"status": "ok", "canvas": result.canvas[0].tolist(), "events": result.events,
            "forwards": result.forwards[0]}


def agrees(official: dict, ours: dict) -> bool:
    """Same outcome, canvas and per-forward changes (the steps before a cap included)."""
    if (official["status"], official.get("canvas"), official["forwards"]) != (
            ours["status"], ours.get("canvas"), ours["forwards"]):
        return False
    return visible_changes(ours["events"], official["forwards"])[: len(official["changes"])] == official["changes"]


# ------------------------------------------------------------------------------------------------ record
def record(root: Path, out: Path, provenance: dict) -> dict:
    sampler_class = load_official(root)
    folder = out / CHECKPOINT_DIR
    models = {name: load_pretrained(folder / name) for name in CHECKPOINTS}
    recorded = []
    for case in cases({name: model.special for name, model in models.items()}):
        official = run_official(sampler_class, models[case["checkpoint"]], case)
        agree = agrees(official, run_veridec(models[case["checkpoint"]], case))
        recorded.append({**case, "official": official, "agreed_at_record": agree})
        print(f"case {case['id']}: {official['status']}, {official['forwards']} forwards, "
              f"{sum(len(c) for c in official['changes'])} changes, {'agrees' if agree else 'DIFFERS'}", flush=True)
    files = {name: {**provenance.get(name, {}), "sha256": _sha256(root / name)} for name in FILES}
    return {"format": FORMAT, "recorded": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "files": files,
            "checkpoints": checkpoint_records(folder, models), "cases": recorded}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.golden.editing", description=__doc__.splitlines()[0])
    parser.add_argument("--dllm", type=Path, required=True, help="a ZHZisZZ/dllm checkout (its root folder)")
    parser.add_argument("--provenance", type=Path, help="JSON: file path -> {repository, commit, path}")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"),
                        help="the golden folder, which holds checkpoints/ (default tests/golden)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in FILES:
        if not (args.dllm / name).is_file():
            parser.error(f"--dllm: {args.dllm / name} does not exist")
    provenance = json.loads(args.provenance.read_text()) if args.provenance else {}
    golden = record(args.dllm, args.out, provenance)
    write_text_atomic(args.out / EDITING_FILE, json.dumps(golden, indent=1) + "\n")
    differ = [c["id"] for c in golden["cases"] if not c["agreed_at_record"]]
    print(f"{len(golden['cases'])} cases written to {args.out / EDITING_FILE}; differing: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
