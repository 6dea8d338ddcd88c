"""The mutation gate: does the test suite catch realistic single-point bugs? (Not run in CI: about an hour on 2
cores for the whole catalogue.)

    python -m tools.mutation                       # every mutant of tools/mutants.py
    python -m tools.mutation --only factor-n-instead-of-n-plus-1 --only pmi-sign
    python -m tools.mutation --full                # the whole suite for every mutant
    python -m tools.mutation --list                # the catalogue
    python -m tools.mutation --catalogue my_bugs.py --report my_bugs.md   # your own catalogue

For each mutant: copy the repository (its tracked files as they are in the working tree, no .venv, no .git)
from one snapshot taken at the start into a temporary directory, apply the patch there (``MutationError`` unless
the original text occurs exactly once), and run pytest in the copy: first the mutant's related test files
(``-x --hypothesis-profile=ci -p no:cacheprovider``, one torch thread, ``OMP_WAIT_POLICY=PASSIVE``), then,
only if they all pass, the rest of the suite (``--full``: the whole suite directly). A run past its timeout
(a mutant can make a decode loop forever) is killed with its process group and counts as a kill ("timeout").
The first failing test is the mutant's killer; it is then run alone on an unmutated copy of the same snapshot,
and a kill whose test also fails there is reported as inconclusive, not as a kill (other people's half-written
files end up in the copies too). The main tree is only read.

The copy's code is what runs: the venv's editable install maps ``veridec.reference`` etc. to the main tree with
a meta-path finder that PYTHONPATH alone does not beat, so each run gets a ``sitecustomize`` (on PYTHONPATH,
inherited by subprocesses) that puts a finder for the copy's packages first, and a pytest plugin that imports
every package and the mutated module, checks that their files lie in the copy (a usage error otherwise), checks
every ``veridec`` module again at the end of the session, and records the first failure and the running test.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import tomllib

from veridec.files import write_text_atomic

from tools.mutants import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[1]  # the repository under test (only read)
DEFAULT_REPORT = ROOT / "benchmarks" / "mutation-all.md"
SEEDS_REPORT = ROOT / "benchmarks" / "mutation-seeds.md"  # the whole gate under --seeds
PYTEST_OPTIONS = ("-x", "--hypothesis-profile=ci", "-p", "no:cacheprovider", "-p", "_mutation_probe", "-q")
SEEDED_PROFILE = "seeded"  # tests/conftest.py: random draws from --hypothesis-seed, no example database


def pytest_options(seed: int | None) -> tuple[str, ...]:
    """PYTEST_OPTIONS; with a ``seed``, the seeded profile at that --hypothesis-seed instead of the derandomized ci
    one (``--seeds N``: the same mutant under other draws)."""
    if seed is None:
        return PYTEST_OPTIONS
    profile = (f"--hypothesis-profile={SEEDED_PROFILE}", f"--hypothesis-seed={seed}")
    return tuple(o for option in PYTEST_OPTIONS for o in (profile if option == PYTEST_OPTIONS[1] else (option,)))
# Checks the catalogue against its own tree, which every mutant changes: never part of a mutant's run.
ALWAYS_IGNORED = ("tests/test_mutation.py",)
RELATED_TIMEOUT = 120.0  # seconds; the slowest related selection passes in about 15 s on an idle 2-core machine
SUITE_TIMEOUT = 900.0  # the whole suite passes in about 170 s
KILL_GRACE = 5.0


class MutationError(RuntimeError):
    """A patch that cannot be applied: its original text does not occur exactly once."""


class ShimError(RuntimeError):
    """The copy's code was not what ran (the import shim failed): every result of the run would be void."""


# --------------------------------------------------------------------------------------------- the patch
def locate(mutant: Mutant, root: Path = ROOT) -> tuple[int, int]:
    """(occurrences of the original text in the mutant's file under ``root``, line of the first one or 0)."""
    path = root / mutant.path
    if not path.is_file():
        return 0, 0
    text = path.read_bytes().decode()
    where = text.find(mutant.original)
    return text.count(mutant.original), (text[:where].count("\n") + 1 if where >= 0 else 0)


def apply(mutant: Mutant, root: Path) -> int:
    """Patch the copy at ``root`` in place; returns the patched line. Raises MutationError unless the
    original text occurs exactly once."""
    path = root / mutant.path
    if not path.is_file():
        raise MutationError(f"{mutant.name}: {mutant.path} does not exist under {root}")
    text = path.read_bytes().decode()
    count = text.count(mutant.original)
    if count != 1:
        raise MutationError(f"{mutant.name}: the original text occurs {count} times in {mutant.path} "
                            f"(it must occur exactly once):\n{mutant.original}")
    line = text[:text.find(mutant.original)].count("\n") + 1
    path.write_bytes(text.replace(mutant.original, mutant.replacement).encode())
    return line


# ----------------------------------------------------------------------------------- copies of the tree
def repository_files(root: Path = ROOT, untracked: bool = False) -> list[str]:
    """Repository-relative paths of the tracked files (plus untracked, not ignored ones with ``untracked``)
    that exist in the working tree; read with ``git ls-files``, which changes nothing."""
    command = ["git", "-C", str(root), "ls-files", "-z", "--cached"]
    if untracked:
        command += ["--others", "--exclude-standard"]
    try:
        listed = subprocess.run(command, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as error:
        raise RuntimeError(f"cannot list the repository's files with git: {error}") from error
    skip = (".git/", ".venv/")
    return sorted({f for f in listed if f and not f.startswith(skip) and (root / f).is_file()})


def copy_files(source: Path, dest: Path, files: list[str]) -> None:
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target)


def package_dirs(repo: Path) -> dict[str, str]:
    """pyproject's package-dir mapping, resolved in ``repo``: {"veridec.reference": ".../reference", ...}."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {package: str((repo / folder).resolve()) for package, folder in config["package-dir"].items()}


def module_name(path: str, packages: dict[str, str], repo: Path) -> str | None:
    """The import name of the repository file ``path`` (None when no package holds it)."""
    file = (repo / path).resolve()
    best = None
    for package, folder in packages.items():
        try:
            parts = file.relative_to(folder).parts
        except ValueError:
            continue
        if best is None or len(parts) < len(best[1]):
            best = (package, parts)
    if best is None or not path.endswith(".py"):
        return None
    package, parts = best
    tail = [*parts[:-1], *([] if parts[-1] == "__init__.py" else [parts[-1][:-3]])]
    return ".".join([package, *tail])


SITECUSTOMIZE = '''"""Written by tools.mutation: ``veridec`` and its mapped packages are imported from the
copy below, not from the editable install of the main tree (whose finder, appended to sys.meta_path, maps
veridec.reference etc. to the main tree whatever PYTHONPATH says)."""

import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path

MAPPING = {mapping!r}


class CopyFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            folder = MAPPING[fullname]
            return spec_from_file_location(fullname, str(Path(folder) / "__init__.py"),
                                           submodule_search_locations=[folder])
        parent = fullname.rpartition(".")[0]
        if parent in MAPPING:
            return PathFinder.find_spec(fullname, [MAPPING[parent]])
        return None

    @classmethod
    def invalidate_caches(cls):
        pass


sys.meta_path.insert(0, CopyFinder)
'''

PROBE_PLUGIN = '''"""Written by tools.mutation: a pytest plugin proving that the copy's code is what runs, and
recording the first failure and the test running now (for timeouts) in MUTATION_PROBE (JSON)."""

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ["MUTATION_ROOT"]).resolve()
PROBE = Path(os.environ["MUTATION_PROBE"])
CURRENT = Path(os.environ["MUTATION_PROBE"] + ".current")
STATE = {"imports": {}, "import_errors": {}, "outside": [], "first_failure": None, "finished": False}
DRAWS = {}  # node id of a failed test -> whether it is a Hypothesis test (its examples depend on the seed)


def _inside(file):
    try:
        Path(file).resolve().relative_to(ROOT)
        return True
    except ValueError:
        return False


def _outside():
    return sorted(f"{name} -> {module.__file__}" for name, module in list(sys.modules.items())
                  if (name == "veridec" or name.startswith("veridec.")) and getattr(module, "__file__", None)
                  and not _inside(module.__file__))


def _save():
    PROBE.write_text(json.dumps(STATE, indent=1))


def _error(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        lines = [line for line in str(crash.message).splitlines() if line.strip()]
        return lines[0][:300] if lines else ""
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors or lines or [""])[-1][:300]


def _record(nodeid, when, report):
    if STATE["first_failure"] is None:
        STATE["first_failure"] = {"nodeid": nodeid, "when": when, "error": _error(report),
                                  "hypothesis": DRAWS.get(nodeid, True)}
        _save()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed:
        DRAWS[report.nodeid] = hasattr(getattr(item, "obj", None), "hypothesis")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    for name in filter(None, os.environ.get("MUTATION_IMPORTS", "").split(",")):
        try:
            STATE["imports"][name] = importlib.import_module(name).__file__
        except Exception as error:  # a mutant may break its own module: collection reports that as a failure
            STATE["import_errors"][name] = f"{type(error).__name__}: {error}"
    STATE["outside"] = _outside()
    _save()
    if STATE["outside"]:
        raise pytest.UsageError("mutation shim failed, imported from outside the copy: " + "; ".join(STATE["outside"]))


def pytest_runtest_logstart(nodeid, location):
    CURRENT.write_text(nodeid)


def pytest_runtest_logreport(report):
    if report.failed:
        _record(report.nodeid, report.when, report)


def pytest_collectreport(report):
    if report.failed:
        _record(report.nodeid or "<collection>", "collect", report)


def pytest_sessionfinish(session, exitstatus):
    STATE["outside"] = _outside()
    STATE["finished"] = True
    _save()
'''


@dataclass
class PytestRun:
    selection: list[str]
    rc: int | None  # None: killed at the timeout
    seconds: float
    timed_out: bool
    first_failure: dict | None  # {"nodeid", "when", "error"}
    current: str | None  # the test running when the run ended (the hanging one after a timeout)
    probe: dict
    log: Path


LIVE: set[subprocess.Popen] = set()  # the pytest processes running now, in any job


class Sandbox:
    """A copy of the repository (``repo``) with its import shim (``shim``) under ``work``."""

    def __init__(self, work: Path, source: Path, files: list[str]):
        self.work, self.repo, self.shim = work, work / "repo", work / "shim"
        copy_files(source, self.repo, files)
        self.packages = package_dirs(self.repo)
        self.shim.mkdir(parents=True)
        (self.shim / "sitecustomize.py").write_text(SITECUSTOMIZE.format(mapping=self.packages))
        (self.shim / "_mutation_probe.py").write_text(PROBE_PLUGIN)
        self.runs = 0

    def env(self, probe: Path, imports: list[str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
        env.update(PYTHONPATH=str(self.shim), OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", MUTATION_ROOT=str(self.repo),
                   MUTATION_PROBE=str(probe), MUTATION_IMPORTS=",".join(imports))
        return env

    def pytest(self, selection: list[str], timeout: float, module: str | None = None,
               seed: int | None = None) -> PytestRun:
        """Run pytest on ``selection`` in the copy (under ``seed``'s profile, see ``pytest_options``); kill its
        process group after ``timeout`` seconds."""
        self.runs += 1
        tag = f"run{self.runs}"
        probe, log = self.work / f"{tag}.json", self.work / f"{tag}.log"
        imports = [*self.packages, *([module] if module else [])]
        command = [sys.executable, "-m", "pytest", *pytest_options(seed), *selection]
        started = time.perf_counter()
        with open(log, "wb") as out:
            process = subprocess.Popen(command, cwd=self.repo, env=self.env(probe, imports), stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            LIVE.add(process)
            try:
                rc, timed_out = process.wait(timeout=timeout), False
            except subprocess.TimeoutExpired:
                rc, timed_out = None, True
                stop(process)
            except BaseException:  # Ctrl-C: take the child's process group down too
                stop(process)
                raise
            finally:
                LIVE.discard(process)
        seconds = time.perf_counter() - started
        state = json.loads(probe.read_text()) if probe.exists() else {}
        current = Path(f"{probe}.current")
        run = PytestRun(selection, rc, seconds, timed_out, state.get("first_failure"),
                        current.read_text() if current.exists() else None, state, log)
        check_shim(run)
        return run


def stop(process: subprocess.Popen) -> None:
    """End the process group this runner started for ``process`` (TERM, then KILL after a grace period)."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def check_shim(run: PytestRun) -> None:
    """Void the whole run loudly if anything of ``veridec`` came from outside the copy."""
    if run.probe.get("outside"):
        raise ShimError(f"imports came from outside the copy ({run.log}): {run.probe['outside']}")
    if not run.timed_out and not run.probe:
        tail = run.log.read_text(errors="replace")[-2000:] if run.log.exists() else ""
        raise ShimError(f"the probe plugin did not run (pytest exit {run.rc}, {run.log}):\n{tail}")


# ----------------------------------------------------------------------------------------- one mutant
@dataclass
class Result:
    mutant: Mutant
    line: int
    status: str  # "killed", "survived", "inconclusive" (the killer fails unmutated too), "error", "seed-dependent"
    killer: str | None = None  # node id, "timeout" or None
    phase: str | None = None  # "related" or "suite": the run that decided
    detail: str = ""  # the failure's first line, the hanging test, or what went wrong
    seconds: float = 0.0
    runs: list[dict] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)  # --seeds: the seeds run
    seed_kills: list[int] = field(default_factory=list)  # --seeds: the seeds whose run killed it

    @property
    def by_timeout(self) -> bool:
        return self.status == "killed" and self.killer == "timeout"

    @property
    def counts_as_killed(self) -> bool:
        """A kill, stable or not; a seed-dependent kill that holds on one seed only is luck, a survivor."""
        return self.status == "killed" or self.status == "seed-dependent" and len(self.seed_kills) > 1

    def to_dict(self) -> dict:
        return {"name": self.mutant.name, "place": f"{self.mutant.path}:{self.line}", "area": self.mutant.area,
                "clause": self.mutant.clause, "description": self.mutant.description, "status": self.status,
                "killer": self.killer, "phase": self.phase, "detail": self.detail, "seconds": round(self.seconds, 1),
                "runs": self.runs, "seeds": self.seeds, "seed_kills": self.seed_kills}

    @classmethod
    def from_dict(cls, data: dict, mutant: Mutant) -> "Result":
        """A result read back from ``--json`` (``--resume``)."""
        return cls(mutant, int(data["place"].rsplit(":", 1)[1]), data["status"], data["killer"], data["phase"],
                   data["detail"], data["seconds"], data["runs"], data.get("seeds", []), data.get("seed_kills", []))


class Pristine:
    """An unmutated copy of the snapshot: does a killing test pass without the mutant? (cached per test)"""

    def __init__(self, work: Path, source: Path, files: list[str]):
        self.work, self.source, self.files, self.sandbox, self.verdicts = work, source, files, None, {}
        self.lock = threading.Lock()  # one copy, one run at a time, whatever the number of jobs

    def passes(self, nodeid: str, timeout: float, seed: int | None = None) -> bool:
        with self.lock:
            return self._passes(nodeid, timeout, seed)

    def _passes(self, nodeid: str, timeout: float, seed: int | None) -> bool:
        if (nodeid, seed) not in self.verdicts:
            if self.sandbox is None:
                self.sandbox = Sandbox(self.work, self.source, self.files)
            run = self.sandbox.pytest([nodeid], timeout, seed=seed)
            self.verdicts[nodeid, seed] = run.rc == 0
        return self.verdicts[nodeid, seed]


def suite_selection(mutant: Mutant, full: bool) -> list[str]:
    skipped = ALWAYS_IGNORED if full else (*mutant.tests, *ALWAYS_IGNORED)
    return ["tests", *(f"--ignore={path}" for path in skipped)]


def seed_list(options) -> list[int | None]:
    """The seeds each mutant runs under: ``--seeds N`` gives 1..N (the seeded profile); none: [None] (ci)."""
    count = getattr(options, "seeds", None)
    return list(range(1, count + 1)) if count else [None]


def run_mutant(mutant: Mutant, work: Path, snapshot: Path, files: list[str], options,
               pristine: Pristine | None) -> Result:
    """The mutant on its own copy, under each seed of ``seed_list`` (one gate run per seed), then combined."""
    started = time.perf_counter()
    sandbox = Sandbox(work, snapshot, files)
    line = apply(mutant, sandbox.repo)
    module = module_name(mutant.path, sandbox.packages, sandbox.repo)
    seeds, per_seed = seed_list(options), []
    for seed in seeds:
        if per_seed and seed_free_kill(per_seed[0]):  # the same kill under every seed: not rerun
            per_seed = [per_seed[0]] * len(seeds)
            per_seed[0].detail += " (a test that draws nothing from Hypothesis: the same kill on every seed)"
            break
        run = None
        if per_seed and per_seed[0].status == "killed" and per_seed[0].killer != "timeout":
            # the first seed's killer alone under this seed first: its draws do not depend on the tests before it
            run = run_phases(mutant, line, sandbox, module, options, pristine, seed, only=[per_seed[0].killer])
        if run is None or run.status not in ("killed", "inconclusive"):
            run = run_phases(mutant, line, sandbox, module, options, pristine, seed)
        per_seed.append(run)
    result = per_seed[0] if len(per_seed) == 1 else combine_seeds(per_seed, seeds)
    result.seconds = time.perf_counter() - started
    return result


def seed_free_kill(result: Result) -> bool:
    """A kill by a failing test that is not a Hypothesis test holds under every seed: under another seed the run
    either fails earlier (a kill) or reaches that test, which draws nothing from the seed, and fails again."""
    failure = result.runs[-1].get("first_failure") if result.runs else None
    return (result.status == "killed" and result.killer != "timeout" and failure is not None
            and failure.get("hypothesis") is False)


def combine_seeds(per_seed: list[Result], seeds: list[int]) -> Result:
    """One result from a mutant's runs under every seed: killed when every seed's run kills it, seed-dependent when
    some do (``counts_as_killed`` needs two), survived when none does; an error on any seed is an error."""
    kills = [seed for seed, r in zip(seeds, per_seed) if r.status == "killed"]
    first = next((r for r in per_seed if r.status == "error"), None) or next(
        (r for r in per_seed if r.status == "killed"), per_seed[0])
    runs = [run for i, r in enumerate(per_seed) if all(r is not q for q in per_seed[:i]) for run in r.runs]
    result = replace(first, runs=runs, seeds=list(seeds), seed_kills=kills)
    if first.status != "error":
        result.status = ("killed" if len(kills) == len(seeds) else "seed-dependent" if kills
                         else "inconclusive" if any(r.status == "inconclusive" for r in per_seed) else "survived")
    if result.status == "seed-dependent":
        missed = [seed for seed in seeds if seed not in kills]
        result.detail = f"seed(s) {', '.join(map(str, missed))} let it survive; " + result.detail
    return result


def run_phases(mutant: Mutant, line: int, sandbox: Sandbox, module: str | None, options, pristine: Pristine | None,
               seed: int | None, only: list[str] | None = None) -> Result:
    """One gate run of the patched copy under ``seed``: its related tests, then (unless they kill it) the rest;
    ``only``: these node ids alone (a kill under them is a kill of the whole run under that seed)."""
    started = time.perf_counter()
    related = ("related", only or list(mutant.tests), options.timeout)
    phases = [("suite", suite_selection(mutant, True), options.suite_timeout)] if options.full else [
        related, ("suite", suite_selection(mutant, False), options.suite_timeout)]
    if getattr(options, "related_only", False) or only:  # triage: the mutant's own tests only
        phases = [related]
    result = Result(mutant, line, "survived")
    for phase, selection, timeout in phases:
        run = sandbox.pytest(selection, timeout, module, seed)
        result.runs.append({"phase": phase, "rc": run.rc, "seconds": round(run.seconds, 1), "seed": seed,
                            "timed_out": run.timed_out, "first_failure": run.first_failure, "current": run.current})
        result.phase = phase
        if run.timed_out:
            result.status, result.killer = "killed", "timeout"
            result.detail = f"after {timeout:.0f} s" + (f" in `{run.current}`" if run.current else " (collecting)")
            suspect = run.current
        elif run.rc == 0:
            continue
        elif run.rc in (1, 2) and run.first_failure:
            failure = run.first_failure
            result.status, result.killer = "killed", failure["nodeid"]
            result.detail = (f"{failure['when']}: " if failure["when"] != "call" else "") + failure["error"]
            suspect = failure["nodeid"]
        else:
            result.status = "error"
            result.detail = f"pytest exit {run.rc} without a failing test (log {run.log}, kept with --keep)"
            break
        if pristine is not None and suspect and not pristine.passes(suspect, timeout, seed):
            result.status = "inconclusive"
            result.detail = "it fails without the mutant too; " + result.detail
        break
    else:
        result.phase = None
    result.seconds = time.perf_counter() - started
    return result


# ----------------------------------------------------------------------------------------------- report
def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _killed_by(result: Result) -> str:
    seeds = ""
    if result.seeds:
        seeds = f" [killed on seeds {', '.join(map(str, result.seed_kills)) or 'none'} of {len(result.seeds)}]"
    return _killer_text(result) + seeds


def _killer_text(result: Result) -> str:
    if result.status == "survived":
        return "survived"
    if result.status == "error":
        return f"error: {_cell(result.detail)}"
    if result.killer == "timeout":  # the detail names the hanging test: never shortened
        text = f"timeout ({result.phase}; {_cell(result.detail)})"
    else:
        detail = " ".join(result.detail.split())
        detail = detail if len(detail) <= 90 else detail[:87] + "..."
        text = f"`{result.killer}` ({result.phase}; {_cell(detail)})"
    prefix = {"inconclusive": "inconclusive: ", "seed-dependent": "seed-dependent: "}.get(result.status, "")
    return prefix + text


def summary(results: list[Result]) -> dict:
    """Counts; with seeds, a seed-dependent kill counts as killed on two seeds or more, as survived on one."""
    total = len(results)
    killed = [r for r in results if r.counts_as_killed]
    by_test = [r for r in killed if r.killer != "timeout"]
    return {"total": total, "killed": len(killed), "by_pytest": len(by_test), "timeouts": len(killed) - len(by_test),
            "by_related": sum(r.phase == "related" for r in by_test),
            "stable": sum(r.status == "killed" for r in results),
            "seed_dependent": [r.mutant.name for r in results if r.status == "seed-dependent"],
            "survived": [r.mutant.name for r in results if r.status == "survived"
                         or r.status == "seed-dependent" and not r.counts_as_killed],
            "inconclusive": [r.mutant.name for r in results if r.status == "inconclusive"],
            "errors": [r.mutant.name for r in results if r.status == "error"],
            "seconds": round(sum(r.seconds for r in results), 1)}


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(results: list[Result], header: dict, done: bool) -> str:
    s = summary(results)
    n = s["total"]
    lines = ["# Mutation gate", "",
             f"`{header['command']}` ({'finished' if done else 'in progress'}), {header['started']} UTC, commit "
             f"{header['commit']} plus the working tree's changes ({header['files']} {header['which']} files, "
             f"copied once at the start), Python {header['python']}, {header['machine']}.", "",
             f"Catalogue: {header['catalogue']} mutants (`{header.get('catalogue_file', 'tools/mutants.py')}`); "
             f"this run: {n}"
             + (f" (`--only`: {header['only']})" if header["only"] else "") + ". "
             + ("Every mutant runs the whole suite (`--full`)." if header["full"] else
                "Triage: each mutant runs its related test files only (`--related-only`)."
                if header.get("related_only") else
                "Each mutant runs its related test files first, and the rest of the suite only if they pass.")
             + f" pytest `{' '.join(header['pytest'])}`; timeouts {header['timeout']:.0f} s (related) and "
             f"{header['suite_timeout']:.0f} s (suite), a timeout counts as a kill. "
             + ("A killing test is rerun alone on an unmutated copy; a kill whose test fails there too is "
                "inconclusive." if header["verify"] else "Kills were not rerun on an unmutated copy.")
             + (f" Every mutant ran under {header['seeds']} seeds (`--hypothesis-profile={SEEDED_PROFILE} "
                f"--hypothesis-seed=S`, S = 1..{header['seeds']}: random draws, no example database) instead of the "
                "derandomized ci profile: killed = killed on every seed; seed-dependent = on some (counted as killed "
                "on two seeds or more, as a survivor on one)." if header.get("seeds") else "")
             + (f" {header['resumed']} result(s) were read back from {resumed_from(header['resume'])} (`--resume`; "
                "a later file's result replaces an earlier one's)."
                if header.get("resumed") else ""), "",
             "| mutant | place | description | killed by | seconds (wall) |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| `{r.mutant.name}` | `{r.mutant.path}:{r.line}` | {_cell(r.mutant.description)} "
                     f"| {_killed_by(r)} | {r.seconds:.1f} |")
    lines += ["", f"**Summary: killed {s['killed']} / {n} ({_percent(s['killed'], n)}); by pytest alone (a failing "
              f"test, timeouts not counted) {s['by_pytest']} / {n} ({_percent(s['by_pytest'], n)}), "
              f"{s['by_related']} of them by the related tests; timeouts {s['timeouts']}; "
              + (f"stable on every seed {s['stable']}, seed-dependent {len(s['seed_dependent'])}; "
                 if header.get("seeds") else "") + "survived "
              f"{len(s['survived'])}; inconclusive {len(s['inconclusive'])}; errors {len(s['errors'])}. "
              f"{s['seconds']:.0f} s of mutant runs, {s['seconds'] / max(n, 1):.0f} s per mutant"
              + (f"; {time.time() - header['epoch']:.0f} s wall clock, {header['jobs']} at once"
                 if "epoch" in header and header.get("resumed", 0) < n else "") + ".**", ""]  # a run, not a merge
    if s["survived"]:
        lines.append("Survivors: " + "; ".join(f"`{r.mutant.name}` ({r.mutant.clause})"
                                               for r in results if r.mutant.name in s["survived"]) + ".")
        lines.append("")
    if s["seed_dependent"]:
        lines.append("Seed-dependent kills: " + "; ".join(
            f"`{r.mutant.name}` (seeds {', '.join(map(str, r.seed_kills))} of {len(r.seeds)})"
            for r in results if r.status == "seed-dependent") + ".")
        lines.append("")
    areas: dict[str, list[Result]] = {}
    for r in results:
        areas.setdefault(r.mutant.area, []).append(r)
    lines += ["| area | mutants | killed | survived |", "|---|---|---|---|"]
    for area, rows in sorted(areas.items()):
        lines.append(f"| {area} | {len(rows)} | {sum(r.counts_as_killed for r in rows)} "
                     f"| {sum(r.mutant.name in s['survived'] for r in rows)} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- main
CATALOGUES = ("tools/mutants.py", "tools/mutants_independent.py", "tools/mutants_checker.py",
              "tools/mutants_revocable.py", "tools/mutants_block_cache.py", "tools/mutants_own_model.py",
              "tools/mutants_block_diffusion.py", "tools/mutants_hostile.py", "tools/mutants_block_parallel.py",
              "tools/mutants_product.py", "tools/mutants_llada2.py", "tools/mutants_product2.py",
              "tools/mutants_narrow.py",
              "tools/mutants_checker_block.py", "tools/mutants_fastdllm_v2.py",
              "tools/mutants_draws.py", "tools/mutants_round2.py")


def load_catalogue(path: str | None) -> list[Mutant]:
    """tools/mutants.py's MUTANTS; ``all``: every catalogue of CATALOGUES, the later ones' names prefixed with
    their file's stem where they repeat an earlier name; or the ``MUTANTS`` list (of ``Mutant``) a file defines."""
    if path is None:
        return list(MUTANTS)
    if path == "all":
        every, seen = [], set()
        for file in CATALOGUES:
            for mutant in load_catalogue(str(ROOT / file)) if file != CATALOGUES[0] else list(MUTANTS):
                if mutant.name in seen:
                    mutant = replace(mutant, name=f"{Path(file).stem}/{mutant.name}")
                seen.add(mutant.name)
                every.append(mutant)
        return every
    spec = importlib.util.spec_from_file_location("user_catalogue", path)
    if spec is None or not Path(path).is_file():
        raise SystemExit(f"--catalogue {path}: no such Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, "MUTANTS", None)
    if not isinstance(found, list) or not all(isinstance(m, Mutant) for m in found) or not found:
        raise SystemExit(f"--catalogue {path}: it must define MUTANTS, a non-empty list of "
                         "tools.mutants.Mutant")
    names = [m.name for m in found]
    if len(set(names)) != len(names):
        raise SystemExit(f"--catalogue {path}: mutant names repeat")
    return found


def select(only: list[str] | None, catalogue: list[Mutant] = MUTANTS) -> list[Mutant]:
    if not only:
        return list(catalogue)
    names = [n.strip() for item in only for n in item.split(",") if n.strip()]
    known = {m.name: m for m in catalogue}
    unknown = [n for n in names if n not in known]
    if unknown:
        hints = {n: difflib.get_close_matches(n, known, n=3) for n in unknown}
        raise SystemExit(f"unknown mutant(s): {hints} (see --list)")
    return [known[n] for n in dict.fromkeys(names)]


def list_catalogue(mutants: list[Mutant]) -> str:
    lines = []
    for m in mutants:
        count, line = locate(m)
        place = f"{m.path}:{line}" if count == 1 else f"{m.path} (original found {count} times!)"
        lines.append(f"{m.name}\n    {place}  [{m.area}]  {m.clause}\n    {m.description}\n"
                     f"    tests: {', '.join(m.tests)}")
    counts: dict[str, int] = {}
    for m in mutants:
        counts[m.area] = counts.get(m.area, 0) + 1
    lines.append(f"{len(mutants)} mutants: " + ", ".join(f"{a} {c}" for a, c in sorted(counts.items())))
    return "\n".join(lines)


def _commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              check=True).stdout.decode().strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def default_report(args) -> Path:
    """benchmarks/mutation-all.md for the whole gate (every catalogue: ``--catalogue all``), mutation-seeds.md for
    the whole gate under ``--seeds``; a partial run or one catalogue's goes to the temp dir."""
    if not args.only and args.catalogue == "all" and not getattr(args, "related_to", None):
        return SEEDS_REPORT if getattr(args, "seeds", None) else DEFAULT_REPORT
    return Path(tempfile.gettempdir()) / f"veridec-mutation-{Path(args.catalogue or 'mutants').stem}.md"


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run only these mutants (repeat or comma-separate)")
    parser.add_argument("--full", action="store_true", help="run the whole suite for every mutant")
    parser.add_argument("--related-only", action="store_true",
                        help="triage: run each mutant's related tests only (a survivor there is not a final survivor)")
    parser.add_argument("--report", default=None,
                        help="markdown report (default: benchmarks/mutation-all.md for a run of every catalogue, "
                             "--catalogue all; a file in the system's temp dir for --only or one catalogue, so a "
                             "partial run never overwrites the committed report)")
    parser.add_argument("--json", help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument("--catalogue", help="a Python file defining MUTANTS, or 'all' for every catalogue of tools/ "
                                            "(default: tools/mutants.py)")
    parser.add_argument("--timeout", type=float, default=RELATED_TIMEOUT, help="seconds per related-tests run")
    parser.add_argument("--suite-timeout", type=float, default=SUITE_TIMEOUT, help="seconds per whole-suite run")
    parser.add_argument("--untracked", action="store_true", help="copy untracked, not ignored files too")
    parser.add_argument("--no-verify", action="store_true", help="do not rerun killing tests on an unmutated copy")
    parser.add_argument("--jobs", type=positive_int, default=1,
                        help="mutants run at once, each on its own copy (default 1; at most one per core)")
    parser.add_argument("--seeds", type=positive_int, default=None, metavar="N",
                        help="run every mutant under N seeds of the seeded Hypothesis profile (random draws, no "
                             "database) instead of the derandomized ci profile; report the kills that depend on the "
                             "seed (one that holds on one seed only counts as a survivor)")
    parser.add_argument("--related-to", action="append", metavar="GLOB",
                        help="only the mutants one of whose related test files matches GLOB (repeatable), e.g. "
                             "'tests/test_spec_oracles_*.py'")
    parser.add_argument("--resume", metavar="JSON", action="append",
                        help="skip the mutants this earlier --json file holds a result for (the same --seeds), and "
                             "report those results with the new ones; --json rewrites it after every mutant. "
                             "Repeatable: a later file's result for a mutant replaces an earlier one's (a rerun of "
                             "some mutants merged into a whole run); when every mutant has one, the report and "
                             "--json are written from them and nothing runs")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies and logs")
    parser.add_argument("--workdir", help="where the temporary copies go (default: the system's temp dir)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    catalogue = load_catalogue(args.catalogue)
    mutants = related_to(select(args.only, catalogue), args.related_to)
    if args.list:
        print(list_catalogue(mutants))
        return 0
    broken = [(m.name, locate(m)[0]) for m in mutants if locate(m)[0] != 1]
    if broken:
        raise MutationError("original texts not found exactly once in the working tree: "
                            + ", ".join(f"{name} ({count}x)" for name, count in broken))
    files = repository_files(ROOT, args.untracked)
    header = run_header(args, argv, files, catalogue, mutants)
    report = Path(args.report) if args.report else default_report(args)
    done = resumed(args.resume, mutants, args.seeds)
    header.update(resume=args.resume, resumed=len(done))
    results = run_all(mutants, files, args, header, report, done)
    s = summary(results)
    print(f"killed {s['killed']} / {s['total']} (by pytest alone {s['by_pytest']}, timeouts {s['timeouts']}); "
          f"survived {len(s['survived'])}; report {report}")
    return 0


def related_to(mutants: list[Mutant], globs: list[str] | None) -> list[Mutant]:
    """The mutants one of whose related test files matches one of ``globs`` (all of them without globs)."""
    if not globs:
        return mutants
    chosen = [m for m in mutants if any(fnmatch.fnmatch(t, g) for t in m.tests for g in globs)]
    if not chosen:
        raise SystemExit(f"--related-to {globs}: no mutant has a related test file that matches")
    return chosen


def resumed(paths: list[str] | None, mutants: list[Mutant], seeds: int | None) -> dict[str, Result]:
    """The results earlier ``--json`` files hold for these mutants (same name and patch, run with the same
    ``--seeds``), by name, a later file's replacing an earlier one's; {} without ``--resume``. A file that does
    not exist yet holds none."""
    done = {}
    by_name = {m.name: m for m in mutants}
    for path in paths or []:
        if not Path(path).exists():
            continue
        data = json.loads(Path(path).read_text())
        if data["header"].get("seeds") != seeds:
            raise SystemExit(f"--resume {path}: it was run with --seeds {data['header'].get('seeds')}, not {seeds}")
        done.update({r["name"]: Result.from_dict(r, by_name[r["name"]]) for r in data["results"]
                     if r["name"] in by_name and r["description"] == by_name[r["name"]].description})
    return done


def resumed_from(paths: list[str]) -> str:
    """The ``--resume`` files as the report names them."""
    return ", ".join(f"`{p}`" for p in paths)


def run_header(args, argv, files: list[str], catalogue: list, mutants: list) -> dict:
    """What the report says of the run: command, time, commit, files copied, machine and settings."""
    return {"command": "python -m tools.mutation " + " ".join(argv if argv is not None else sys.argv[1:]),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"), "commit": _commit(ROOT),
            "files": len(files), "which": "tracked and untracked" if args.untracked else "tracked",
            "python": platform.python_version(), "machine": f"{os.cpu_count()} CPUs",
            "catalogue": len(catalogue), "catalogue_file": args.catalogue or "tools/mutants.py",
            "only": ", ".join(m.name for m in mutants) if args.only else "",
            "full": args.full, "related_only": args.related_only, "pytest": pytest_options(None)[:-3],
            "seeds": args.seeds, "related_to": args.related_to,
            "timeout": args.timeout,
            "suite_timeout": args.suite_timeout, "verify": not args.no_verify, "jobs": args.jobs,
            "epoch": time.time()}


def run_all(mutants: list, files: list[str], args, header: dict, report: Path,
            done: dict[str, Result] | None = None) -> list[Result]:
    """Every mutant (but those ``done`` holds) on its own copy of one snapshot of the tree, ``args.jobs`` at a time;
    the report (in the catalogue's order) and ``args.json`` rewritten after each."""
    done = done or {}
    finished: dict[int, Result] = {i: done[m.name] for i, m in enumerate(mutants, 1) if m.name in done}
    if len(finished) == len(mutants):  # everything resumed: the report and the JSON from the results alone
        write_results(mutants, finished, header, report, getattr(args, "json", None))
        return [finished[k] for k in sorted(finished)]
    work = Path(tempfile.mkdtemp(prefix="veridec-mutation-", dir=args.workdir))
    try:
        snapshot = work / "snapshot"
        copy_files(ROOT, snapshot, files)  # one consistent tree for every mutant, whatever changes meanwhile
        pristine = None if args.no_verify else Pristine(work / "pristine", snapshot, files)

        def one(i: int) -> tuple[int, Result]:
            mutant = mutants[i - 1]
            result = run_mutant(mutant, work / f"{i:03d}-{mutant.name}", snapshot, files, args, pristine)
            if not args.keep:
                shutil.rmtree(work / f"{i:03d}-{mutant.name}", ignore_errors=True)
            return i, result

        with ThreadPoolExecutor(max_workers=getattr(args, "jobs", 1)) as pool:
            futures = [pool.submit(one, i) for i in range(1, len(mutants) + 1) if i not in finished]
            try:
                ordered_results(futures, mutants, finished, header, report, getattr(args, "json", None))
            except BaseException:  # Ctrl-C or a broken run: no new mutant starts, the running ones are stopped
                pool.shutdown(wait=False, cancel_futures=True)
                for process in list(LIVE):
                    stop(process)
                raise
    finally:
        if args.keep:
            print(f"copies and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return [finished[k] for k in sorted(finished)]


def ordered_results(futures: list, mutants: list, finished: dict, header: dict, report: Path,
                    json_path: str | None = None) -> None:
    """Collect each mutant's result as it finishes; print it and rewrite the report (and the JSON) in the
    catalogue's order."""
    for future in as_completed(futures):
        i, result = future.result()
        finished[i] = result
        print(f"[{len(finished)}/{len(mutants)}] {result.mutant.name}: {result.status}"
              + (f" by {result.killer} ({result.phase})" if result.killer else "")
              + f", {result.seconds:.1f} s", flush=True)
        write_results(mutants, finished, header, report, json_path)


def write_results(mutants: list, finished: dict, header: dict, report: Path, json_path: str | None) -> None:
    """The report (and the JSON) of the results ``finished`` holds, in the catalogue's order."""
    report.parent.mkdir(parents=True, exist_ok=True)
    ordered = [finished[k] for k in sorted(finished)]
    write_text_atomic(report, render(ordered, header, done=len(finished) == len(mutants)))
    if json_path:
        write_text_atomic(json_path, json.dumps({"header": header, "summary": summary(ordered),
                                               "results": [r.to_dict() for r in ordered]}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
