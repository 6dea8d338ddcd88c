"""The spec-oracle tests' Hypothesis profile: how many drawn cases each test rejects, and the deep run.

    python -m tools.oracle_profile --out benchmarks/oracle-rejections.md             # the ci profile, ~2 min
    python -m tools.oracle_profile --profile deep --examples 1000 --out benchmarks/oracle-deep-profile.md

It runs pytest on the spec-oracle test files (``tests/test_spec_oracles_*.py``, or the files given) in one
process under a Hypothesis profile of ``tests/conftest.py`` and counts, per test, through Hypothesis's
observability callbacks, every generated test case by its outcome: passed, failed, rejected by the test
(``assume`` or a strategy's ``filter``: the test's own rejections) and overruns ("exceeded maximum test case
size": the engine's own, which Hypothesis 6.170 produces even for a test of two plain integers). The rejection
rate is the test's rejections over the cases that reached the test (passed + failed + rejected); explicit
``@example``s are counted apart. ``--profile deep`` (random draws, no database, ``--examples`` each, at least
the test's own count) takes a seed (``--seed``, default a random one, printed and written) so a failure is
rerun with ``pytest --hypothesis-profile=deep --hypothesis-seed=SEED``. Exit 1 if any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from veridec.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
ORACLE_TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_spec_oracles_*.py"))
PROFILES = ("ci", "deep", "seeded")  # tests/conftest.py's; seeded and deep take --hypothesis-seed

OBSERVER = '''"""Written by tools.oracle_profile: counts each Hypothesis test case by outcome (ORACLE_PROFILE_OUT)."""

import collections
import json
import os
import threading

from hypothesis.internal.observability import add_observability_callback

COUNTS = collections.defaultdict(collections.Counter)
OUTCOMES = {}
LOCK = threading.Lock()


def _reason(observation):
    if observation.status != "gave_up":
        return observation.status
    reason = observation.status_reason
    if "exceeded maximum test case size" in reason:
        return "overrun"
    return "assume" if "assume()" in reason else "filter" if "unable to satisfy" in reason else "other"


def _observe(observation, thread=None):
    if observation.type != "test_case":
        return
    how = "explicit" if observation.how_generated.startswith("explicit") else "generated"
    with LOCK:
        COUNTS[observation.property][f"{how}:{_reason(observation)}"] += 1


add_observability_callback(_observe, all_threads=True)
# HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY_NOCOVER also makes Hypothesis append every observation to .hypothesis/
# (megabytes a run): that writer is taken off again, the counts above are all this needs.
_hypothesis_observability = __import__("hypothesis.internal.observability", fromlist=["_"])
_writer = getattr(_hypothesis_observability, "_deliver_to_file", None)
if _writer in getattr(_hypothesis_observability, "_callbacks_all_threads", []):
    _hypothesis_observability._callbacks_all_threads.remove(_writer)


def pytest_runtest_logreport(report):
    if report.when == "call" or report.failed or report.skipped:
        previous = OUTCOMES.get(report.nodeid, {"outcome": "passed", "seconds": 0.0})
        outcome = report.outcome if previous["outcome"] == "passed" else previous["outcome"]
        OUTCOMES[report.nodeid] = {"outcome": outcome, "seconds": previous["seconds"] + report.duration}
    if report.when == "teardown":  # after every test: a run stopped at its timeout keeps what it measured
        _save()


def _save():
    path = os.environ["ORACLE_PROFILE_OUT"]
    with open(path + ".tmp", "w") as out:
        json.dump({"counts": {k: dict(v) for k, v in COUNTS.items()}, "outcomes": OUTCOMES}, out, indent=1)
    os.replace(path + ".tmp", path)


def pytest_sessionfinish(session, exitstatus):
    _save()
'''


def run(files: list[str], profile: str, seed: int | None, examples: int, extra: list[str],
        timeout: float | None = None) -> dict:
    """pytest on ``files`` under ``profile`` in one process, stopped after ``timeout`` seconds (rc None; what ran is
    kept); {"counts", "outcomes", "seconds", "rc", "command"}."""
    with tempfile.TemporaryDirectory(prefix="oracle-profile-") as folder:
        Path(folder, "_oracle_observer.py").write_text(OBSERVER)
        out = Path(folder, "out.json")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")])),
               "ORACLE_PROFILE_OUT": str(out), "OMP_NUM_THREADS": "1", "VERIDEC_DEEP_EXAMPLES": str(examples),
               "HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY_NOCOVER": "1"}  # observing without its line tracing (6x slower)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "_oracle_observer", "-p", "no:cacheprovider",
                   f"--hypothesis-profile={profile}", *([f"--hypothesis-seed={seed}"] if seed is not None else []),
                   *extra, *files]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
        try:
            rc = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()
            rc = None
        except BaseException:
            os.killpg(process.pid, signal.SIGTERM)
            raise
        seconds = time.perf_counter() - started
        data = json.loads(out.read_text()) if out.exists() else {"counts": {}, "outcomes": {}}
    return {**data, "seconds": seconds, "rc": rc, "command": " ".join(command[1:])}


def rows(result: dict) -> list[dict]:
    """One row per Hypothesis test (the observed ``property``, a pytest node id): counts and rejection rate."""
    table = []
    for test, counts in sorted(result["counts"].items()):
        generated = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("generated:")}
        reached = sum(v for k, v in generated.items() if k != "overrun")
        rejected = generated.get("assume", 0) + generated.get("filter", 0) + generated.get("other", 0)
        explicit = sum(v for k, v in counts.items() if k.startswith("explicit:"))
        outcome = next((o for node, o in result["outcomes"].items() if node == test), {"outcome": "?", "seconds": 0})
        table.append({"test": test, "passed": generated.get("passed", 0), "failed": generated.get("failed", 0),
                      "assume": generated.get("assume", 0), "filter": generated.get("filter", 0),
                      "overrun": generated.get("overrun", 0), "explicit": explicit,
                      "rejection": rejected / reached if reached else 0.0, "outcome": outcome["outcome"],
                      "seconds": outcome["seconds"]})
    return table


def render(result: dict, args, header: str) -> str:
    table = rows(result)
    failed = sorted(node for node, o in result["outcomes"].items() if o["outcome"] == "failed")
    worst = max((r["rejection"] for r in table), default=0.0)
    lines = [f"# {header}", "", f"`python -m tools.oracle_profile {' '.join(args.argv)}`: {args.started} UTC, "
             f"commit {args.commit}, profile `{args.profile}`"
             + (f", seed {args.seed}" if args.seed is not None else "")
             + (f", {args.examples} examples a test (at least)" if args.profile == "deep" else "")
             + f"; pytest `{result['command']}` "
             + (f"exit {result['rc']}" if result["rc"] is not None else "STOPPED at the --timeout: the tests after "
                "the last row did not run") + f", {result['seconds']:.0f} s wall on "
             f"{os.cpu_count()} CPUs (one process, one thread).", "",
             f"**{len(table)} Hypothesis tests, {sum(r['passed'] for r in table)} passing generated cases, "
             f"{len(failed)} failed test(s); highest rejection rate {100 * worst:.1f}%.**"
             + (" Failed: " + ", ".join(f"`{n}`" for n in failed) + "." if failed else ""), "",
             "Rejected = the test's own `assume` or a strategy `filter` gave up; rate = rejected / (passed + failed "
             "+ rejected). Overruns are the engine's (see the tool's docstring), not counted in the rate. Explicit: "
             "the `@example`s run.", "",
             "| test | passed | failed | assume | filter | overrun | explicit | rejection | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| `{r['test']}` | {r['passed']} | {r['failed']} | {r['assume']} | {r['filter']} | "
                     f"{r['overrun']} | {r['explicit']} | {100 * r['rejection']:.1f}% | {r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.oracle_profile", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="test files (default: tests/test_spec_oracles_*.py)")
    parser.add_argument("--profile", choices=PROFILES, default="ci", help="tests/conftest.py's Hypothesis profile")
    parser.add_argument("--seed", type=int, help="--hypothesis-seed for deep and seeded (default: a random one)")
    parser.add_argument("--examples", type=int, default=1000, help="deep: examples per test (at least the test's own)")
    parser.add_argument("--timeout", type=float, help="stop pytest after this many seconds and report what ran")
    parser.add_argument("--out", help="write the markdown report here (default: print it)")
    parser.add_argument("--json", help="also write the raw counts as JSON")
    parser.add_argument("--title", default=None, help="the report's title")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    if args.examples < 1:
        raise SystemExit(f"--examples must be at least 1, got {args.examples}")
    if args.seed is None and args.profile != "ci":
        args.seed = random.SystemRandom().randrange(2**32)
    args.started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    args.commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip() or "unknown"
    print(f"profile {args.profile}" + (f", seed {args.seed}" if args.seed is not None else ""), flush=True)
    result = run(args.files or ORACLE_TESTS, args.profile, args.seed, args.examples, [], args.timeout)
    title = args.title or ("Spec-oracle tests: deep profile" if args.profile == "deep"
                           else "Spec-oracle tests: rejection rates")
    text = render(result, args, title)
    if args.out:
        write_text_atomic(args.out, text)
    else:
        print(text)
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=1))
    failed = any(o["outcome"] == "failed" for o in result["outcomes"].values())
    return 0 if result["rc"] == 0 and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
