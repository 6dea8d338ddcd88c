"""Branch coverage of the rule code by the independent truths alone: the spec-oracle and golden tests.

    python -m tools.oracle_coverage --out benchmarks/oracle-coverage.md     # two pytest runs, ~15 min on one thread

Runs coverage.py (``--branch``) over ``veridec/rules``, ``veridec/guidance``, ``reference`` and ``optimized`` with
only the spec-oracle tests (``tests/test_spec_oracles_*.py``) and the golden-trace tests (``GOLDEN``), twice: under
the ci profile (what CI's draws reach) and under the explicit profile (tests/conftest.py: no generated case, only
``@example``s, grids and plain tests: what the tests reach on purpose, whatever the draws). The report lists per
file the branches and how many each run reached, then every branch the ci run leaves unreached in the rules, the
guidance and the decoders' step functions, each with its stated reason (``REASONS``) or "NO REASON", and the
branches reached only by draws. Exit 1 when an unreached branch of the rules or the guidance has no reason.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from veridec.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("veridec/rules", "veridec/guidance", "reference", "optimized")
HELD = ("veridec/rules/", "veridec/guidance/")  # every unreached branch here needs a reason
ORACLE_TESTS = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_spec_oracles_*.py")))
GOLDEN = ("tests/test_golden.py", "tests/test_golden_check.py", "tests/test_block_diffusion_golden.py",
          "tests/test_llada2_golden.py", "tests/test_wino.py", "tests/test_editing.py", "tests/test_block_diffusion.py")

# Why a branch the oracle and golden tests never take is left so: {(path, the branch line's text stripped): reason}.
REFUSAL = ("an argument refusal (a ValueError naming the parameter), not a decision of the clause: the oracles are "
           "fed valid ")
HF_REWARD = ("the transformers reward adapter (G2 with a local SequenceClassification model): the oracles hold "
             "G2-G6 with the linear reward; the adapter is tests/test_guidance.py's and test_reward_training.py's")
SPECULATIVE = "trees; tests/test_speculative.py"
REASONS: dict[tuple[str, str], str] = {
    ("veridec/guidance/fastguide.py", "if stuck:  # the first candidate always commits (GF1): a step without a commit "
     "would repeat forever"): "unreachable while GF1 holds (a_1 always commits, the grid checks it): the guard turns "
                              "a broken line into an error instead of an endless loop (tools/mutants.py "
                              "fastguide-first-candidate-may-defer raises it)",
    ("veridec/guidance/guide.py", "if table.shape[0] < logits.shape[-1]:  # a model vocabulary padded past the "
     "tokenizer: zero embeddings"): "a dLLM vocabulary padded past the reward's embedding table (the shipped models): "
                                    "the oracles' tables cover their vocabularies; tests/test_guidance.py",
    ("veridec/guidance/guide.py", "if not torch.isfinite(loss):"): REFUSAL + "rewards (finite scores)",
    ("veridec/guidance/guide.py", "if torch.isnan(phi.grad).any():"): REFUSAL + "rewards (finite gradients)",
    ("veridec/guidance/reward.py", "if embedding.dim() != 2 or weight.shape != embedding.shape[1:]:"):
        REFUSAL + "embeddings; tests/test_guidance.py",
    ("veridec/guidance/reward.py", 'if unmatched not in ("zero", "unk"):'): HF_REWARD,
    ("veridec/guidance/reward.py", 'if getattr(model.config, "num_labels", 0) < 1 or not hasattr(model, "score"):'):
        HF_REWARD,
    ("veridec/guidance/reward.py", 'if not getattr(tokenizer, "chat_template", None):'): HF_REWARD,
    ("veridec/guidance/reward.py", "if PLACEHOLDER not in text:"): HF_REWARD,
    ("veridec/guidance/reward.py", "if self.prefix is None:"): HF_REWARD,
    ("veridec/guidance/reward.py", "if len(self.prefix) != response_embeddings.shape[0]:"): HF_REWARD,
    ("veridec/guidance/reward.py", 'if unmatched == "unk" and unk is None:'): HF_REWARD,
    ("veridec/guidance/reward.py", 'if not (folder / "config.json").exists():'): HF_REWARD,
    ("veridec/guidance/reward.py", 'if not any(a.endswith("ForSequenceClassification") for a in architectures):'):
        HF_REWARD,
    ("veridec/rules/drafts.py", "if self.alternatives not in ALTERNATIVES:"): REFUSAL + SPECULATIVE,
    ("veridec/rules/drafts.py", "if self.width > self.depth:"): REFUSAL + SPECULATIVE,
    ("veridec/rules/drafts.py", "if self.depth > block_length - 1:"): REFUSAL + SPECULATIVE,
    ("veridec/rules/dream.py", 'if self.alg == "origin":'): REFUSAL + "settings (tokens_per_step with alg origin)",
    ("veridec/rules/editing.py", "if top2.shape[-1] == 2:"):
        "unreachable with a mask token: a vocabulary holds the mask and at least one token, so the top-2 exists",
    ("veridec/rules/presets.py", "if name not in PRESETS:"):
        "preset(name) is the command line's lookup; the oracle test reads PRESETS itself "
        "(test_presets_are_the_oracle_presets); tests/test_parallel_rules.py refuses an unknown name",
    ("veridec/rules/sdar.py", 'if self.remasking_strategy == "entropy_bounded":'): REFUSAL + "settings",
    ("veridec/rules/sdar.py", "if self.eb_threshold is None:"): REFUSAL + "settings",
    ("veridec/rules/sdar.py", 'if isinstance(stops, (str, bytes)) or not hasattr(stops, "__iter__"):'):
        REFUSAL + "settings",
    ("veridec/rules/sdar.py", "if not torch.isfinite(logits).any(dim=-1).all():"): REFUSAL + "logits",
    ("veridec/rules/wino.py", "if taken >= bound:"):
        "unreachable while WN6 holds (a block ends within as many forwards as it started with candidates): the "
        "guard of a broken rule",
    ("veridec/rules/wino.py", "if commit.numel():"):
        "a WINO step never commits nothing: WN4.4 commits at least the best candidate and max_accept is at least 5",
}


def measure(profile: str, tests: list[str], folder: Path) -> dict:
    """coverage run --branch of pytest on ``tests`` under ``profile``; coverage's JSON report (files -> data)."""
    data, report = folder / f"{profile}.coverage", folder / f"{profile}.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COVERAGE_FILE": str(data)}
    command = [sys.executable, "-m", "coverage", "run", "--branch", f"--source={','.join(SOURCES)}", "-m", "pytest",
               "-q", "-p", "no:cacheprovider", f"--hypothesis-profile={profile}", *tests]
    started = time.perf_counter()
    rc = subprocess.run(command, cwd=ROOT, env=env).returncode
    seconds = time.perf_counter() - started
    subprocess.run([sys.executable, "-m", "coverage", "json", "-q", "-o", str(report)], cwd=ROOT, env=env, check=True)
    return {"rc": rc, "seconds": seconds, "files": json.loads(report.read_text())["files"]}


def enclosing_functions(path: str) -> dict[int, str]:
    """line -> the innermost function (qualified name) whose body holds it, for one file."""
    tree = ast.parse((ROOT / path).read_text())
    where: dict[int, str] = {}

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    for line in range(child.lineno, child.end_lineno + 1):
                        where[line] = name
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return where


def is_held(path: str, function: str) -> bool:
    """The rules and the guidance entirely; in the decoders (reference/, optimized/), their step functions."""
    return path.startswith(HELD) or "step" in function.rsplit(".", 1)[-1].lower()


def unreached(result: dict) -> list[dict]:
    """Every branch the run left unreached: path, line, destination (-1 and below: the function's exit), the line's
    text, its function, whether it is held to a reason, and the reason."""
    rows = []
    for path, data in sorted(result["files"].items()):
        lines = (ROOT / path).read_text().splitlines()
        functions = enclosing_functions(path)
        for source, dest in data.get("missing_branches", []):
            text = lines[source - 1].strip()
            function = functions.get(source, "<module>")
            rows.append({"path": path, "line": source, "dest": dest, "text": text, "function": function,
                         "held": is_held(path, function), "reason": REASONS.get((path, text))})
    return rows


def branch_counts(result: dict) -> dict[str, tuple[int, int]]:
    return {path: (d["summary"]["num_branches"], d["summary"]["covered_branches"])
            for path, d in result["files"].items()}


def render(ci: dict, explicit: dict, args) -> tuple[str, int]:
    """The markdown report and the number of held branches left unreached without a reason."""
    counts, on_purpose = branch_counts(ci), branch_counts(explicit)
    missing = unreached(ci)
    ci_missing = {(r["path"], r["line"], r["dest"]) for r in missing}
    by_draws = [r for r in unreached(explicit) if (r["path"], r["line"], r["dest"]) not in ci_missing and r["held"]]
    unexplained = [r for r in missing if r["held"] and not r["reason"] and r["path"].startswith(HELD)]
    total = sum(n for n, _ in counts.values())
    lines = ["# Branch coverage of the rule code by the oracle and golden tests", "",
             f"`python -m tools.oracle_coverage {' '.join(args.argv)}`: {args.started} UTC, commit {args.commit}, "
             f"coverage.py branch coverage of {', '.join(f'`{s}/`' for s in SOURCES)} by "
             f"{len(ORACLE_TESTS)} spec-oracle test files and {len(GOLDEN)} golden-trace test files "
             f"({', '.join(f'`{t}`' for t in (*ORACLE_TESTS, *GOLDEN))}). Two runs: the ci profile "
             f"(pytest exit {ci['rc']}, {ci['seconds']:.0f} s) and the explicit profile, no generated case: "
             f"`@example`s, grids and plain tests only (pytest exit {explicit['rc']}, "
             f"{explicit['seconds']:.0f} s).", "",
             f"**{total - len(missing)} / {total} branches reached by the ci run "
             f"({sum(c for _, c in on_purpose.values())} by the explicit run alone); {len(missing)} unreached, "
             f"{sum(r['held'] for r in missing)} of them in the rules, the guidance or a decoder's step function, "
             f"{len(unexplained)} of those in the rules or the guidance without a stated reason.**", "",
             "| file | branches | reached (ci) | reached on purpose (explicit) |", "|---|---|---|---|"]
    for path, (n, covered) in sorted(counts.items()):
        lines.append(f"| `{path}` | {n} | {covered} | {on_purpose.get(path, (n, 0))[1]} |")
    lines += ["", "## Unreached branches (ci run)", "",
              "Held: the rules, the guidance, and the decoders' step functions (a function whose name holds `step`). "
              "Destination: the line the untaken branch goes to (negative: the function's exit).", "",
              "| place | function | line | to | held | reason |", "|---|---|---|---|---|---|"]
    for r in missing:
        lines.append(f"| `{r['path']}:{r['line']}` | `{r['function']}` | `{_cell(r['text'])}` | {r['dest']} | "
                     f"{'yes' if r['held'] else 'no'} | {_cell(r['reason'] or ('NO REASON' if r['held'] else ''))} |")
    lines += ["", "## Held branches reached only by the draws", "",
              "Reached by the ci run's generated cases, by no `@example`, grid or plain test: each holds only while "
              "the derandomized draws happen to take it.", ""]
    lines += [f"- `{r['path']}:{r['line']}` -> {r['dest']} in `{r['function']}`: `{_cell(r['text'])}`"
              for r in by_draws] or ["None."]
    return "\n".join(lines) + "\n", len(unexplained)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.oracle_coverage", description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the markdown report here (default: print it)")
    parser.add_argument("--json", help="also write both runs' unreached branches as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    args.commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() or "unknown"
    tests = [*ORACLE_TESTS, *GOLDEN]
    with tempfile.TemporaryDirectory(prefix="oracle-coverage-") as folder:
        ci = measure("ci", tests, Path(folder))
        explicit = measure("explicit", tests, Path(folder))
    text, unexplained = render(ci, explicit, args)
    if args.out:
        write_text_atomic(args.out, text)
    else:
        print(text)
    if args.json:
        write_text_atomic(args.json, json.dumps({"ci": unreached(ci), "explicit": unreached(explicit)}, indent=1))
    return 1 if unexplained or ci["rc"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
