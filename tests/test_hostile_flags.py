"""Hostile flags (issue 29): every bad flag, or a flag the chosen mode ignores, is one line on stderr naming the
flag and what it accepts, exit code 2, before any decode; a run that would take hours says so and waits for
--yes. Each case here was once accepted silently, ran out of memory, or failed only after loading the model."""

import json
import sys
import subprocess
import re
import shutil
from pathlib import Path

import pytest

from veridec.harness import cli as cli_module


def refused(result, message: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr that contains ``message`` (a regular expression)."""
    code, out, err = result
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith("veridec: error: ") and re.search(message, err), err


# ------------------------------------------------------------------------------------ 1. generate --steps
@pytest.mark.parametrize("argv, message", [
    (["--gen-length", "4", "--steps", "1000000000"],
     r"--steps: must lie in \[1, 4\] for --sampler llada with --gen-length 4 .*commits nothing.*got 1000000000"),
    (["--gen-length", "4", "--steps", "5"], r"--steps: must lie in \[1, 4\] for --sampler llada"),
    (["--sampler", "dream", "--gen-length", "4", "--steps", "17"],
     r"--steps: must lie in \[1, 16\] for --sampler dream with --gen-length 4 \(at most 4 Dream steps"),
    (["--gen-length", "4", "--steps", "2", "--tokens-per-step", "2"], r"--steps does not apply with --tokens-per-step"),
])
def test_generate_steps_past_what_a_decode_uses_are_refused(cli, tiny_folders, argv, message):
    refused(cli("generate", "--prompt", "ab", "--model", tiny_folders["llada"], "--quiet", *argv), message)


def test_generate_steps_at_the_bound_still_decode(cli, tiny_folders):
    """The bound keeps every valid schedule: LLaDA one step per token, Dream more steps than tokens (as the
    official golden cases take)."""
    code, out, _ = cli("generate", "--prompt", "ab", "--model", tiny_folders["llada"], "--gen-length", "4",
                       "--steps", "4", "--quiet")
    assert code == 0 and "steps 4 |" in out
    code, out, _ = cli("generate", "--prompt", "ab", "--model", tiny_folders["dream"], "--sampler", "dream",
                       "--gen-length", "2", "--steps", "5", "--quiet")
    assert code == 0 and "steps 5 |" in out


# -------------------------------------------------------------------------------- 2. bounds flags per mode
def test_bounds_temperature_without_decoders_is_refused(cli):
    refused(cli("bounds", "--cases", "10", "--temperature", "0.5"), r"--temperature applies to --decoders only")


# ------------------------------------------------------------------------------ 3. exactness --quick sizes
@pytest.mark.parametrize("argv, message", [
    (["--gen-length", "1000000"], r"--quick sets the size \(2 prompts, gen length 32\); drop --gen-length or --quick"),
    (["--gen-length", "33", "--block-length", "32"], r"drop --gen-length or --quick"),
    (["--prompts", "3"], r"drop --prompts or --quick"),
    (["--prompts", "8", "--gen-length", "64"], r"drop --prompts and --gen-length or --quick"),
    (["--block-length", "64"], r"--quick's gen length 32 must be a multiple of --block-length 64"),
])
def test_exactness_quick_refuses_an_explicit_size(cli, tiny_folders, tmp_path, argv, message):
    refused(cli("exactness", "--quick", "--model", tiny_folders["llada"], "--out", tmp_path, *argv), message)


# ------------------------------------------------------------------------------- 4. exactness past context
def test_exactness_past_the_models_context_is_refused_before_the_table(cli, tiny_folders, tmp_path):
    from veridec.models import load_pretrained

    context = load_pretrained(tiny_folders["llada"], device="meta").max_length
    gen = (context // 32 + 1) * 32
    refused(cli("exactness", "--model", tiny_folders["llada"], "--prompts", "1", "--gen-length", gen,
                "--out", tmp_path / "out"),
            rf"--gen-length {gen}: the longest of the 1 prompts \(\d+ tokens\) \+ {gen} exceeds the context of model "
            rf".* \({context} tokens\); --gen-length must lie in \[32, \d+\]")
    assert not (tmp_path / "out" / "exactness.records.jsonl").exists()


def test_exactness_on_the_shipped_model_names_its_context(cli, tmp_path):
    refused(cli("exactness", "--prompts", "1", "--gen-length", "1000000", "--out", tmp_path),
            r"--gen-length 1000000: .* exceeds the context of model 'default' \(1024 tokens\)")


# ------------------------------------------------------------------------------------ 5. the meta device
@pytest.mark.parametrize("command", [["generate", "--prompt", "ab", "--gen-length", "4"], ["verify", "--quick"],
                                     ["exactness", "--quick"]])
def test_the_meta_device_is_refused(cli, tiny_folders, tmp_path, command):
    refused(cli(*command, "--model", tiny_folders["llada"], "--device", "meta", *(
        ["--out", tmp_path] if command[0] == "exactness" else [])),
        r"--device meta: the meta device holds shapes but no values")


def test_a_backend_this_build_lacks_is_refused(cli, tiny_folders):
    refused(cli("generate", "--prompt", "ab", "--model", tiny_folders["llada"], "--device", "xla"),
            r"--device xla: this torch build cannot run on it")


# ------------------------------------------------------------------------- 6. EOS and pad vs the tokenizer
def copy_folder(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def folder_with(tiny_folders, tmp_path, key: str) -> Path:
    folder = copy_folder(tiny_folders["llada"], tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    config[key] = 5  # the tokenizer's EOS and pad are <|endoftext|>, id 98
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_config_eos_the_tokenizer_disagrees_with_is_named_in_one_line(tiny_folders, tmp_path):
    """A warning, not a refusal (official chat releases pair a config's end-of-text with a tokenizer's
    end-of-turn): one line in a real process, saying which id decoding uses."""
    folder = folder_with(tiny_folders, tmp_path, "eos_token_id")
    done = subprocess.run([sys.executable, "-m", "veridec.harness.cli", "generate", "--prompt", "ab", "--model",
                           str(folder), "--gen-length", "4", "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^veridec: warning: .*config.json: eos_token_id 5 differs from the tokenizer's EOS token "
                     r"'<\|endoftext\|>' \(id 98, .*tokenizer_config.json\); decoding uses config.json's 5 "
                     r"\(a tokenizer from another model\?\)$",
                     done.stderr, re.M), done.stderr


def test_a_config_pad_the_tokenizer_disagrees_with_is_named(cli, tiny_folders, tmp_path):
    folder = folder_with(tiny_folders, tmp_path, "pad_token_id")
    with pytest.warns(UserWarning, match=r"pad_token_id 5 differs from the tokenizer's pad token"):
        code, _, err = cli("generate", "--prompt", "ab", "--model", folder, "--gen-length", "4", "--quiet")
    assert code == 0, err


# ------------------------------------------------------------------------------- 7. long bounds runs
def stub_laws(monkeypatch, seconds_per_oracle: float):
    """decoder_table's laws replaced by constant ones (instant), and its clock made to say each oracle took
    ``seconds_per_oracle``: the size check runs as it would on a slow table."""
    from veridec.proofs_checks import laws

    law = {(0, 0, 0, 0): 1.0}
    monkeypatch.setattr(laws, "joint_law", lambda *a, **k: law)
    monkeypatch.setattr(laws, "decoder_law", lambda *a, **k: law)
    monkeypatch.setattr(laws, "random_order_law", lambda *a, **k: (law, 0.0))
    clock = iter(range(0, 10**9, int(seconds_per_oracle)))
    monkeypatch.setattr(laws, "perf_counter", lambda: next(clock))


def test_bounds_decoders_past_an_hour_needs_yes(cli, monkeypatch, tmp_path):
    stub_laws(monkeypatch, 40)
    refused(cli("bounds", "--decoders", "--cases", "100000"),
            r"bounds --decoders --cases 100000: about 46\.3 days \(40 s per oracle, measured on the first\), over 1 "
            r"hour: pass --yes to run it, or lower --cases")
    stub_laws(monkeypatch, 40)
    code, out, err = cli("bounds", "--decoders", "--cases", "100", "--yes", "--quiet", "--json", tmp_path / "l.json")
    assert code == 0 and "| sequential | confidence | enumerated | 100 |" in out and err == "", err
    stub_laws(monkeypatch, 40)
    code, out, err = cli("bounds", "--decoders", "--cases", "10")  # 400 s: said, not refused
    assert code == 0 and err.startswith("veridec: bounds --decoders --cases 10: about 7 min (40 s per oracle"), err


def test_bounds_past_an_hour_needs_yes(cli, monkeypatch):
    from veridec.proofs_checks import table

    monkeypatch.setattr(table, "seconds_per_joint", lambda seed: 1e-5)
    refused(cli("bounds", "--cases", "1000000000"),
            r"bounds --cases 1000000000: about 2\.8 h \(10 us per joint, measured on a sample of each shape\), over "
            r"1 hour: pass --yes")


def test_the_first_oracle_of_the_table_is_measured_and_the_table_unchanged():
    """The rate comes from the first oracle the table needs anyway (nothing computed twice), reported before
    the others; the table is the one computed oracle after oracle without the callback."""
    from veridec.proofs_checks.laws import decoder_table

    seen = []
    rows = decoder_table(cases=2, seed=3, symbols=2, gen_length=2, on_first_case=seen.append)
    assert len(seen) == 1 and seen[0] > 0
    assert rows == decoder_table(cases=2, seed=3, symbols=2, gen_length=2)
    assert all(r["cases"] == 2 for r in rows) and len(rows) == 2 * (11 + 4)


def test_the_duration_rounding_reads_naturally():
    assert [cli_module.duration(s) for s in (3, 400, 7200, 10**6)] == ["3 s", "7 min", "2.0 h", "11.6 days"]
