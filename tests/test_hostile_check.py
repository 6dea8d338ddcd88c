"""Hostile input to ``veridec check`` (issue: hostile input, second round): a candidate may not end the check or
change what it was given, a replayed case and a baseline are validated, flags of another tier are refused, and a
reproducer never runs code taken from a file's name. Each: one clear line, the right exit code."""

import json
import shutil
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


@pytest.mark.parametrize("candidate, message", [
    (exits, "it raised SystemExit(0): a candidate may not end the check"),
    (interrupts, "it raised KeyboardInterrupt(): a candidate may not end the check"),
    (writes_into_its_prompt, "changed the prompt or attention mask it was given (in place)"),
    (floats, "must return integer token ids, got a tensor of dtype torch.float32"),
])
def test_a_candidate_cannot_end_the_check_or_pass_with_bad_output(candidate, message):
    assert check_decoder(greedy, "llada", model="tiny-llada", case=ONE).passed  # the control
    result = check_decoder(candidate, "llada", model="tiny-llada", case=ONE)
    assert not result.passed and message in result.failure.problems[0], result.failure.problems


def test_the_command_gives_a_verdict_when_the_candidate_exits(tmp_path, capsys):
    file = tmp_path / "exits.py"
    file.write_text("import sys\n\ndef generate(model, prompt, gen_length=2, mask_id=0):\n    sys.exit(0)\n")
    code = main(["check", f"{file}:generate", "--against", "llada", "--model", "tiny-llada", "--quiet",
                 "--case", json.dumps(ONE)])
    out = capsys.readouterr().out
    assert code == 1 and "# veridec check: FAIL" in out and "SystemExit(0)" in out


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
