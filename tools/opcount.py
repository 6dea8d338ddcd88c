"""Operators per layer of one dual-cache block step (issue 26): veridec's cached forward against the official
Fast-dLLM modelling's on the same tiny checkpoint. Every ATen operator dispatched during the decode's second
model call (the first cached block step, after the prefill) is counted (``TorchDispatchMode``: what reaches the
kernels, deterministic on CPU); checkpoints of 1 and 2 layers give one layer's count as the difference.

    python -m tools.opcount                                     # veridec only: what tests/test_opcount.py holds
    /tmp/golden-venv/bin/python -m tools.opcount --fastdllm /tmp/official/fastdllm/llada \\
        --source "NVlabs/Fast-dLLM 24cc59e llada/" --out benchmarks/opcount.json   # both, in the official's venv

The official modelling (NVlabs/Fast-dLLM ``llada/model``) is read where it lies and never enters this
repository; it needs transformers 4.46 (docs/maintainers.md, "Re-recording the golden traces").
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# LLaDA-8B's attention shape in small: as many K/V heads as query heads (no grouping), head_dim 16
SIZES = dict(hidden_size=64, num_heads=4, num_kv_heads=4, intermediate_size=128)
SETTINGS = dict(steps=8, gen_length=16, block_length=8, threshold=0.9)
PROMPT = [[5, 6, 7, 8, 9, 10, 11, 12]]


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


class SecondCall:
    """Wraps ``owner.<name>`` so that its second call runs under a ``CountOps`` (``counted``)."""

    def __init__(self, owner, name: str):
        self.inner, self.calls, self.counted = getattr(owner, name), 0, None
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls != 2:
            return self.inner(*args, **kwargs)
        with CountOps() as counter:
            out = self.inner(*args, **kwargs)
        self.counted = counter.ops
        return out


def checkpoint(folder: Path, layers: int) -> Path:
    from veridec.models import write_tiny_checkpoint

    return write_tiny_checkpoint(folder / f"layers{layers}", "llada", seed=0, num_layers=layers, **SIZES)


def veridec_step(folder: Path) -> Counter:
    from veridec.models.shipped import load_model
    from veridec.optimized.fastdllm import generate_with_dual_cache

    model = load_model(str(folder), dtype=torch.float32)
    probe = SecondCall(model, "forward_cached")
    generate_with_dual_cache(model, torch.tensor(PROMPT), mask_id=model.special.mask_id, **SETTINGS)
    return probe.counted


def official_step(folder: Path, fastdllm: Path) -> Counter:
    from tools.golden.record import _package

    package = _package("veridec_opcount_fastdllm", fastdllm)
    import importlib
    import sys

    modeling = importlib.import_module(f"{package.__name__}.model.modeling_llada")
    sys.modules["model"], sys.modules["model.modeling_llada"] = importlib.import_module(
        f"{package.__name__}.model"), modeling  # generate.py's own import
    generate = importlib.import_module(f"{package.__name__}.generate")
    model = modeling.LLaDAModelLM.from_pretrained(str(folder), torch_dtype=torch.float32).eval()
    mask_id = json.loads((folder / "config.json").read_text())["mask_token_id"]
    probe = SecondCall(model, "forward")
    with torch.no_grad():
        generate.generate_with_dual_cache(model, torch.tensor(PROMPT), mask_id=mask_id, **SETTINGS)
    return probe.counted


def per_layer(one: Counter, two: Counter) -> dict:
    """One layer's operators: the 2-layer step's minus the 1-layer step's, by operator."""
    ops = {name: two[name] - one[name] for name in sorted(set(one) | set(two)) if two[name] != one[name]}
    return {"total": sum(ops.values()), "by_operator": ops, "outside_layers": sum(one.values()) - sum(ops.values())}


def measure(fastdllm: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folders = {n: checkpoint(Path(tmp), n) for n in (1, 2)}
        result = {"config": {**SIZES, **SETTINGS, "prompt_length": len(PROMPT[0]), "batch": 1,
                             "dtype": "float32", "torch": torch.__version__, "machine": platform.machine()},
                  "veridec": per_layer(*(veridec_step(folders[n]) for n in (1, 2)))}
        if fastdllm is not None:
            import transformers

            result["official"] = per_layer(*(official_step(folders[n], fastdllm) for n in (1, 2)))
            result["config"]["transformers_for_official"] = transformers.__version__
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fastdllm", type=Path, default=None, help="the official llada/ folder (generate.py, model/)")
    parser.add_argument("--source", default=None, help="where the official files come from (repository commit)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    result = measure(args.fastdllm)
    if args.source:
        result["config"]["official_source"] = args.source
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
