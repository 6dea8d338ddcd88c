"""Records that survive a kill (harness/records.py): the exactness table resumes after SIGKILL and gives the
uninterrupted run's rows; truncated lines are redone; records of other settings are refused."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from veridec.harness.records import Records, weights_sha256
from veridec.models import random_model

TIMINGS = ("seconds", "speedup_vs_sequential")  # wall-clock columns: measured anew by every run


def test_records_are_durable_and_resume(tmp_path):
    path = tmp_path / "r.jsonl"
    first = Records(path, {"a": 1})
    first.add(Records.key(unit=1), {"value": 1.5})
    first.add(Records.key(unit=2), {"value": None})
    again = Records(path, {"a": 1})
    assert again.resumed == 2 and again.get(Records.key(unit=2)) == {"value": None}
    assert again.get(Records.key(unit=3)) is None


def test_a_truncated_last_line_is_dropped_and_redone(tmp_path):
    path = tmp_path / "r.jsonl"
    records = Records(path, {"a": 1})
    records.add(Records.key(unit=1), {"value": 1})
    with open(path, "a") as handle:
        handle.write('{"key": "{\\"unit\\": 2}", "settings_ha')  # the kill came mid-write
    again = Records(path, {"a": 1})
    assert again.resumed == 1 and again.get(Records.key(unit=2)) is None
    again.add(Records.key(unit=2), {"value": 2})
    assert Records(path, {"a": 1}).resumed == 2  # the cut line is gone, the new one reads


def test_records_of_other_settings_or_garbage_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    Records(path, {"prompts": 4}).add(Records.key(unit=1), {"value": 1})
    with pytest.raises(ValueError, match="other settings .* give another --out or pass --fresh"):
        Records(path, {"prompts": 8})
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="line 1 is not a veridec record"):
        Records(path, {"prompts": 4})


def recorded(tmp_path, units=2):
    path = tmp_path / "r.jsonl"
    records = Records(path, {"a": 1})
    for unit in range(units):
        records.add(Records.key(unit=unit), {"exact": unit == 0})
    return path


def test_a_hand_edited_line_is_refused_naming_it(tmp_path):
    path = recorded(tmp_path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"exact": false', '"exact": true')  # a dual-cache row made "exact"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl: line 2 does not match its digest \(edited by hand, or corrupt\)"):
        Records(path, {"a": 1})


@pytest.mark.parametrize("content", [b"\x93\x00\xffrandom bytes", b"a plain text file\nof two lines",
                                     b"one line without a newline", b"[1, 2]\n"])
def test_a_file_that_is_no_records_is_refused_and_kept(tmp_path, content):
    """Only the start of a record cut short is taken for a torn last line; anything else is an error and the
    file is left as it was (never truncated to nothing)."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"r.jsonl: line \d is not a veridec record"):
        Records(path, {"a": 1})
    assert path.read_bytes() == content


@pytest.mark.parametrize("cut", [1, 5, 9, 40])
def test_a_record_cut_after_any_byte_is_taken_for_a_torn_line(tmp_path, cut):
    path = recorded(tmp_path, units=1)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:cut])
    assert Records(path, {"a": 1}).resumed == 1 and path.read_bytes() == whole


def test_records_of_another_version_are_refused(tmp_path, monkeypatch):
    path = recorded(tmp_path, units=1)
    monkeypatch.setattr("veridec.harness.records.__version__", "9.9.9")
    with pytest.raises(ValueError, match=r"line 1 was written by veridec 0\.1\.0, this is 9\.9\.9; pass --fresh"):
        Records(path, {"a": 1})


def test_a_records_path_that_is_a_link_or_a_folder_is_refused(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious data without a final newline")
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.jsonl").symlink_to(outside)
    with pytest.raises(ValueError, match=r"r.jsonl: the records file is a link; veridec reads and appends only"):
        Records(out / "r.jsonl", {"a": 1})
    assert outside.read_bytes() == b"precious data without a final newline"
    (out / "s.jsonl").mkdir()
    with pytest.raises(ValueError, match=r"s.jsonl: the records file is not a regular file"):
        Records(out / "s.jsonl", {"a": 1})


def test_weights_hash_tells_models_apart():
    a, b = random_model("llada", 0), random_model("llada", 1)
    assert weights_sha256(a) == weights_sha256(random_model("llada", 0)) != weights_sha256(b)
    with torch.no_grad():
        b.load_state_dict(a.state_dict())
        next(b.parameters()).view(-1)[0] += 1e-6
    assert weights_sha256(a) != weights_sha256(b)


def exactness(out, *extra):
    return [sys.executable, "-m", "veridec.harness.cli", "exactness", "--model", "hmm", "--quick", "--decoders",
            "sequential", "--quiet", "--out", str(out), *extra]


def table(out) -> list[dict]:
    rows = json.loads((out / "exactness.json").read_text())["rows"]
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted one-process table."""
    out = tmp_path_factory.mktemp("whole")
    assert subprocess.run(exactness(out), env=ENV, capture_output=True).returncode == 0
    return table(out)


def test_a_killed_table_resumes_to_the_uninterrupted_table(tmp_path, whole):
    """SIGKILL after a random number of finished rows (of 9: 4 variants + 5 speculative), rerun to the end:
    every row equals an uninterrupted run's, and the finished rows were not recomputed."""
    env = ENV
    killed = tmp_path / "killed"
    records = killed / "exactness.records.jsonl"
    after = random.Random(17).randint(1, 8)
    run = subprocess.Popen(exactness(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline:
        if records.exists() and records.read_text().count("\n") >= after:
            break
        time.sleep(0.02)
    assert run.poll() is None, "the run finished before it could be killed: " + run.stderr.read().decode()
    run.send_signal(signal.SIGKILL)
    run.wait()
    finished = records.read_text().count("\n")
    assert after <= finished < 9 and not (killed / "exactness.json").exists()
    resumed = subprocess.run(exactness(killed), env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert table(killed) == whole
    assert records.read_text().count("\n") == 9  # each unit recorded once


def test_two_gloo_processes_give_the_one_process_table(tmp_path, whole):
    """torchrun --nproc-per-node 2 (gloo on CPU): each rank computes its share, rank 0 merges the records into
    one file and writes the table, which equals the one-process table row for row."""
    out = tmp_path / "two"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          *exactness(out)[1:]], env=ENV, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert table(out) == whole
    assert [p.name for p in sorted(out.iterdir())] == ["exactness.json", "exactness.md", "exactness.records.jsonl"]
    lines = (out / "exactness.records.jsonl").read_text().splitlines()
    variants = [json.loads(json.loads(line)["key"])["variant"] for line in lines]
    rank_one = ["spec-none W3D3", "spec-none W2D2", "spec-dual W2D2 inter1"]  # units 1, 3, 5 (round robin)
    assert len(lines) == 9 and variants[-3:] == rank_one  # merged after rank 0's own rows


def test_the_merge_pass_reuses_the_loaded_and_hashed_models(tmp_path, monkeypatch):
    """Rank 0's second pass over the merged records (harness/cli.py shared_table) gets the models the first pass
    loaded and hashed: no reload and no second sha256 of the weights (minutes for an 8B checkpoint), the same
    rows."""
    from veridec.harness import exactness

    calls = {"load": 0, "hash": 0}
    load, digest = exactness.load_table_model, exactness.weights_sha256
    monkeypatch.setattr(exactness, "load_table_model", lambda *a, **k: calls.__setitem__("load", calls["load"] + 1)
                        or load(*a, **k))
    monkeypatch.setattr(exactness, "weights_sha256", lambda m: calls.__setitem__("hash", calls["hash"] + 1)
                        or digest(m))
    records = exactness.records_for(tmp_path, "hmm", 1, 8, 8, 0)
    models = {}
    first = exactness.build_table("hmm", ["sequential"], 1, 8, 8, quiet=True, records=records, models=models)
    assert calls == {"load": 1, "hash": 1}
    again = exactness.build_table("hmm", ["sequential"], 1, 8, 8, quiet=True, records=records, models=models)
    assert calls == {"load": 1, "hash": 1}
    strip = lambda rows: [{k: v for k, v in vars(r).items() if k not in TIMINGS} for r in rows]
    assert strip(again) == strip(first)


def test_the_command_refuses_an_edited_record_in_one_line(tmp_path, capsys):
    """The table's run, its records edited by hand (a row's result changed), rerun: exit 2 with one line naming
    the file and the line, the file left as it was."""
    from veridec.harness.cli import main

    argv = exactness(tmp_path)[3:]
    assert main(argv) == 0
    records = tmp_path / "exactness.records.jsonl"
    lines = records.read_text().splitlines()
    lines[0] = lines[0].replace('"token_match": ', '"token_match": 0.5, "was": ', 1)
    records.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exactness.records.jsonl: line 1 does not match its digest" in err, err
    assert records.read_text().splitlines() == lines
