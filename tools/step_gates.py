"""What a GPU would show of a cached decode step, counted on the CPU (issue 47): host synchronisations and
operators launched per cached step of an optimized Fast-dLLM decode, and whether the cached step compiles as one
graph. tests/test_step_gates.py holds them to the ceilings of benchmarks/step_gates.json in every CI run (its
``before``: the counts before issue 47; ``ceiling``: lowered by hand when a change lowers the counts).

    python -m tools.step_gates                          # the counts at LLaDA-8B's layer structure, printed
    python -m tools.step_gates --out benchmarks/step_gates.json  # rewrites its measured counts (keeps the rest)

Counting (``StepCosts``, a ``TorchDispatchMode`` plus patched tensor methods): every ATen operator dispatched is
one launch; a host synchronisation is an operator whose result the host must wait for (``.item()``, ``bool(t)``,
``int(t)``, ``float(t)``: ``_local_scalar_dense``; ``nonzero``, boolean-mask indexing, ``masked_select``,
``unique``, ``torch.equal``, ``repeat_interleave`` by a tensor: output shapes read from the data) or a copy to the
host (``.tolist()``, ``.cpu()``, ``.numpy()``, which dispatch nothing on the CPU and are counted by patching).
A decode is split into phases: a block's refresh (its full forward and first step), its cached steps (from the
end of the first step to the end of the block: the cached forwards and the rule's steps), the loop's termination
test between steps (``TERMINATION``: ``veridec.optimized.parallel.continues``, one read of the block's "a mask is
left" and "a logit was not finite" flags) and what runs once per block (``BLOCK_END``: the trace read back).
Per cached step = the phase's count / cached steps; operators per cached step count the steps' and the
termination tests' (before issue 47 the test ran inside the cached phase, and counted there).

Operators do not depend on the widths (hidden size, heads, vocabulary), only on the structure: LLaDA-8B's (as
many K/V heads as query heads, no biases, an untied head, no q/k norms) at 1 and 2 layers gives the per-layer
count and the 32-layer one (``per_step_ops``); tests/test_step_gates.py checks on the meta device that the
model's forward at LLaDA-8B's real widths dispatches the same operators.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

FULL_LAYERS = 32
SIZES = dict(vocab_size=128, hidden_size=64, num_heads=4, num_kv_heads=4, intermediate_size=96,
             rope_theta=500000.0)  # LLaDA-8B's structure in small: no K/V grouping, no biases, an untied head
SETTINGS = dict(steps=32, gen_length=32, block_length=16, threshold=0.9)
PROMPT_LENGTH = 8
SYNC_OPERATORS = {"aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.unique", "aten._unique2",
                  "aten.unique_consecutive", "aten.equal", "aten.allclose", "aten.is_nonzero"}
HOST_COPIES = ("tolist", "cpu", "numpy")  # tensor methods that copy to the host and dispatch nothing on the CPU
BLOCK_END = "block end"
TERMINATION = "termination"


def is_sync(name: str, args) -> bool:
    """Whether the operator ``name`` with ``args`` makes the host wait for the device's data."""
    if name in SYNC_OPERATORS:
        return True
    if name == "aten.index":  # x[mask]: the result's length is the mask's count
        return any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in (args[1] if len(args) > 1 else ()))
    if name == "aten.repeat_interleave":
        return len(args) > 1 and isinstance(args[1], torch.Tensor)
    return False


class StepCosts(TorchDispatchMode):
    """Counts operators and host synchronisations by ``phase`` (set by the caller) while active."""

    def __init__(self):
        super().__init__()
        self.phase = "outside"
        self.ops: dict[str, Counter] = {}
        self.syncs: dict[str, Counter] = {}
        self._patched = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.ops.setdefault(self.phase, Counter())[name] += 1
        if is_sync(name, args):
            self.syncs.setdefault(self.phase, Counter())[name] += 1
        return func(*args, **(kwargs or {}))

    def count_host_copy(self, name: str) -> None:
        self.syncs.setdefault(self.phase, Counter())[f"Tensor.{name}"] += 1

    def __enter__(self):
        for name in HOST_COPIES:
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def counted(tensor, *args, _name=name, _original=original, **kwargs):
                self.count_host_copy(_name)
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, counted)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        self._patched = {}
        return super().__exit__(*exc)

    def total(self, which: str, phase: str) -> int:
        return sum((self.ops if which == "ops" else self.syncs).get(phase, Counter()).values())


class Phases:
    """While active, sets ``costs.phase`` as an optimized decode goes: "refresh" from a block's start to the end
    of its first step, "cached" until the block ends, ``BLOCK_END`` in the per-block read-back
    (``flush_block``), "outside" elsewhere; counts the cached forwards."""

    def __init__(self, costs: StepCosts):
        from veridec.optimized import parallel

        self.costs, self.module, self.cached_steps, self.blocks, self._saved = costs, parallel, 0, 0, {}

    def _wrap(self, name: str, before, after):
        inner = getattr(self.module, name)
        self._saved[name] = inner

        def wrapped(*args, **kwargs):
            previous = self.costs.phase
            before(args, previous)
            try:
                return inner(*args, **kwargs)
            finally:
                after(args, previous)

        setattr(self.module, name, wrapped)

    def __enter__(self):
        costs = self.costs

        def enter_block(args, previous):
            costs.phase, self.blocks = "refresh", self.blocks + 1

        self._wrap("decode_block", enter_block, lambda args, previous: setattr(costs, "phase", "outside"))
        self._wrap("take_step", lambda args, previous: None,
                   lambda args, previous: setattr(costs, "phase", "cached" if args[3] == 0 else previous))

        def count_step(args, previous):
            self.cached_steps += 1

        self._wrap("cached_forward", count_step, lambda args, previous: None)
        for name, phase in (("flush_block", BLOCK_END), ("continues", TERMINATION)):
            if hasattr(self.module, name):
                self._wrap(name, lambda args, previous, _phase=phase: setattr(costs, "phase", _phase),
                           lambda args, previous: setattr(costs, "phase", previous))
        return self

    def __exit__(self, *exc):
        for name, inner in self._saved.items():
            setattr(self.module, name, inner)


def decode_costs(model, prompt: torch.Tensor, cache: str = "dual", compile=False, **settings) -> dict:
    """Operators and host syncs of one optimized Fast-dLLM decode, by phase, and its cached steps."""
    from veridec.optimized.fastdllm import generate_with_dual_cache, generate_with_prefix_cache

    run = generate_with_dual_cache if cache == "dual" else generate_with_prefix_cache
    costs = StepCosts()
    with Phases(costs) as phases, costs:
        decoded = run(model, prompt, compile=compile, **settings)
    steps = max(phases.cached_steps, 1)
    ops = costs.total("ops", "cached") + costs.total("ops", TERMINATION)
    return {"cached_steps": phases.cached_steps, "blocks": phases.blocks,
            "ops_per_cached_step": round(ops / steps, 2),
            "syncs_per_cached_step": round(costs.total("syncs", "cached") / steps, 3),
            "termination_reads_per_cached_step": round(costs.total("syncs", TERMINATION) / steps, 3),
            "syncs_by_phase": {phase: dict(counter) for phase, counter in costs.syncs.items()},
            "ops_cached_by_operator": dict(sorted(costs.ops.get("cached", Counter()).items())),
            "canvas": decoded.canvas, "trace": decoded.trace}


def syncs_per_cached_step(model, prompt: torch.Tensor, **settings) -> dict:
    """gpu_bench's ``syncs`` part: host syncs per cached step of an eager dual decode (on the model's device)."""
    found = decode_costs(model, prompt, steps=settings["gen_length"], **settings)
    inside = found["syncs_by_phase"].get("cached", {})
    return {"inside_block_per_cached_step": found["syncs_per_cached_step"], "inside_block_by_kind": inside,
            "termination_reads_per_cached_step": found["termination_reads_per_cached_step"],
            "per_block": {phase: count for phase, count in found["syncs_by_phase"].items() if phase != "cached"},
            "cached_steps": found["cached_steps"], "blocks": found["blocks"]}


def structured_model(layers: int, dtype=torch.float32, device="cpu"):
    """A random model with LLaDA-8B's structure and ``layers`` layers; the head's mask and EOS rows zeroed (their
    logit 0 lies under the others' maximum: random weights never propose them, so no decode stalls)."""
    from tools.gpu_check import shaped_model

    model = shaped_model({**SIZES, "num_layers": layers}, torch.device(device), dtype)
    with torch.no_grad():
        model.lm_head.weight[model.special.mask_id].zero_()
        model.lm_head.weight[model.special.eos_id].zero_()
    return model


GATED = {"dual": ("dual", torch.float32), "prefix": ("prefix", torch.float32),
         "dual bfloat16": ("dual", torch.bfloat16)}  # bfloat16 (the GPU's dtype) adds the norms' and RoPE's casts


def per_step(cache: str = "dual", dtype: torch.dtype = torch.float32) -> dict:
    """Operators and syncs per cached step at 1 and 2 layers of LLaDA-8B's structure -> per layer and at 32."""
    torch.manual_seed(0)
    prompt = torch.randint(0, SIZES["vocab_size"] - 3, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(0))
    found = {layers: decode_costs(structured_model(layers, dtype), prompt, cache=cache, **SETTINGS)
             for layers in (1, 2)}
    one, two = found[1]["ops_per_cached_step"], found[2]["ops_per_cached_step"]
    full = round(one + (FULL_LAYERS - 1) * (two - one), 1)
    return {"cache": cache, "dtype": str(dtype).removeprefix("torch."),
            "ops_per_cached_step": {"1_layer": one, "2_layers": two, "per_layer": round(two - one, 2),
                                    f"{FULL_LAYERS}_layers": full},
            "syncs_per_cached_step": found[2]["syncs_per_cached_step"],
            "termination_reads_per_cached_step": found[2]["termination_reads_per_cached_step"],
            "syncs_by_phase": found[2]["syncs_by_phase"], "cached_steps": found[2]["cached_steps"],
            "blocks": found[2]["blocks"], "ops_cached_by_operator_2_layers": found[2]["ops_cached_by_operator"]}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="rewrite this JSON's config and measured counts, keeping its 'before' and 'ceiling'")
    return parser


def measure() -> dict:
    from tools.gpu_check import SHAPES

    return {"config": {**SETTINGS, "prompt_length": PROMPT_LENGTH, "batch": 1, "structure": SIZES,
                       "full_shape": SHAPES["llada-8b"], "torch": torch.__version__},
            "measured": {name: {k: v for k, v in per_step(*gated).items() if k != "ops_cached_by_operator_2_layers"}
                         for name, gated in GATED.items()}}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    result = measure()
    if args.out:
        kept = json.loads(args.out.read_text()) if args.out.exists() else {}
        result = {"config": result["config"], **{k: v for k, v in kept.items() if k in ("before", "ceiling")},
                  "measured": result["measured"]}
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
