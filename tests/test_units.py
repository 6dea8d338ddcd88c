"""Runs made of units (harness/units.py): the experiments and `veridec verify`'s checks are recorded unit by unit
(a killed run resumes to the uninterrupted run's report) and shared among torchrun's processes (2 gloo processes
give the one-process report)."""

import json
import os
import subprocess
import sys

import pytest

from veridec.harness.distributed import Group
from veridec.harness.records import Records
from veridec.harness.units import Unit, open_records, run_units

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
            "veridec.harness.cli"]


def counted(log: list, value: int):
    """A unit computing {"value": value} and logging that it ran."""
    return lambda: log.append(value) or {"value": value}


def test_units_are_recorded_once_and_resumed_in_order(tmp_path):
    log = []
    units = [Unit({"n": n}, counted(log, n)) for n in (3, 1, 2)]
    records = open_records(tmp_path, "run", {"s": 1})
    assert run_units(units, records, quiet=True) == [{"value": 3}, {"value": 1}, {"value": 2}]
    assert log == [3, 1, 2]
    again = open_records(tmp_path, "run", {"s": 1})
    more = units + [Unit({"n": 7}, counted(log, 7))]
    assert run_units(more, again, quiet=True) == [{"value": v} for v in (3, 1, 2, 7)]
    assert log == [3, 1, 2, 7]  # only the new unit ran
    assert (tmp_path / "run.records.jsonl").read_text().count("\n") == 4
    fresh = open_records(tmp_path, "run", {"s": 1}, fresh=True)
    assert fresh.resumed == 0 and not (tmp_path / "run.records.jsonl").exists()


def test_a_failing_unit_keeps_the_finished_ones(tmp_path):
    def broken():
        raise RuntimeError("unit 2 broke")

    log = []
    records = open_records(tmp_path, "run", {})
    with pytest.raises(RuntimeError, match="unit 2 broke"):
        run_units([Unit({"n": 1}, counted(log, 1)), Unit({"n": 2}, broken)], records, quiet=True)
    assert Records(tmp_path / "run.records.jsonl", {}).resumed == 1


def test_units_without_records_run_in_memory_and_keys_must_differ():
    log = []
    assert run_units([Unit({"n": 1}, counted(log, 1))], None, quiet=True) == [{"value": 1}]
    with pytest.raises(ValueError, match="share a key"):
        run_units([Unit({"n": 1}, counted(log, 1)), Unit({"n": 1}, counted(log, 2))], None, quiet=True)
    with pytest.raises(ValueError, match="give it --out"):
        run_units([Unit({"n": 1}, counted(log, 1))], None, Group(0, 2), quiet=True)
    assert log == [1]


def strip(report: dict, timings: tuple[str, ...]) -> dict:
    """The report without its wall-clock fields (measured anew by every run)."""
    if isinstance(report, dict):
        return {k: strip(v, timings) for k, v in report.items() if k not in timings}
    if isinstance(report, list):
        return [strip(item, timings) for item in report]
    return report


def test_a_killed_experiment_resumes_to_the_uninterrupted_report(tmp_path, monkeypatch):
    """The parallel experiment's records cut after a random number of rows, mid-line (a kill during a write):
    the rerun computes only the missing rows and writes the uninterrupted run's report."""
    import random

    from veridec.harness.experiments import parallel

    presets = ["sequential", "fastdllm"]
    whole = parallel.run(tmp_path / "whole", quick=True, presets=presets, quiet=True)
    path = tmp_path / "whole" / "parallel.records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    kept = random.Random(5).randint(1, len(lines) - 1)
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "parallel.records.jsonl").write_text("".join(lines[:kept]) + lines[kept][:40])
    calls = []
    measure = parallel.measure
    monkeypatch.setattr(parallel, "measure", lambda *a: calls.append(a[2:4]) or measure(*a))
    resumed = parallel.run(killed, quick=True, presets=presets, quiet=True)
    assert len(calls) == len(lines) - kept
    assert strip(resumed, ("seconds",)) == strip(whole, ("seconds",))
    assert (killed / "parallel.records.jsonl").read_text().count("\n") == len(lines)


SPECULATIVE_TIMINGS = ("latency_s", "speedup_vs_vanilla", "speedup_vs_fastdllm_dc", "draft_overhead_pct")


def test_two_gloo_processes_give_the_one_process_experiment(tmp_path, speculative_quick):
    """torchrun --nproc-per-node 2 of `veridec experiment speculative --quick`: each rank decodes its prompts
    (units 0, 2 and 1), rank 0 merges the records and writes the report of one process."""
    whole, _ = speculative_quick
    out = tmp_path / "two"
    run = subprocess.run([*TORCHRUN, "experiment", "speculative", "--quick", "--quiet", "--out", str(out)], env=ENV,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    two = json.loads((out / "speculative.json").read_text())
    assert strip(two, SPECULATIVE_TIMINGS) == strip(whole, SPECULATIVE_TIMINGS)
    assert sorted(p.name for p in out.iterdir()) == ["speculative.json", "speculative.md", "speculative.records.jsonl"]
    prompts = [json.loads(json.loads(line)["key"])["prompt"]
               for line in (out / "speculative.records.jsonl").read_text().splitlines()]
    assert prompts == [0, 2, 1]  # rank 0's units, then rank 1's merged


def verify(*extra) -> list[str]:
    return ["verify", "--quick", "--no-table", "--only", "bounds/T2", *extra]


def test_verify_under_torchrun_needs_out(monkeypatch, capsys):
    """The processes share their results through --out's records: without it, a usage error before any work."""
    from veridec.harness.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(verify()) == 2
    assert "under torchrun, verify needs --out" in capsys.readouterr().err


def test_verify_checks_are_recorded_resumed_and_shared_by_two_processes(tmp_path):
    one = subprocess.run([sys.executable, "-m", "veridec.harness.cli",
                          *verify("--out", str(tmp_path / "one"), "--json", str(tmp_path / "one.json"), "--quiet")],
                         env=ENV, capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    again = subprocess.run([sys.executable, "-m", "veridec.harness.cli",
                            *verify("--out", str(tmp_path / "one"), "--json", str(tmp_path / "again.json"))],
                           env=ENV, capture_output=True, text=True)
    assert again.returncode == 0 and "resuming: 5 finished unit(s)" in again.stderr
    two = subprocess.run([*TORCHRUN, *verify("--out", str(tmp_path / "two"), "--json", str(tmp_path / "two.json"),
                                             "--quiet")], env=ENV, capture_output=True, text=True)
    assert two.returncode == 0, two.stderr[-3000:]
    checks = lambda name: json.loads((tmp_path / name).read_text())["checks"]  # noqa: E731
    assert len(checks("one.json")) == 5 and checks("two.json") == checks("one.json") == checks("again.json")
    assert (tmp_path / "two" / "verify.records.jsonl").read_text().count("\n") == 5


def test_ranks_leave_together_after_success_and_at_once_after_an_error(monkeypatch):
    """A rank that finished waits at a barrier before it destroys the group (rank 0 may still be writing the
    results; a peer tearing its connections down meanwhile once aborted a rank at exit); one leaving on an error
    does not wait (its peers may be gone)."""
    from veridec.harness import distributed

    calls = []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "barrier", lambda: calls.append("barrier"))
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: calls.append("destroy"))
    with Group(rank=1, world=2):
        pass
    assert calls == ["barrier", "destroy"]
    calls.clear()
    with pytest.raises(KeyError), Group(rank=1, world=2):
        raise KeyError("a unit failed")
    assert calls == ["destroy"]
    calls.clear()
    with Group():  # a group of one has nothing to leave
        pass
    assert calls == []


def test_a_rank_without_its_peers_stops_with_one_line(tmp_path):
    """WORLD_SIZE=2 set by hand, no second process: the rank says where it waits and for how long, then stops
    with one line naming the address, the world size and itself (here after VERIDEC_COLLECTIVE_TIMEOUT=2 s)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**ENV, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "VERIDEC_COLLECTIVE_TIMEOUT": "2"}
    done = subprocess.run([sys.executable, "-m", "veridec.harness.cli", *verify("--out", str(tmp_path), "--quiet")],
                          env=env, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 2, done.stderr
    assert lines[0].startswith(f"veridec: rank 0 joining a group of 2 processes at 127.0.0.1:{port} (waiting up to 2 s")
    assert "GroupError: rank 0 of WORLD_SIZE=2 could not join the group at 127.0.0.1" in lines[1], lines[1]


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_a_bad_collective_timeout_is_named(monkeypatch, value):
    """A usage error (exit 2), naming the variable."""
    from veridec.harness.arguments import UsageError
    from veridec.harness.distributed import collective_seconds

    monkeypatch.setenv("VERIDEC_COLLECTIVE_TIMEOUT", value)
    with pytest.raises(UsageError, match=f"VERIDEC_COLLECTIVE_TIMEOUT must be a finite number of seconds > 0, got "
                                         f"'{value}'"):
        collective_seconds()


def test_fresh_removes_every_ranks_records(tmp_path):
    """--fresh starts over: rank 0 removes the main records and every rank's file beside them (a rank file left
    would be merged into the fresh run)."""
    from harness.units import open_records

    for name in ("t.records.jsonl", "t.records.rank1.jsonl", "t.records.rank2.jsonl", "other.records.jsonl"):
        (tmp_path / name).write_text("{}\n")
    open_records(tmp_path, "t", {"a": 1}, fresh=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.records.jsonl"]
