"""Hostile input to ``veridec check`` (issue: hostile input, second round): a candidate may not end the check or
change what it was given, a replayed case and a baseline are validated, flags of another tier are refused, and a
reproducer never runs code taken from a file's name. Each: one clear line, the right exit code."""

import json
import os
import shlex
import shutil
import signal
import time
import subprocess
import sys
from pathlib import Path

import pytest

from veridec.harness.cli import main
from veridec.testing import check_decoder

from oracles.bridge import greedy_candidate  # tests/ is on sys.path under pytest's default import mode

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "examples" / "fastdllm_dual_broken.py"
ONE = {"prompt": [[3, 4]], "attention_mask": None, "seed": 0,
       "settings": {"gen_length": 2, "block_length": 2, "steps": 2}}


SUPERVISED = [sys.executable, "-m", "veridec.harness.supervise"]  # the veridec command as installed


def check_argv(candidate: str, *extra: str) -> list[str]:
    """``veridec check CANDIDATE`` against llada on tiny-llada with the case ONE, as a command line."""
    return [*SUPERVISED, "check", candidate, "--against", "llada", "--model", "tiny-llada", "--quiet", "--case",
            json.dumps(ONE), *extra]


def check_in_a_process(candidate: str, *extra: str, **kwargs) -> subprocess.CompletedProcess:
    """``check_argv`` run as its own process (the supervisor and its child), output captured."""
    return subprocess.run(check_argv(candidate, *extra), capture_output=True, text=True, timeout=120, **kwargs)


def greedy(model, prompt, gen_length=2, mask_id=0):
    return greedy_candidate(model, prompt, gen_length, mask_id)


def exits(model, prompt, gen_length=2, mask_id=0):
    sys.exit(0)


def interrupts(model, prompt, gen_length=2, mask_id=0):
    raise KeyboardInterrupt


def writes_into_its_prompt(model, prompt, gen_length=2, mask_id=0):
    out = greedy(model, prompt, gen_length, mask_id)
    prompt[0, 0] = prompt[0, 0] + 1
    return out


def floats(model, prompt, gen_length=2, mask_id=0):
    return greedy(model, prompt, gen_length, mask_id).float()


def hard_exits(model, prompt, gen_length=2, mask_id=0):
    os._exit(0)


def posix_exits(model, prompt, gen_length=2, mask_id=0):
    import posix

    posix._exit(0)


class Boom(BaseException):
    """A candidate's own BaseException (neither SystemExit nor KeyboardInterrupt)."""


def raises_generator_exit(model, prompt, gen_length=2, mask_id=0):
    raise GeneratorExit


def raises_its_own_base_exception(model, prompt, gen_length=2, mask_id=0):
    raise Boom("boom")


def outside_the_vocabulary(model, prompt, gen_length=2, mask_id=0):
    out = greedy(model, prompt, gen_length, mask_id)
    out[0, -1] = 10**6
    return out


def on_the_meta_device(model, prompt, gen_length=2, mask_id=0):
    return greedy(model, prompt, gen_length, mask_id).to("meta")


def loops(model, prompt, gen_length=2, mask_id=0):
    while True:  # never calls the model: the call cap cannot stop it
        pass


def loops_swallowing_errors(model, prompt, gen_length=2, mask_id=0):
    while True:
        try:
            model(prompt)
        except Exception:  # noqa: BLE001 - what a careless candidate does; the time limit is no Exception
            pass


@pytest.mark.parametrize("candidate, message", [
    (exits, "it raised SystemExit(0): a candidate may not end the check"),
    (interrupts, "it raised KeyboardInterrupt(): a candidate may not end the check"),
    (writes_into_its_prompt, "changed the prompt or attention mask it was given (in place)"),
    (floats, "must return integer token ids, got a tensor of dtype torch.float32"),
    (raises_generator_exit, "it raised GeneratorExit()"),
    (raises_its_own_base_exception, "it raised Boom(boom)"),
    (outside_the_vocabulary, "returned token id 1000000 at row 0, position 3, outside the vocabulary [0, 100)"),
    (on_the_meta_device, "returned its tokens on device meta, which cannot be read on the prompt's device cpu"),
    (posix_exits, "it called os._exit(0): a candidate may not end the check"),
])
def test_a_candidate_cannot_end_the_check_or_pass_with_bad_output(candidate, message):
    assert check_decoder(greedy, "llada", model="tiny-llada", case=ONE).passed  # the control
    result = check_decoder(candidate, "llada", model="tiny-llada", case=ONE)
    assert not result.passed and message in result.failure.problems[0], result.failure.problems


def test_a_candidate_that_calls_os_exit_fails_its_case_and_the_process_goes_on():
    result = check_decoder(hard_exits, "llada", model="tiny-llada", case=ONE)
    assert not result.passed and "it called os._exit(0): a candidate may not end the check" in \
        result.failure.problems[0], result.failure.problems
    assert os._exit.__module__ in ("posix", "nt")  # restored after the call


@pytest.mark.parametrize("candidate", [loops, loops_swallowing_errors])
def test_a_candidate_past_its_time_limit_fails_its_case(candidate):
    started = time.monotonic()
    result = check_decoder(candidate, "llada", model="tiny-llada", case=ONE, case_timeout=0.5)
    assert time.monotonic() - started < 30
    assert not result.passed and "it ran past its time limit of 0.5 s on this case (--case-timeout" in \
        result.failure.problems[0], result.failure.problems


def test_a_timed_out_drawn_case_is_reported_unshrunk_after_one_wait():
    """Shrinking would wait out the limit at every smaller case: the first drawn case that timed out is the
    report's, and the check ends after that one wait (plus the passing cases before it: none here)."""
    started = time.monotonic()
    result = check_decoder(loops, "llada", model="tiny-llada", max_examples=50, case_timeout=0.5, knobs=False)
    assert not result.passed and result.trials == 1 and result.failure.case == result.first_failing_case
    assert time.monotonic() - started < 20


def test_the_default_limit_is_twenty_times_the_targets_time_plus_ten_seconds():
    from veridec.testing.guard import UNTIMED_SECONDS, candidate_limit

    assert candidate_limit(None, 0.5) == 20.0 and candidate_limit(None, 0.0) == 10.0
    assert candidate_limit(3.0, 0.5) == 3.0 and candidate_limit(None, None) == UNTIMED_SECONDS


def test_an_outer_timer_survives_the_guard():
    """The guard restores the SIGALRM handler it replaced and re-arms a timer that was running with its rest."""
    from veridec.testing.guard import guarded

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        with guarded(1.0):
            pass
        rest, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 3.0 < rest <= 5.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "x"])
def test_a_bad_case_timeout_is_one_line(value, capsys):
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", "tiny-llada", "--quiet",
                 "--case-timeout", value])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--case-timeout" in err, err
    with pytest.raises(ValueError, match="case_timeout must be None or a finite number of seconds > 0"):
        check_decoder(greedy, "llada", model="tiny-llada", case=ONE, case_timeout=0)


def test_a_case_timeout_past_a_day_is_refused(capsys):
    """1e308 s overflowed the timer inside the candidate's call (a FAIL of a valid candidate): refused up front."""
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", "tiny-llada", "--quiet",
                 "--case-timeout", "1e308"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--case-timeout: must be a finite number in [0.01, 86400]" in err
    with pytest.raises(ValueError, match="at most 86400"):
        check_decoder(greedy, "llada", model="tiny-llada", case=ONE, case_timeout=86_401)


def test_the_command_gives_a_verdict_when_the_candidate_exits(tmp_path, capsys):
    file = tmp_path / "exits.py"
    file.write_text("import sys\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n    sys.exit(0)\n")
    code = main(["check", f"{file}:generate", "--against", "llada", "--model", "tiny-llada", "--quiet",
                 "--case", json.dumps(ONE)])
    out = capsys.readouterr().out
    assert code == 1 and "# veridec check: FAIL" in out and "SystemExit(0)" in out


def test_the_command_gives_a_verdict_when_the_candidate_exits_hard_or_hangs(tmp_path):
    """A real process: os._exit(0) in the candidate is a FAIL (exit 1), an endless loop a FAIL after the limit,
    whose reproducer command carries --case-timeout."""
    file = tmp_path / "hostile.py"
    file.write_text("import os\n\ndef exits(model, prompt, gen_length=2, mask_id=0):\n    os._exit(0)\n\n"
                    "def hangs(model, prompt, gen_length=2, mask_id=0):\n    while True:\n        pass\n")
    for name, extra, expected in (("exits", [], "it called os._exit(0)"),
                                  ("hangs", ["--case-timeout", "0.5"], "ran past its time limit of 0.5 s")):
        done = check_in_a_process(f"{file}:{name}", *extra)
        assert done.returncode == 1 and "# veridec check: FAIL" in done.stdout and expected in done.stdout, done
    assert "--case-timeout 0.5" in done.stdout


STALLS = {  # a candidate the in-process guard cannot stop, and what the supervisor says (exit code, line)
    "swallows": ("import time\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n    while True:\n"
                 "        try:\n            time.sleep(0.01)\n        except BaseException:\n            pass\n",
                 1, "veridec: FAIL: it did not give control back 3.5 s into the case {"),
    "ignores-alarm": ("import signal, time\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n"
                      "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    time.sleep(10**6)\n",
                      1, "(its limit 0.5 s; it swallowed the timeout, replaced the alarm's handler or stalled"),
    "kills-itself": ("import os, signal\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n"
                     "    os.kill(os.getpid(), signal.SIGKILL)\n",
                     1, "the check's process ended without a verdict (killed by SIGKILL) while the candidate was "
                        "running the case {"),
    "import-stalls": ("import time\nwhile True:\n    try:\n        time.sleep(0.01)\n    except BaseException:\n"
                      "        pass\n", 2, "veridec: error: the candidate cannot be loaded: it did not give control "
                                          "back 3.5 s into the import of"),
}


@pytest.mark.parametrize("name", STALLS)
def test_a_candidate_that_stalls_or_kills_its_process_still_gets_a_verdict(tmp_path, name):
    """A real process under its supervisor (spec EC8): once hung for good or ended silently, now one line and a
    nonzero code; the import has its own limit (VERIDEC_IMPORT_TIMEOUT)."""
    source, code, message = STALLS[name]
    (tmp_path / "stalls.py").write_text(source)
    done = check_in_a_process("stalls.py:generate", "--case-timeout", "0.5", cwd=tmp_path,
                              env={**os.environ, "VERIDEC_IMPORT_TIMEOUT": "0.5"})
    assert done.returncode == code and message in done.stderr, done


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_supervisor_leaves_no_check_running(tmp_path, signum):
    """The check's child ends with its supervisor (a job cancelled, a terminal closed): never an orphan."""
    (tmp_path / "waits.py").write_text("import os, time\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n"
                                       "    open('started', 'w').write(str(os.getpid()))\n    time.sleep(600)\n")
    supervisor = subprocess.Popen(check_argv("waits.py:generate", "--case-timeout", "600"), cwd=tmp_path,
                                  stderr=open(tmp_path / "err", "w"))
    started = tmp_path / "started"
    deadline = time.monotonic() + 100
    while not (started.exists() and started.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(started.read_text())
    supervisor.send_signal(signum)
    code, err = supervisor.wait(timeout=30), (tmp_path / "err").read_text()  # a pipe would wait for the child
    assert code == -signum or (code == 128 + signum and "stopped by SIGTERM: the check ended without a verdict" in err)
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the check's child outlived its supervisor"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(") ")[1].startswith("Z")  # a zombie has ended


def test_a_thread_the_candidate_started_fails_in_one_line(tmp_path, capsys):
    """Not a traceback from the candidate's thread (once veridec's own CallLimitExceeded, printed raw)."""
    file = tmp_path / "threads.py"
    file.write_text(GREEDY_FILE.replace("def generate(model, prompt, gen_length=2, mask_id=0):\n",
                                        "def generate(model, prompt, gen_length=2, mask_id=0):\n"
                                        "    import threading\n    thread = threading.Thread(target=int, args=('x',),"
                                        " name='spam')\n    thread.start()\n    thread.join()\n"))
    code = main(["check", f"{file}:generate", "--against", "llada", "--model", "tiny-llada", "--quiet", "--case",
                 json.dumps(ONE)])
    err = capsys.readouterr().err
    assert code == 0 and err == ("veridec: note: thread 'spam' (started by the candidate) raised ValueError: invalid "
                                 "literal for int() with base 10: 'x'\n"), err


def test_a_usage_error_keeps_exit_code_2_under_the_supervisor(tmp_path):
    """argparse's errors end the child before any candidate code: its own code 2, not "ended without a verdict"."""
    done = subprocess.run([*SUPERVISED, "check", "c.py:generate", "--against", "llada", "--tier", "S", "--samples",
                           "1"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "--samples: must lie in [2," in done.stderr and "verdict" not in done.stderr, done


def test_a_candidate_that_closes_the_checks_streams_still_prints_its_verdict(tmp_path):
    file = tmp_path / "closes.py"
    file.write_text(GREEDY_FILE.replace("def generate(model, prompt, gen_length=2, mask_id=0):\n",
                                        "def generate(model, prompt, gen_length=2, mask_id=0):\n    import os\n"
                                        "    sys.stdout.close()\n    os.close(1)\n    os.close(2)\n"))
    done = check_in_a_process(f"{file}:generate")
    assert done.returncode == 0 and "# veridec check: PASS" in done.stdout, done


@pytest.mark.parametrize("case, message", [
    ({**ONE, "prompt": [[3.0, 4.0]]}, "case: prompt must hold integers"),
    ({**ONE, "prompt": "ab"}, "case: prompt must be a non-empty list"),
    ({**ONE, "prompt": [[3, 4], [5]]}, "the rows must have one length"),
    ({**ONE, "prompt": [[3, 100000]]}, "case: prompt must hold integers in [0, 99]"),
    ({**ONE, "seed": -1}, "case: seed must be an integer in [0, 2**63)"),
    ({**ONE, "seed": True}, "case: seed must be an integer"),
    ({**ONE, "attention_mask": [[1, 2]]}, "case: attention_mask must hold integers in [0, 1]"),
    ({**ONE, "attention_mask": [[1]]}, "case: attention_mask must have the prompt's shape"),
    ({**ONE, "settings": {**ONE["settings"], "threshhold": 0.5}}, "unknown setting(s) ['threshhold']"),
    ({**ONE, "settings": {**ONE["settings"], "steps": 10**9}}, "case: steps must be an integer in [1, 64]"),
    ({**ONE, "settings": {"gen_length": 2, "threshold": {"at_confidence": "x"}}}, "needs an integer r >= 1"),
    ({**ONE, "settings": {"gen_length": 2, "threshold": {"at_confidence": -1}}}, "needs an integer r >= 1"),
    ({"prompt": [[3]]}, "case must be a dict with keys prompt, attention_mask, seed, settings"),
])
def test_a_replayed_case_is_validated_with_one_line(case, message, capsys):
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", "tiny-llada", "--quiet",
                 "--case", json.dumps(case)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "must be a JSON object of metrics"),
    ('{"exact_rate": "high"}', "exact_rate must be a finite number or null"),
    ('{"candidate_model_calls": true}', "candidate_model_calls must be a finite number or null"),
    ("{not json", "not a readable JSON file"),
    ("{}", "holds none of the measures a run is held to"),
    ('{"foo": 1, "bar": 2}', "unknown key(s) ['bar', 'foo']"),
    ('{"exact_rate": 1.0, "exactrate": 0.5}', "'exactrate': did you mean 'exact_rate'?"),
    ('{"samples_per_side": [200], "detectable_tv": 0.2}', "tier S's measures: a tier A baseline cannot hold them"),
    ('{"cases": "many", "exact_rate": 1.0}', "cases must be a finite number or null, got 'many'"),
    ('{"exact_rate": 5.0}', "exact_rate must lie in [0, 1], got 5.0"),
    ('{"exact_rate": -1.0}', "exact_rate must lie in [0, 1], got -1.0"),
    ('{"candidate_model_calls": -3}', "candidate_model_calls must lie in [0, inf), got -3"),
    ('{"exact_rate": 1.0, "drift_by_call": 3}', "drift_by_call must be a JSON list or null"),
])
def test_a_baseline_is_validated_with_one_line(tmp_path, content, message, capsys):
    baseline = tmp_path / "base.json"
    baseline.write_text(content)
    code = main(["check", f"{BROKEN}:stale_cache", "--against", "fastdllm", "--cache", "dual", "--model",
                 "tiny-llada", "--tier", "A", "--trials", "2", "--quiet", "--baseline", str(baseline)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("extra, message", [
    (["--baseline", "b.json"], "--baseline holds tier A's measures; it does not apply to --tier E"),
    (["--samples", "100"], "--samples apply to --tier S only, not --tier E"),
    (["--alpha", "0.05", "--tier", "A"], "--alpha apply to --tier S only, not --tier A"),
    (["--baseline", "some/folder/"], "does not apply to --tier E"),
    (["--no-knobs", "--tier", "S"], "--no-knobs applies to --tier E and A (tier S runs no knob search)"),
])
def test_flags_of_another_tier_are_refused(tmp_path, monkeypatch, extra, message, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", "tiny-llada", "--quiet",
                 *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err


def test_a_reproducer_never_runs_code_from_a_file_name(tmp_path):
    """A candidate file named to break out of a quoted string: the printed snippet, pasted, runs no code of it."""
    marker = tmp_path / "pwned"
    name = 'x");open("pwned","w").write("1");("y.py'
    hostile = tmp_path / name
    shutil.copy(BROKEN, hostile)
    shutil.copy(BROKEN.with_name("fastdllm_dual.py"), tmp_path)  # the broken variants import it
    from veridec.testing import load_candidate

    result = check_decoder(load_candidate(f"{hostile}:one_too_many"), "fastdllm", cache="dual", model="tiny-llada",
                           max_examples=20, knobs=False)
    assert not result.passed
    done = subprocess.run([sys.executable, "-c", result.reproducer], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "the reproducer ran code taken from the candidate's file name"
    assert name in result.command or "'" in result.command  # the shell line quotes it (shlex)


# ------------------------------------------------------------------------ hostile input, third round (sweep 29)
GREEDY_FILE = (f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nfrom oracles.bridge import greedy_candidate\n"
               "\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n"
               "    return greedy_candidate(model, prompt, gen_length, mask_id)\n")


@pytest.mark.parametrize("source, message", [
    ("import sys\nsys.exit(0)\n", "importing it raised SystemExit(0)"),
    ("import os\nos._exit(0)\n", "importing it called os._exit(0)"),
    ("raise KeyboardInterrupt\n", "importing it raised KeyboardInterrupt()"),
    ("class Boom(BaseException):\n    pass\n\nraise Boom('at import')\n", "importing it raised Boom(at import)"),
    ("generate = len\n", "generate is <built-in function len>, not a decoder"),
])
def test_a_candidate_file_that_exits_or_is_no_function_is_one_line(tmp_path, source, message, capsys):
    """At import, the file's exits are refused like a call's (spec EC8): exit 2, the file cannot be loaded."""
    file = tmp_path / "hostile.py"
    file.write_text(source + "\n\ndef unused(model, prompt, gen_length=2):\n    pass\n")
    code = main(["check", f"{file}:generate", "--against", "llada", "--model", "tiny-llada", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert os._exit.__module__ in ("posix", "nt") and __import__("posix")._exit is os._exit  # restored


def test_a_candidate_model_factory_that_exits_is_one_line(tmp_path, capsys):
    factory = tmp_path / "factories.py"
    factory.write_text("import sys\n\ndef exits(source):\n    sys.exit(0)\n")
    code = main(["check", f"{ROOT / 'examples'}/own_model.py:hooked_generate", "--against", "llada",
                 "--model", "tiny-llada", "--quiet", "--candidate-model", f"{factory}:exits"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot be loaded: it raised SystemExit(0)" in err, err


def test_os_exit_bound_at_import_is_the_refusing_one(tmp_path):
    """``from os import _exit`` takes the function at import: load_candidate imports under the guard, so the
    candidate's binding raises like ``os._exit`` itself."""
    from veridec.testing import load_candidate

    file = tmp_path / "bound.py"
    file.write_text("from os import _exit\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n    _exit(0)\n")
    result = check_decoder(load_candidate(f"{file}:generate"), "llada", model="tiny-llada", case=ONE)
    assert not result.passed and "it called os._exit(0)" in result.failure.problems[0], result.failure.problems


WRONG = ("    out = greedy_candidate(model, prompt, gen_length, mask_id)\n"
         "    out[0, -1] = (out[0, -1] + 1) % 90\n    return out\n")  # a FAIL verdict: exit 1


@pytest.mark.parametrize("at_import, in_call", [
    ("import atexit\natexit.register(lambda: os._exit(0))\n", WRONG),  # once turned the FAIL into exit 0
    ("", "    threading.Thread(target=time.sleep, args=(10**6,)).start()\n" + WRONG),  # once kept the process alive
    ("from os import _exit\n", "    _exit(0)\n"),  # once ended the process with 0 and no verdict
], ids=["atexit", "thread", "bound-exit"])
def test_what_the_candidate_leaves_behind_cannot_change_the_exit_code(tmp_path, at_import, in_call):
    """A real process: the check command ends with its verdict's code, whatever the candidate left running."""
    file = tmp_path / "leaves.py"
    file.write_text(f"import os, sys, threading, time\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
                    f"from oracles.bridge import greedy_candidate\n{at_import}\n\n"
                    f"def generate(model, prompt, gen_length=2, mask_id=0):\n{in_call}")
    started = time.monotonic()
    done = check_in_a_process(f"{file}:generate")
    assert done.returncode == 1 and "# veridec check: FAIL" in done.stdout, done
    assert time.monotonic() - started < 100


def test_the_python_reproducer_passes_only_the_settings_the_candidate_takes(tmp_path):
    """A candidate naming gen_length and mask_id only: its reproducer line must not pass block_length or steps."""
    from veridec.testing import load_candidate

    file = tmp_path / "narrow.py"
    file.write_text(GREEDY_FILE.replace("return greedy_candidate(model, prompt, gen_length, mask_id)",
                                        "out = greedy_candidate(model, prompt, gen_length, mask_id)\n"
                                        "    out[0, -1] = (out[0, -1] + 1) % 90\n    return out"))
    result = check_decoder(load_candidate(f"{file}:generate"), "llada", model="tiny-llada", max_examples=5,
                           knobs=False)
    assert not result.passed
    theirs = next(line for line in result.reproducer.splitlines() if line.startswith("theirs = "))
    assert "block_length" not in theirs and "steps" not in theirs, theirs
    done = subprocess.run([sys.executable, "-c", result.reproducer], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def test_a_candidate_path_starting_with_a_dash_prints_a_command_that_runs(tmp_path, monkeypatch):
    """``-rf.py:generate`` pasted as printed would be read as options: the command writes ``./-rf.py``."""
    from veridec.testing import load_candidate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "-rf.py").write_text(GREEDY_FILE.replace("gen_length, mask_id)\n", "gen_length, mask_id) + 1\n"))
    result = check_decoder(load_candidate("-rf.py:generate"), "llada", model="tiny-llada", case=ONE)
    assert not result.passed and result.command.startswith("veridec check ./-rf.py:generate "), result.command
    done = subprocess.run([*SUPERVISED, *shlex.split(result.command)[1:], "--quiet"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and "# veridec check: FAIL" in done.stdout, done


@pytest.mark.parametrize("text, message", [
    ("null", "--case must be a dict (a JSON object) with keys prompt, attention_mask, seed, settings"),
    ("[1, 2]", "--case must be a dict (a JSON object)"),
    ('"a case"', "--case must be a dict (a JSON object)"),
    ("[" * 100_000 + "]" * 100_000, "--case must be JSON as a report prints it: it is nested too deeply"),
    (json.dumps({**ONE, "prompt": [[3, 4]] * 4}), "case: prompt has 4 rows, more than max_batch 3 (--max-batch"),
    (json.dumps({**ONE, "settings": {}}), "case: settings must give gen_length"),
])
def test_a_case_that_is_not_a_case_is_one_line(text, message, capsys):
    """null once fell back to 200 drawn cases and passed; a batch past --max-batch and empty settings passed too."""
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", "tiny-llada", "--quiet",
                 "--case", text])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_baseline_tier_a_wrote_is_accepted_back():
    """Every key tier A writes (with vLLM's rule too) is one a baseline may hold."""
    from veridec.testing.validation import checked_baseline

    result = check_decoder(greedy, "llada", model="tiny-llada", tier="A", max_examples=3, knobs=False,
                           agreement={"top_k": 2})
    assert checked_baseline(json.loads(json.dumps(result.metrics))) and "agreement_rate" in result.metrics


def test_an_unreadable_baseline_names_its_file_and_a_fifo_is_never_read(tmp_path, capsys):
    undecodable = tmp_path / "random.json"
    undecodable.write_bytes(b"\xa3\x00\xff not utf-8")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path, message in ((undecodable, f"--baseline {undecodable}: not a readable JSON file ('utf-8' codec"),
                          (fifo, f"--baseline {fifo}: not a regular file")):
        code = main(["check", f"{BROKEN}:stale_cache", "--against", "fastdllm", "--cache", "dual", "--model",
                     "tiny-llada", "--tier", "A", "--trials", "2", "--quiet", "--baseline", str(path)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_model_whose_logits_are_nan_is_named_when_no_case_can_be_checked(tmp_path, capsys):
    """The target refuses every case: the error quotes its first refusal, not Hypothesis's advice."""
    from veridec.models import random_model, save_pretrained

    model = random_model("llada", 0)
    with __import__("torch").no_grad():
        model.lm_head.weight.fill_(float("nan"))
    save_pretrained(model, tmp_path / "nan-model")
    code = main(["check", f"{BROKEN}:one_too_many", "--against", "fastdllm", "--model", str(tmp_path / "nan-model"),
                 "--quiet", "--trials", "2", "--no-knobs"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "the target refused every case drawn" in err and "NonFiniteLogits" in err and "are nan" in err, err
    assert "assume" not in err and "filter" not in err, err
