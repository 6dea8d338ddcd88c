"""The parts of the check's supervisor and guard that the real-process tests (tests/test_hostile_check.py) reach only
by timing, held directly: the deadline, the exit code of a child that ended without a verdict, the last message
read before the child's end, the watchers told of an end by an exception, the refused exits; and the validation
edges found by tools/mutants_hostile.py (spec/exactness.md EC2, EC8; harness/records.py)."""

import json
import os
import posix
import time

import pytest

from veridec.harness import supervise
from veridec.harness.records import Records, RecordsError, record_digest, settings_hash
from veridec.testing import guard
from veridec.testing.validation import checked_baseline, checked_case

from veridec import __version__


class Ended:
    """A child process that has ended with ``returncode``."""

    def __init__(self, returncode: int):
        self.returncode = returncode

    def poll(self):
        return self.returncode


def test_the_deadline_is_the_limit_plus_the_grace():
    armed = supervise.Armed()
    before = time.monotonic()
    armed.take(b'arm 8 1 "the case {}"\n')
    assert 8 + 3 <= armed.deadline - before < 8 + 3 + 1 and armed.what == "the case {}" and armed.code == 1
    armed.take(b"disarm\nexit 0\n")
    assert armed.deadline is None and armed.exit_code == 0


def test_a_child_that_exits_without_a_verdict_after_candidate_code_ran_is_a_failure(capsys):
    """Exit 0 without the verdict's code once the candidate's code ran (an exit path it took) is no PASS; before any
    candidate code (argparse's errors) the child's own code stands."""
    ran = supervise.Armed()
    ran.take(b'arm 5 1 "the case {}"\ndisarm\n')
    assert supervise._ended(Ended(0), ran) == 1
    assert "ended without a verdict (exit code 0)" in capsys.readouterr().err
    assert supervise._ended(Ended(2), supervise.Armed()) == 2


def test_the_last_message_before_the_childs_end_is_read(monkeypatch):
    """The child wrote its verdict's code, then ended, between two looks of the supervisor: the code is read."""
    read, write = os.pipe()
    os.write(write, b"exit 0\n")
    os.close(write)
    real_select, calls = supervise.select.select, []

    def late(*args):  # the first look sees nothing yet
        calls.append(args)
        return ([], [], []) if len(calls) == 1 else real_select(*args)

    monkeypatch.setattr(supervise.select, "select", late)
    try:
        assert supervise._follow(Ended(3), read, supervise.Armed()) == 0
    finally:
        os.close(read)


def test_watchers_hear_the_end_of_a_guarded_call_that_raises(monkeypatch):
    heard = []
    monkeypatch.setattr(guard, "WATCHERS", [lambda *told: heard.append(told)])
    with pytest.raises(ValueError):
        with guard.guarded(5.0, "the case {}"):
            raise ValueError("the candidate's own error")
    assert heard == [(5.0, "the case {}", 1), (None, "the case {}", 1)]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e9", "soon"])
def test_a_bad_import_timeout_is_refused(monkeypatch, value):
    monkeypatch.setenv(guard.IMPORT_TIMEOUT, value)
    with pytest.raises(ValueError, match=f"VERIDEC_IMPORT_TIMEOUT must be a number of seconds in \\(0, 86400\\], "
                                         f"got '{value}'"):
        guard.import_seconds()


def test_both_names_of_exit_are_refused():
    real = posix._exit
    with guard.exits_refused():
        assert os._exit is guard.refuse_exit and posix._exit is guard.refuse_exit
        with pytest.raises(guard.CandidateExited, match=r"os._exit\(0\)"):
            posix._exit(0)
    assert posix._exit is real


def test_records_without_a_result_check_still_refuse_a_key_that_is_no_string(tmp_path):
    settings = {"run": 1}
    record = {"key": ["a"], "settings_hash": settings_hash(settings), "settings": settings, "result": {},
              "veridec": __version__}
    path = tmp_path / "run.records.jsonl"
    path.write_text(json.dumps({**record, "digest": record_digest(record)}) + "\n")
    with pytest.raises(RecordsError, match=r"line 1: its key is list \[\"a\"\], not a string"):
        Records(path, settings)


@pytest.mark.parametrize("steps", [0, -3])
def test_a_case_with_no_steps_is_refused(steps):
    case = {"prompt": [[3, 4]], "attention_mask": None, "seed": 0,
            "settings": {"gen_length": 2, "block_length": 2, "steps": steps}}
    with pytest.raises(ValueError, match=rf"case: steps must be an integer in \[1, 64\].*got {steps}"):
        checked_case(case, ("gen_length", "block_length", "steps"), (), 100)


def test_a_baseline_of_counts_and_nulls_only_is_refused():
    with pytest.raises(ValueError, match="holds none of the measures a run is held to"):
        checked_baseline({"cases": 3, "exact_rate": None})
