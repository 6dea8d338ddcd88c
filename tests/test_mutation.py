"""The mutation gate's catalogue and patching (tools/mutants.py, tools/mutation.py), without running pytest
on a mutant: every original text occurs exactly once in its file, the patched file still compiles, names are
unique, related test files exist; patches apply to a copy and never to the tree; a copy's imports come from
the copy (the editable install's finder would otherwise serve veridec.reference etc. from this tree)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tools import mutation
from tools.mutants import MUTANTS, Mutant
from tools.mutants_block_cache import MUTANTS as BLOCK_CACHE
from tools.mutants_block_diffusion import MUTANTS as BLOCK_DIFFUSION
from tools.mutants_block_parallel import MUTANTS as BLOCK_PARALLEL
from tools.mutants_checker import MUTANTS as CHECKER
from tools.mutants_checker_block import MUTANTS as CHECKER_BLOCK
from tools.mutants_draws import MUTANTS as DRAWS
from tools.mutants_fastdllm_v2 import MUTANTS as FASTDLLM_V2
from tools.mutants_hostile import MUTANTS as HOSTILE
from tools.mutants_independent import MUTANTS as INDEPENDENT
from tools.mutants_llada2 import MUTANTS as LLADA2
from tools.mutants_narrow import MUTANTS as NARROW
from tools.mutants_own_model import MUTANTS as OWN_MODEL
from tools.mutants_product import MUTANTS as PRODUCT
from tools.mutants_product2 import MUTANTS as PRODUCT2
from tools.mutants_round2 import MUTANTS as ROUND2
from tools.mutants_revocable import MUTANTS as REVOCABLE

ROOT = Path(__file__).resolve().parents[1]
AREAS = {"veridec/rules", "veridec/models", "veridec/guidance", "veridec/oracles", "veridec/trace", "veridec/compare",
         "veridec/numerics", "veridec/canvas", "veridec/decoding", "reference", "optimized", "proofs_checks",
         "veridec/adapters", "veridec/recording", "testing", "harness"}


def test_catalogue_size_names_and_spread():
    names = [m.name for m in MUTANTS]
    assert len(names) >= 60 and len(set(names)) == len(names), "names must be unique"
    assert {m.area for m in MUTANTS} == AREAS  # every area of the code carries mutants
    for m in MUTANTS:
        assert m.original != m.replacement and "\n" not in m.description and m.clause.startswith("spec/"), m.name
        assert m.tests and all(t.startswith("tests/test_") for t in m.tests), m.name


def test_every_catalogue_file_is_in_the_gate():
    """A catalogue left out of CATALOGUES is never run by ``--catalogue all`` nor checked below."""
    assert sorted(mutation.CATALOGUES) == sorted(f"tools/{p.name}" for p in (ROOT / "tools").glob("mutants*.py"))


@pytest.mark.parametrize("mutant", mutation.load_catalogue("all"), ids=lambda m: m.name)
def test_original_occurs_exactly_once_and_the_patch_compiles(mutant):
    count, line = mutation.locate(mutant, ROOT)
    assert count == 1, f"{mutant.name}: original found {count} times in {mutant.path}; update tools/mutants.py"
    text = (ROOT / mutant.path).read_text()
    compile(text.replace(mutant.original, mutant.replacement), mutant.path, "exec")
    assert line >= 1
    for test in mutant.tests:
        assert (ROOT / test).is_file(), f"{mutant.name}: related test file {test} does not exist"


def test_all_catalogues_load_as_one_with_unique_names():
    every = mutation.load_catalogue("all")
    assert len(every) == (len(MUTANTS) + len(INDEPENDENT) + len(CHECKER) + len(REVOCABLE) + len(BLOCK_CACHE)
                          + len(OWN_MODEL) + len(BLOCK_DIFFUSION) + len(HOSTILE) + len(BLOCK_PARALLEL)
                          + len(PRODUCT) + len(LLADA2) + len(PRODUCT2) + len(NARROW) + len(CHECKER_BLOCK)
                          + len(FASTDLLM_V2) + len(DRAWS) + len(ROUND2))
    assert len({m.name for m in every}) == len(every)  # repeated names carry their catalogue's stem
    assert len(CHECKER) >= 30 and {m.area for m in CHECKER} >= {"testing", "harness", "proofs_checks", "tools",
                                                                 "veridec/adapters", "veridec/recording"}


def test_patches_apply_to_a_copy_only(tmp_path):
    mutant = MUTANTS[0]
    before = (ROOT / mutant.path).read_bytes()
    mutation.copy_files(ROOT, tmp_path, [mutant.path, "pyproject.toml"])
    line = mutation.apply(mutant, tmp_path)
    patched = (tmp_path / mutant.path).read_text()
    assert line == mutation.locate(mutant, ROOT)[1]
    assert mutant.replacement in patched and patched.count(mutant.original) == 0
    assert patched.splitlines()[line - 1] != before.decode().splitlines()[line - 1]  # the reported line changed
    assert (ROOT / mutant.path).read_bytes() == before  # the tree is never touched
    with pytest.raises(mutation.MutationError, match="occurs 0 times"):
        mutation.apply(mutant, tmp_path)  # applied already: the original is gone
    twice = Mutant("twice", "pyproject.toml", '"', "'", "quote", "spec/none", ("tests/test_mutation.py",))
    with pytest.raises(mutation.MutationError, match="exactly once"):
        mutation.apply(twice, tmp_path)
    with pytest.raises(mutation.MutationError, match="does not exist"):
        mutation.apply(Mutant("missing", "nope.py", "a", "b", "-", "spec/none", ()), tmp_path)


def test_module_names_and_suite_selection():
    packages = mutation.package_dirs(ROOT)
    assert mutation.module_name("optimized/packed.py", packages, ROOT) == "veridec.optimized.packed"
    assert mutation.module_name("veridec/rules/llada.py", packages, ROOT) == "veridec.rules.llada"
    assert mutation.module_name("proofs_checks/__init__.py", packages, ROOT) == "veridec.proofs_checks"
    mutant = next(m for m in MUTANTS if len(m.tests) > 1)
    related = mutation.suite_selection(mutant, full=False)
    assert related[0] == "tests" and {f"--ignore={t}" for t in mutant.tests} <= set(related)
    assert "--ignore=tests/test_mutation.py" in related  # every mutant breaks this file's catalogue check
    assert mutation.suite_selection(mutant, full=True) == ["tests", "--ignore=tests/test_mutation.py"]
    with pytest.raises(SystemExit, match="unknown mutant"):
        mutation.select(["no-such-mutant"])
    assert [m.name for m in mutation.select([f"{MUTANTS[1].name},{MUTANTS[0].name}"])] == [MUTANTS[1].name,
                                                                                        MUTANTS[0].name]


def test_the_shim_makes_the_copy_win_over_the_editable_install(tmp_path):
    """The copy's packages and a patched module import from the copy (a plain python, not pytest)."""
    files = ["pyproject.toml"] + [str(p.relative_to(ROOT)) for folder in ("veridec", "reference", "optimized",
                                                                          "proofs_checks", "harness")
                                 for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    sandbox = mutation.Sandbox(tmp_path / "work", ROOT, files)
    mutant = next(m for m in MUTANTS if m.path.startswith("reference/"))
    mutation.apply(mutant, sandbox.repo)
    module = mutation.module_name(mutant.path, sandbox.packages, sandbox.repo)
    code = (f"import importlib, veridec, veridec.reference, veridec.optimized, veridec.proofs_checks, veridec.harness; "
            f"m = importlib.import_module({module!r}); "
            f"print(veridec.__file__, veridec.reference.__file__, veridec.optimized.__file__, "
            f"veridec.proofs_checks.__file__, veridec.harness.__file__, m.__file__, sep='\\n')")
    out = subprocess.run([sys.executable, "-c", code], cwd=sandbox.repo, env=sandbox.env(tmp_path / "probe.json", []),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = [Path(line) for line in out.stdout.split()]
    assert len(loaded) == 6 and all(p.is_relative_to(sandbox.repo.resolve()) for p in loaded), loaded
    assert mutant.replacement in loaded[-1].read_text()


def test_repository_files_are_the_tracked_ones():
    try:
        files = mutation.repository_files(ROOT)
    except RuntimeError as error:  # no git or no .git (an exported tree)
        pytest.skip(str(error))
    assert "pyproject.toml" in files and "veridec/rules/llada.py" in files
    assert not any(f.startswith((".venv/", ".git/")) or "__pycache__" in f for f in files)


def test_a_partial_run_never_overwrites_the_committed_report():
    from argparse import Namespace

    assert mutation.default_report(Namespace(only=None, catalogue="all")) == mutation.DEFAULT_REPORT
    assert mutation.DEFAULT_REPORT.exists()  # the committed report the gate rewrites
    for args in (Namespace(only=["pmi-sign"], catalogue="all"), Namespace(only=None, catalogue=None),
                 Namespace(only=None, catalogue="mine.py")):
        assert mutation.default_report(args).parent != mutation.DEFAULT_REPORT.parent


def test_jobs_run_mutants_at_once_and_report_them_in_catalogue_order(tmp_path, monkeypatch):
    """--jobs 2: two mutants run at the same time (never more), each on its own copy; the report and the
    results keep the catalogue's order whatever finishes first."""
    import threading
    import time

    running, most, lock = set(), [0], threading.Lock()

    def fake_run_mutant(mutant, work, snapshot, files, options, pristine):
        with lock:
            running.add(work)
            most[0] = max(most[0], len(running))
        time.sleep(0.3 if mutant is MUTANTS[0] else 0.05)  # the first finishes last
        with lock:
            running.discard(work)
        return mutation.Result(mutant, 1, "killed", killer=f"tests/x.py::{work.name}", phase="related")

    monkeypatch.setattr(mutation, "run_mutant", fake_run_mutant)
    mutants, report = MUTANTS[:5], tmp_path / "report.md"
    args = mutation.build_parser().parse_args(["--jobs", "2", "--no-verify", "--workdir", str(tmp_path)])
    header = mutation.run_header(args, [], ["pyproject.toml"], MUTANTS, mutants)
    results = mutation.run_all(mutants, ["pyproject.toml"], args, header, report)
    assert most[0] == 2
    assert [r.mutant.name for r in results] == [m.name for m in mutants]
    assert len({r.killer for r in results}) == 5  # five copies
    text = report.read_text()
    assert "(finished)" in text and "2 at once" in text
    assert [text.index(f"`{m.name}`") for m in mutants] == sorted(text.index(f"`{m.name}`") for m in mutants)
    with pytest.raises(SystemExit):
        mutation.build_parser().parse_args(["--jobs", "0"])


# ------------------------------------------------------------------------------------ --seeds (kill stability)
def test_seeded_runs_replace_the_ci_profile_with_a_seed():
    assert mutation.pytest_options(None) == mutation.PYTEST_OPTIONS
    seeded = mutation.pytest_options(7)
    assert "--hypothesis-profile=ci" not in seeded
    assert seeded[1:3] == ("--hypothesis-profile=seeded", "--hypothesis-seed=7")
    assert [o for o in seeded if not o.startswith("--hypothesis")] == [
        o for o in mutation.PYTEST_OPTIONS if not o.startswith("--hypothesis")]
    assert mutation.seed_list(mutation.build_parser().parse_args(["--seeds", "3"])) == [1, 2, 3]
    assert mutation.seed_list(mutation.build_parser().parse_args([])) == [None]
    with pytest.raises(SystemExit):
        mutation.build_parser().parse_args(["--seeds", "0"])


def test_the_seeded_profile_draws_by_its_seed_alone():
    """tests/conftest.py's seeded profile: random draws (not derandomized), no database; one seed gives the same
    draws every time, another seed other draws (what ``--hypothesis-seed`` sets)."""
    from hypothesis import given, seed, settings
    from hypothesis import strategies as st

    from hypothesis import Phase

    profile = settings.get_profile("seeded")
    assert not profile.derandomize and profile.database is None and Phase.shrink not in profile.phases

    def draws(number):
        seen = []

        @seed(number)
        @settings(profile, max_examples=20)
        @given(st.integers(0, 10**9))
        def record(x):
            seen.append(x)

        record()
        return seen

    assert draws(1) == draws(1) and draws(1) != draws(2)


def fake_result(mutant, status, killer=None, seed=None):
    return mutation.Result(mutant, 1, status, killer=killer, phase="related" if killer else None,
                           runs=[{"phase": "related", "seed": seed}])


@pytest.mark.parametrize("statuses, expected, counted", [
    (["killed"] * 3, "killed", True), (["killed", "survived", "killed"], "seed-dependent", True),
    (["survived", "killed", "survived"], "seed-dependent", False), (["survived"] * 3, "survived", False),
    (["killed", "error", "killed"], "error", False), (["survived", "inconclusive", "survived"], "inconclusive", False)])
def test_seeds_combine_into_stable_and_seed_dependent_kills(statuses, expected, counted):
    mutant = MUTANTS[0]
    per_seed = [fake_result(mutant, s, "tests/x.py::t" if s in ("killed", "inconclusive") else None, seed)
                for seed, s in zip((1, 2, 3), statuses)]
    result = mutation.combine_seeds(per_seed, [1, 2, 3])
    assert result.status == expected and result.counts_as_killed == counted
    assert result.seeds == [1, 2, 3] and result.seed_kills == [i + 1 for i, s in enumerate(statuses) if s == "killed"]
    assert [run["seed"] for run in result.runs] == [1, 2, 3]  # every seed's runs kept
    s = mutation.summary([result])
    assert s["killed"] == counted and (mutant.name in s["survived"]) == (expected in ("survived", "seed-dependent")
                                                                         and not counted)


def test_run_mutant_runs_every_seed_on_one_copy(tmp_path, monkeypatch):
    """``--seeds 3``: the patched copy is gate-run once per seed; kills on seeds 1 and 3 only make it
    seed-dependent (named in the report), not killed."""
    mutant = next(m for m in MUTANTS if m.path.endswith(".py"))
    seen = []

    def fake_phases(mutant, line, sandbox, module, options, pristine, seed, only=None):
        seen.append((seed, sandbox.repo, only))
        assert mutant.replacement in (sandbox.repo / mutant.path).read_text()
        return fake_result(mutant, "killed" if seed != 2 else "survived", "tests/x.py::t", seed)

    monkeypatch.setattr(mutation, "run_phases", fake_phases)
    args = mutation.build_parser().parse_args(["--seeds", "3", "--related-only"])
    result = mutation.run_mutant(mutant, tmp_path / "work", mutation.ROOT, ["pyproject.toml", mutant.path], args, None)
    # seeds 2 and 3 try seed 1's killer alone first; under seed 2 it passes, so the whole selection runs
    assert [(s, o) for s, _, o in seen] == [(1, None), (2, ["tests/x.py::t"]), (2, None), (3, ["tests/x.py::t"])]
    assert len({r for _, r, _ in seen}) == 1
    assert result.status == "seed-dependent" and result.seed_kills == [1, 3] and "seed(s) 2" in result.detail
    header = mutation.run_header(args, ["--seeds", "3"], ["pyproject.toml"], MUTANTS, [mutant])
    text = mutation.render([result], header, done=True)
    assert "under 3 seeds" in text and f"Seed-dependent kills: `{mutant.name}` (seeds 1, 3 of 3)" in text
    assert "killed on seeds 1, 3 of 3" in text and "seed-dependent 1" in text


def test_resume_skips_the_mutants_a_json_file_holds(tmp_path, monkeypatch):
    """--json is rewritten after every mutant; --resume reads it back, runs the others only, reports all."""
    ran = []

    def fake_run_mutant(mutant, work, snapshot, files, options, pristine):
        ran.append(mutant.name)
        return mutation.Result(mutant, 1, "killed", killer="tests/x.py::t", phase="related", seeds=[1, 2],
                               seed_kills=[1, 2])

    monkeypatch.setattr(mutation, "run_mutant", fake_run_mutant)
    mutants, path = MUTANTS[:4], tmp_path / "gate.json"
    argv = ["--seeds", "2", "--no-verify", "--workdir", str(tmp_path), "--json", str(path)]
    args = mutation.build_parser().parse_args(argv)
    header = mutation.run_header(args, argv, ["pyproject.toml"], MUTANTS, mutants[:2])
    mutation.run_all(mutants[:2], ["pyproject.toml"], args, header, tmp_path / "a.md")
    assert [r["name"] for r in mutation.json.loads(path.read_text())["results"]] == ran == [m.name for m in mutants[:2]]
    done = mutation.resumed([str(path)], mutants, 2)
    assert set(done) == {m.name for m in mutants[:2]} and done[mutants[0].name].seed_kills == [1, 2]
    results = mutation.run_all(mutants, ["pyproject.toml"], args, header, tmp_path / "b.md", done)
    assert ran == [m.name for m in mutants] and [r.mutant.name for r in results] == [m.name for m in mutants]
    with pytest.raises(SystemExit, match="--seeds"):
        mutation.resumed([str(path)], mutants, 3)


def test_a_later_resume_file_replaces_an_earlier_ones_results_and_a_full_resume_only_writes(tmp_path, monkeypatch):
    """--resume A --resume B: B's result for a mutant replaces A's (a rerun of a few survivors merged into a whole
    run); when every mutant has a result nothing runs and the report and the JSON are written from them."""
    def result(mutant, status):
        return mutation.Result(mutant, 1, status, killer="tests/x.py::t" if status == "killed" else None,
                               phase="related", seeds=[1, 2], seed_kills=[1, 2] if status == "killed" else [])

    mutants = MUTANTS[:3]
    args = mutation.build_parser().parse_args(["--seeds", "2", "--resume", "a.json", "--resume", "b.json"])
    assert args.resume == ["a.json", "b.json"]
    header = mutation.run_header(args, [], ["pyproject.toml"], MUTANTS, mutants)
    for name, statuses in (("a.json", ["killed", "survived", "killed"]), ("b.json", [None, "killed", None])):
        rows = [result(m, s) for m, s in zip(mutants, statuses) if s]
        (tmp_path / name).write_text(mutation.json.dumps({"header": header, "summary": {},
                                                          "results": [r.to_dict() for r in rows]}))
    done = mutation.resumed([str(tmp_path / "a.json"), str(tmp_path / "b.json")], mutants, 2)
    assert [done[m.name].status for m in mutants] == ["killed", "killed", "killed"]
    assert mutation.resumed([str(tmp_path / "a.json")], mutants, 2)[mutants[1].name].status == "survived"
    monkeypatch.setattr(mutation, "run_mutant", lambda *a: pytest.fail("a resumed mutant ran"))
    out = tmp_path / "merged.json"
    args.json = str(out)
    header.update(resume=[str(tmp_path / "a.json"), str(tmp_path / "b.json")], resumed=3)
    results = mutation.run_all(mutants, ["pyproject.toml"], args, header, tmp_path / "merged.md", done)
    assert [r.status for r in results] == ["killed"] * 3
    assert [r["status"] for r in mutation.json.loads(out.read_text())["results"]] == ["killed"] * 3
    text = (tmp_path / "merged.md").read_text()
    assert "survived 0" in text and "3 result(s) were read back from" in text and "b.json`" in text
    assert "wall clock" not in text  # nothing ran: no run time to report


def test_related_to_selects_mutants_by_their_related_tests():
    every = mutation.load_catalogue("all")
    chosen = mutation.related_to(every, ["tests/test_spec_oracles_*.py"])
    assert chosen and all(any(t.startswith("tests/test_spec_oracles_") for t in m.tests) for m in chosen)
    assert len(chosen) < len(every) and mutation.related_to(every, None) == every
    with pytest.raises(SystemExit, match="no mutant"):
        mutation.related_to(every, ["tests/no_such_*.py"])
    from argparse import Namespace

    assert mutation.default_report(Namespace(only=None, catalogue="all", seeds=3, related_to=None)) == \
        mutation.SEEDS_REPORT
    assert mutation.default_report(Namespace(only=None, catalogue="all", seeds=3, related_to=["x"])).parent != \
        mutation.DEFAULT_REPORT.parent


def test_a_kill_by_a_test_without_draws_is_not_rerun_per_seed(tmp_path, monkeypatch):
    """Killed under seed 1 by a plain (non-Hypothesis) test: the same kill on every seed, run once."""
    mutant = next(m for m in MUTANTS if m.path.endswith(".py"))
    seen = []

    def fake_phases(mutant, line, sandbox, module, options, pristine, seed, only=None):
        seen.append(seed)
        result = fake_result(mutant, "killed", "tests/x.py::plain", seed)
        result.runs[0]["first_failure"] = {"nodeid": "tests/x.py::plain", "hypothesis": False}
        return result

    monkeypatch.setattr(mutation, "run_phases", fake_phases)
    args = mutation.build_parser().parse_args(["--seeds", "3", "--related-only"])
    result = mutation.run_mutant(mutant, tmp_path / "work", mutation.ROOT, ["pyproject.toml", mutant.path], args, None)
    assert seen == [1] and result.status == "killed" and result.seed_kills == [1, 2, 3] and len(result.runs) == 1
    assert "draws nothing from Hypothesis" in result.detail


def test_the_probe_records_whether_the_failing_test_draws(tmp_path, monkeypatch):
    """The probe plugin marks the first failure as a Hypothesis test or not (the --seeds shortcut reads it): its
    hooks called in this process on a Hypothesis test and a plain one."""
    from types import SimpleNamespace

    from hypothesis import given
    from hypothesis import strategies as st

    monkeypatch.setenv("MUTATION_ROOT", str(tmp_path))
    monkeypatch.setenv("MUTATION_PROBE", str(tmp_path / "probe.json"))
    probe: dict = {}
    exec(compile(mutation.PROBE_PLUGIN, "_mutation_probe.py", "exec"), probe)

    @given(st.integers())
    def drawn(x):
        pass

    def plain():
        pass

    for nodeid, function, draws in (("t.py::drawn", drawn, True), ("t.py::plain", plain, False)):
        report = SimpleNamespace(failed=True, nodeid=nodeid, longrepr="E boom")
        hook = probe["pytest_runtest_makereport"](SimpleNamespace(obj=function), None)
        next(hook)
        with pytest.raises(StopIteration):
            hook.send(SimpleNamespace(get_result=lambda: report))
        probe["STATE"]["first_failure"] = None
        probe["pytest_runtest_logreport"](SimpleNamespace(failed=True, nodeid=nodeid, when="call", longrepr="E boom"))
        assert probe["STATE"]["first_failure"]["hypothesis"] is draws, nodeid
        assert mutation.json.loads((tmp_path / "probe.json").read_text())["first_failure"]["hypothesis"] is draws
