"""Golden traces of the official WINO decoder (spec/wino.md), replayed on every CI run by tests/test_wino.py.

Runs Feng-Hong/WINO-DLLM's ``LLaDA/decoding.py: decoding_wino`` with that repository's own LLaDA modelling
(``LLaDA/modeling_llada.py``, ``configuration_llada.py``) on the golden data's tiny LLaDA checkpoints, and stores
per case the settings, seed, prompt, outcome, output, the forward count and, per forward, the positions whose
token changed before the next forward (commits: mask -> token, revocations: token -> mask), plus the official
RoPE positions and attention mask of the first forward of every block layout it met.

    python -m tools.golden.wino --wino WINO-DLLM/LLaDA --provenance provenance.json --out tests/golden/

It needs transformers 4.46 (the official modelling's imports), torch, and veridec; nothing official is copied
into the repository. Numerics: the official modelling runs RMSNorm in float32, veridec in the checkpoint's
float64; the largest logit difference on WINO's layout is measured per checkpoint and recorded, and a case whose
smallest decision margin (WN5, on veridec's side) is within ``SAFETY`` times it is recorded as ``near_tie``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
import random
import sys
import time
from pathlib import Path

import torch

from veridec.events import visible_changes
from veridec.files import write_text_atomic
from veridec.models import load_pretrained
from veridec.reference.wino import generate
from veridec.rules.wino import WinoParams, forward_layout

from .checkpoints import CHECKPOINT_DIR, TEXT_TOKENS, content_sha256
from .record import SAFETY, _load_file, _quiet, _sha256

WINO_FILE = "wino.json"
FORMAT = 1
SEED = 20260712
MAX_FORWARDS = 48  # per case, the official loop's safety net (WN6 bounds it by the candidates; none reaches it)
SPLITS = [(4, 4), (8, 4), (8, 8), (6, 2), (9, 3), (12, 6), (12, 12), (16, 8), (32, 32)]  # (gen_length, block_length)
THRESHOLDS = [(0.2, 0.5), (0.2, 0.95), (0.4, 0.8), (0.4, 0.99), (0.6, 0.9), (0.6, 0.99), (0.9, 0.99)]
CHECKPOINTS = ("llada", "llada-proposes-mask")


# ------------------------------------------------------------------------------------------------ cases
def cases(specials: dict) -> list[dict]:
    """Every split x threshold pair on the plain checkpoint at temperature 0, then a random draw over
    checkpoints, temperatures (0, 0.7, 1) and prompts with masks in them."""
    rng = random.Random(SEED)
    grid = [_case(rng, "llada", specials, split, pair, 0.0, infill=False) for split in SPLITS for pair in THRESHOLDS]
    drawn = [_case(rng, rng.choice(CHECKPOINTS), specials, rng.choice(SPLITS), rng.choice(THRESHOLDS),
                   rng.choice([0.0, 0.0, 0.7, 1.0]), infill=rng.random() < 0.3) for _ in range(64)]
    return [dict(case, id=i) for i, case in enumerate(grid + drawn)]


def _case(rng, checkpoint, specials, split, pair, temperature, infill) -> dict:
    mask = specials[checkpoint].mask_id
    banned = {mask, specials[checkpoint].eos_id, specials[checkpoint].eot_id, specials[checkpoint].pad_id}
    prompt = [rng.choice([t for t in range(TEXT_TOKENS) if t not in banned]) for _ in range(rng.randint(1, 6))]
    if infill and len(prompt) > 1:
        prompt[rng.randrange(1, len(prompt))] = mask
    settings = {"gen_length": split[0], "block_length": split[1], "temperature": temperature, "mask_id": mask,
                "threshold": pair[0], "threshold_back": pair[1]}
    return {"checkpoint": checkpoint, "settings": settings, "prompt": [prompt], "seed": rng.randrange(2**31)}


# ------------------------------------------------------------------------------------------ official side
class Capture:
    """A forward pre-hook on the official model: the canvas of every call (capped at ``cap`` calls) and the
    positions and attention mask of the calls whose layout is new."""

    def __init__(self, model, cap: int, layouts: dict):
        self.cap, self.canvases, self.layouts = cap, [], layouts
        self.handle = model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        if len(self.canvases) >= self.cap:
            raise _Capped()
        x = args[0] if args else kwargs["input_ids"]
        self.canvases.append(x[0].tolist())
        positions, mask = kwargs["position_ids"], kwargs["attention_mask"]
        key = (tuple(positions.tolist()), x.shape[1])
        if key not in self.layouts:
            self.layouts[key] = ["".join("1" if v else "0" for v in row) for row in mask[0, 0].tolist()]


class _Capped(Exception):
    pass


def load_official(folder: Path):
    """decoding.py and the LLaDA modelling of a WINO-DLLM ``LLaDA/`` folder (it imports its config by the
    bare name ``configuration_llada``)."""
    sys.path.insert(0, str(folder))
    try:
        modeling = _load_file("veridec_official_wino_modeling", folder / "modeling_llada.py")
        decoding = _load_file("veridec_official_wino_decoding", folder / "decoding.py")
    finally:
        sys.path.remove(str(folder))
    return decoding, modeling.LLaDAModelLM


def run_official(decoding, model, case: dict, layouts: dict) -> dict:
    capture = Capture(model, MAX_FORWARDS, layouts)
    torch.manual_seed(case["seed"])
    prompt = torch.tensor(case["prompt"])
    try:
        with _quiet(), torch.no_grad():
            out, steps = decoding.decoding_wino(model, prompt, **case["settings"])
        status = "ok"
    except _Capped:
        status, out, steps = "capped", None, None
    finally:
        capture.handle.remove()
    chain = capture.canvases + ([out[0].tolist()] if out is not None else [])
    changes = [_changes(a, b) for a, b in zip(chain, chain[1:])]
    result = {"status": status, "forwards": len(capture.canvases), "changes": changes}
    if status == "ok":
        result.update(output=out[0].tolist(), steps=int(steps))
    return result


def _changes(before: list[int], after: list[int]) -> list[list[int]]:
    """[position, old, new] of every position the step changed (the verification block never changes)."""
    return [[p, a, b] for p, (a, b) in enumerate(zip(before, after)) if a != b]


# ------------------------------------------------------------------------------------------ veridec side
def run_veridec(model, case: dict) -> dict:
    """The same case with veridec's reference: the outcome in the recorded form, and its smallest margin."""
    torch.manual_seed(case["seed"])
    settings = case["settings"]
    result = generate(model, torch.tensor(case["prompt"]), **settings, ties="torch")
    return {"status": "ok", "output": result.canvas[0].tolist(), "steps": result.forwards[0],
            "events": result.events, "margin": min(result.margins[0])}


def measure_error(official, ours, specials, seed: int = 0) -> float:
    """Max |logit difference| of the two modellings on random canvases under WINO's layout (WN2)."""
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    for prompt_len, (gen_length, width) in [(3, (8, 4)), (5, (12, 6)), (1, (16, 8))]:
        params = WinoParams(gen_length, width)
        for block in range(gen_length // width):
            n = prompt_len + gen_length + width
            x = torch.randint(0, TEXT_TOKENS, (1, n), generator=gen)
            x[0, torch.rand(n, generator=gen) < 0.5] = specials.mask_id
            positions, bias = forward_layout(prompt_len, params, block)
            mine = ours.raw_forward(x, positions[None], attn_bias=bias[None, None]).logits
            with torch.no_grad():
                theirs = official(x, attention_mask=(bias == 0)[None, None], position_ids=positions).logits
            worst = max(worst, float((mine - theirs).abs().max()))
    return worst


# ------------------------------------------------------------------------------------------------ record
def record(wino_folder: Path, out: Path, provenance: dict) -> dict:
    decoding, model_class = load_official(wino_folder)
    root = out / CHECKPOINT_DIR
    ours = {name: load_pretrained(root / name) for name in CHECKPOINTS}
    with _quiet():
        theirs = {name: model_class.from_pretrained(str(root / name), torch_dtype=torch.float64).eval()
                  for name in CHECKPOINTS}
    errors = {name: measure_error(theirs[name], ours[name], ours[name].special) for name in CHECKPOINTS}
    layouts, recorded = {}, []
    for case in cases({name: model.special for name, model in ours.items()}):
        official = run_official(decoding, theirs[case["checkpoint"]], case, layouts)
        mine = run_veridec(ours[case["checkpoint"]], case)
        near = mine.get("margin", float("inf")) <= SAFETY * errors[case["checkpoint"]]
        agree = official["status"] == mine["status"] and official["changes"] == visible_changes(
            mine["events"], official["forwards"]) and official.get("output") == mine.get("output")
        recorded.append({**case, "official": official, "near_tie": bool(near), "agreed_at_record": agree})
        print(f"case {case['id']}: {official['status']}, {official['forwards']} forwards, "
              f"{sum(len(c) for c in official['changes'])} changes, {'agrees' if agree else 'DIFFERS'}"
              f"{' (near tie)' if near else ''}", flush=True)
    files = {role: {**provenance.get(role, {}), "sha256": _sha256(wino_folder / role)}
             for role in ("decoding.py", "modeling_llada.py", "configuration_llada.py")}
    return {"format": FORMAT, "recorded": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "transformers": _transformers_version(), "files": files, "max_forwards": MAX_FORWARDS,
            "checkpoints": checkpoint_records(root, ours),
            "numerics": {name: {"max_logit_error": err, "safety": SAFETY} for name, err in errors.items()},
            "layouts": [{"positions": list(k[0]), "length": k[1], "sees": v} for k, v in layouts.items()],
            "cases": recorded}


def checkpoint_records(root: Path, models: dict) -> dict:
    """What ``tools.golden.checkpoints.load_checkpoints`` checks before a replay: content hash, special ids."""
    return {name: {"committed": True, "content_sha256": content_sha256(root / name), "special": asdict(m.special)}
            for name, m in models.items()}


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.golden.wino", description=__doc__.splitlines()[0])
    parser.add_argument("--wino", type=Path, required=True, help="a WINO-DLLM checkout's LLaDA/ folder")
    parser.add_argument("--provenance", type=Path, help="JSON: file name -> {repository, commit, path}")
    parser.add_argument("--out", type=Path, default=Path("tests/golden"),
                        help="the golden folder, which holds checkpoints/ (default tests/golden)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("decoding.py", "modeling_llada.py", "configuration_llada.py"):
        if not (args.wino / name).is_file():
            parser.error(f"--wino: {args.wino / name} does not exist")
    provenance = json.loads(args.provenance.read_text()) if args.provenance else {}
    golden = record(args.wino, args.out, provenance)
    write_text_atomic(args.out / WINO_FILE, json.dumps(golden, indent=1) + "\n")
    differ = [c["id"] for c in golden["cases"] if not c["agreed_at_record"] and not c["near_tie"]]
    print(f"{len(golden['cases'])} cases written to {args.out / WINO_FILE}; differing away from a tie: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
