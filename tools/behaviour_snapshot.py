"""A before/after snapshot of what the product does, for refactors that must not change behaviour.

Every example decoder and broken variant of ``examples/`` is checked as the docs check it (the same target,
cache, model, tier and flags, fewer cases), and ``veridec verify --quick`` and ``veridec exactness --quick`` are
run; each entry's result is written as one JSON line as soon as it finishes (a killed run keeps what it has; a
rerun with the same ``--out`` skips the entries it holds). Timing fields are dropped, so two snapshots of the
same behaviour are equal line for line:

    python -m tools.behaviour_snapshot --out /tmp/before.jsonl          # on the old commit
    python -m tools.behaviour_snapshot --out /tmp/after.jsonl           # on the new one
    python -m tools.behaviour_snapshot --compare /tmp/before.jsonl /tmp/after.jsonl

A check's entry holds its verdict, cases run, refusals, official defects matched, knob verdicts, the shrunk
failing case with its problems, diagnosis and both sides' counters, and tier A's or S's metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMING = ("seconds", "wall", "elapsed", "per_second", "tokens_per_s", "time", "host", "started", "finished")

LLADA = {"model": "tiny-llada"}
DUAL = {"against": "fastdllm", "cache": "dual", **LLADA}
SDAR = {"against": "sdar", "model": "tiny-sdar", "max_batch": 1, "padding": False}
LLADA2 = {"against": "llada2", "ties": "torch", **LLADA}

# (entry name, "FILE.py:FUNCTION", check_decoder's arguments besides the candidate)
CHECKS = [
    ("fastdllm_dual", "fastdllm_dual.py:generate", DUAL),
    *[(f"fastdllm_dual_broken:{name}", f"fastdllm_dual_broken.py:{name}", DUAL) for name in (
        "stale_cache", "ties_to_highest_index", "strict_threshold", "block_positions_from_zero",
        "block_done_by_row_zero", "one_too_many", "confidence_of_noisy_logits")],
    ("fastdllm_dual_broken:stale_cache/A", "fastdllm_dual_broken.py:stale_cache", {**DUAL, "tier": "A"}),
    ("fastdllm_june2025:dual", "fastdllm_june2025.py:generate_with_dual_cache",
     {"against": "fastdllm-2025-06", "cache": "dual", **LLADA}),
    ("fastdllm_june2025:prefix", "fastdllm_june2025.py:generate_with_prefix_cache",
     {"against": "fastdllm-2025-06", "cache": "prefix", **LLADA}),
    ("fastdllm_june2025:none", "fastdllm_june2025.py:generate", {"against": "fastdllm-2025-06", **LLADA}),
    ("fastdllm_dual:none-target", "fastdllm_dual.py:generate", {"against": "fastdllm", **LLADA}),
    ("llada_sampler", "llada_sampler.py:generate", {"against": "llada", **LLADA}),
    ("llada_sampler/S-oracle", "llada_sampler.py:generate",
     {"against": "llada", "model": "oracle-joint", "tier": "S", "samples": 300}),
    ("llada_sampler_broken/S-oracle", "llada_sampler_broken.py:temperature_applied_twice",
     {"against": "llada", "model": "oracle-joint", "tier": "S", "samples": 300}),
    ("dream_sampler", "dream_sampler.py:diffusion_generate", {"against": "dream", "model": "tiny-dream"}),
    ("dream_sampler/S", "dream_sampler.py:diffusion_generate",
     {"against": "dream", "model": "tiny-dream", "tier": "S", "samples": 200, "max_examples": 2}),
    *[(f"dream_sampler_variants:{name}", f"dream_sampler_variants.py:{name}",
       {"against": "dream", "model": "tiny-dream", "tier": "S", "samples": 200, "max_examples": 2}) for name in (
        "temperature_applied_twice", "top_p_drops_crossing_token", "confidence_before_temperature",
        "gumbel_max_draws")],
    ("wino_sampler", "wino_sampler.py:generate", {"against": "wino", **LLADA}),
    *[(f"wino_sampler_broken:{name}", f"wino_sampler_broken.py:{name}", {"against": "wino", **LLADA}) for name in (
        "non_strict_back_threshold", "revokes_prompt_tokens", "no_verification_block")],
    ("wino_sampler_broken:revokes_same_step_drafts/S", "wino_sampler_broken.py:revokes_same_step_drafts",
     {"against": "wino", **LLADA, "tier": "S", "samples": 300, "max_examples": 2}),
    ("editing_sampler", "editing_sampler.py:generate", {"against": "editing", **LLADA}),
    *[(f"editing_sampler_broken:{name}", f"editing_sampler_broken.py:{name}", {"against": "editing", **LLADA})
      for name in ("non_strict_editing_threshold", "edits_prompt_tokens", "edits_unchanged_tokens", "no_post_steps")],
    ("sdar_sampler", "sdar_sampler.py:generate", SDAR),
    *[(f"sdar_sampler_broken:{name}", f"sdar_sampler_broken.py:{name}", SDAR) for name in (
        "sees_the_next_block", "stores_before_final", "dynamic_threshold_on_committed")],
    ("sdar_sampler_broken:row_zero_sample_for_every_row", "sdar_sampler_broken.py:row_zero_sample_for_every_row",
     {**SDAR, "max_batch": 2}),
    ("llada2_sampler", "llada2_sampler.py:generate", LLADA2),
    *[(f"llada2_sampler_broken:{name}", f"llada2_sampler_broken.py:{name}", LLADA2) for name in (
        "uncapped_steps", "commits_after_schedule", "ranks_by_position", "stops_at_first_eos")],
    ("own_model:hooked_generate", "own_model.py:hooked_generate",
     {"against": "llada", **LLADA, "candidate_model": str(EXAMPLES / "own_model.py") + ":load"}),
    ("own_model:prompt_feature_cache/A", "own_model.py:prompt_feature_cache",
     {"against": "llada", **LLADA, "tier": "A", "candidate_model": str(EXAMPLES / "own_model.py") + ":load"}),
]
RENAMED = {"upstream_defects": "official_defects"}  # former result fields, compared under their new names
COMMANDS = [("verify --quick", ["verify", "--quick", "--quiet"]),
            ("exactness --quick", ["exactness", "--quick", "--quiet"])]


def timeless(value):
    """``value`` without the keys that hold a time or a speed (and without float noise below 1e-12)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not any(word in k.lower() for word in TIMING)}
    if isinstance(value, (list, tuple)):
        return [timeless(v) for v in value]
    return value


def check_entry(spec: str, arguments: dict, trials: int) -> dict:
    from veridec.testing import check_decoder, load_candidate

    arguments = {"max_examples": trials, **arguments}
    sys.path.insert(0, str(EXAMPLES))
    try:
        result = check_decoder(load_candidate(str(EXAMPLES / spec)), **arguments)
    finally:
        sys.path.remove(str(EXAMPLES))
    data = result.to_dict()
    return timeless({key: data[key] for key in ("passed", "trials", "numeric_ties", "skipped", "official_defects",
                                                "knobs", "knob_failures", "trials_to_detection", "failure",
                                                "first_failing_case", "metrics") if key in data})


def command_entry(words: list[str]) -> dict:
    """A ``veridec`` command's exit code and its JSON results (timing dropped)."""
    import tempfile

    from veridec.harness.cli import main

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main([*words, "--out", str(out)])
        files = {path.name: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}
    return timeless({"exit": code, "files": files})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the snapshot, one JSON line per entry (resumed when it exists)")
    parser.add_argument("--trials", type=int, default=40, help="cases per tier E / A check (default 40)")
    parser.add_argument("--only", action="append", default=[], help="entries whose name contains this text")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                        help="compare two snapshots; exit 1 where an entry differs or is missing")
    return parser


def compare(before: Path, after: Path) -> int:
    a, b = (read(path) for path in (before, after))
    differ = [name for name in a if name in b and a[name] != b[name]]
    missing = [name for name in a if name not in b] + [name for name in b if name not in a]
    for name in differ:
        print(f"DIFFERS {name}\n  before: {json.dumps(a[name])[:1500]}\n  after:  {json.dumps(b[name])[:1500]}")
    for name in missing:
        print(f"MISSING {name} (in one snapshot only)")
    print(f"{len(a) - len(differ) - len([n for n in a if n not in b])} of {len(a)} entries equal, "
          f"{len(differ)} differ, {len(missing)} in one snapshot only")
    return 1 if differ or missing else 0


def read(path: Path) -> dict:
    if not path.exists():
        return {}
    entries = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {entry["name"]: _renamed(entry["result"]) for entry in entries}


def _renamed(result: dict) -> dict:
    """A snapshot taken before a field was renamed, under the new name (``upstream_defects``: ``official_defects``)."""
    return {RENAMED.get(key, key): value for key, value in result.items()}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        raise SystemExit("--out FILE is needed (or --compare BEFORE AFTER)")
    torch.set_num_threads(1)
    done = read(args.out)
    entries = [(name, lambda spec=spec, arguments=arguments: check_entry(spec, arguments, args.trials))
               for name, spec, arguments in CHECKS]
    entries += [(name, lambda words=words: command_entry(words)) for name, words in COMMANDS]
    for name, run in entries:
        if name in done or (args.only and not any(text in name for text in args.only)):
            continue
        started = time.perf_counter()
        result = run()
        with args.out.open("a") as file:
            file.write(json.dumps({"name": name, "result": result}, default=str) + "\n")
        print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
