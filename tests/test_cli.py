"""The veridec command line: generate, verify, argument errors (exit code 2)."""

import json

import pytest
import torch

from veridec.harness.checks import registry
from veridec.harness.cli import main


def test_generate_prints_text_and_summary(tiny_folders, capsys, tmp_path):
    trace_file = tmp_path / "trace.json"
    code = main(["generate", "--prompt", "abc", "--model", str(tiny_folders["llada"]), "--gen-length", "8",
                 "--block-length", "4", "--quiet", "--trace", str(trace_file)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith("abc")
    assert out[1].startswith("steps 8 | full forwards 8 | tokens/step 1.00 |")
    assert json.loads(trace_file.read_text())["decoder"] == "llada"


def test_generate_dream_sampler_with_top_k(tiny_folders, capsys):
    code = main(["generate", "--prompt", "x", "--model", str(tiny_folders["dream"]), "--sampler", "dream",
                 "--gen-length", "6", "--tokens-per-step", "3", "--alg", "maskgit_plus", "--quiet"])
    assert code == 0
    assert "steps 2 | full forwards 2 | tokens/step 3.00" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--gen-length", "10", "--block-length", "4"], "gen_length (10) must be divisible by block_length (4)"),
    (["--gen-length", "8", "--block-length", "4", "--steps", "3"], "steps (3) must be divisible"),
    (["--steps", "0"], "argument --steps: must lie in [1, inf), got 0"),
    (["--temperature", "-0.5"], "argument --temperature: must be a finite number in [0.0, inf)"),
    (["--gen-length", "5000"], "exceeds the model's context of 4096 tokens"),
    (["--device", "cuda:7"], "no such CUDA device"),
    (["--device", "warp-drive"], "is not a device name"),
    (["--prompt", "caf\u00e9"], "cannot encode 'caf\u00e9' faithfully"),
])
def test_generate_bad_arguments_exit_2(tiny_folders, capsys, args, message):
    argv = ["generate", "--prompt", "hi", "--model", str(tiny_folders["llada"]), "--quiet", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("veridec: error: ") and message in err and err.count("\n") == 1


def test_model_folder_errors_exit_2(tmp_path, capsys):
    assert main(["generate", "--prompt", "hi", "--model", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["generate", "--prompt", "hi", "--model", str(tmp_path / "empty")]) == 2
    assert "config.json: missing" in capsys.readouterr().err


def test_verify_runs_every_check_and_writes_json(tiny_folders, capsys, tmp_path):
    out_file = tmp_path / "verify.json"
    code = main(["verify", "--model", str(tiny_folders["llada"]), "--quick", "--quiet", "--json", str(out_file)])
    table = capsys.readouterr().out
    results = json.loads(out_file.read_text())["checks"]
    assert code == 0, table
    assert {r["name"] for r in results} == set(registry.all_checks()) | {"exactness/tier-E-rows"}
    assert all(r["passed"] and r["cases"] > 0 for r in results)
    assert f"{len(results)}/{len(results)} checks passed" in table
    rows = json.loads(out_file.read_text())["exactness"]
    variants = {"reference", "optimized", "prefix", "dual", "spec-none W3D3", "spec-dual W3D3", "spec-none W2D2",
                "spec-dual W2D2", "spec-dual W2D2 inter1"}
    assert len(rows) == 11 * 4 + 5 + 3 + 3 and {r["variant"] for r in rows} == variants | {"block"}
    assert all(r["commit_order_match"] == 1 and r["max_logit_error"] <= (r["logit_tolerance"] or 0)
               for r in rows if r["tier"] == "E")
    assert [(r["variant"], r["tier"]) for r in rows if r["decoder"] == "wino"] == [
        ("reference", "E"), ("optimized", "E"), ("prefix", "A")]  # WINO's rows (spec WN8), events compared
    block = [r for r in rows if r["decoder"] == "editing" and r["variant"] == "block"]  # spec ED8
    assert len(block) == 1 and block[0]["max_logit_error"] <= block[0]["logit_tolerance"]
    assert "| model | decoder | variant | tier |" in table


def test_verify_in_bfloat16_never_loads_a_float64_copy(tiny_folders, capsys, tmp_path, monkeypatch):
    """--dtype bfloat16: the checks run the model in bf16 and measure rounding against a float32 copy (the
    only other dtype loaded: an 8B checkpoint never gets a float64 copy); the decode-level identity that holds
    bit for bit only in float64 says it did not run, and why; the table's records carry the dtype."""
    from veridec.harness import cli

    loaded = []
    real = cli.load_model_arg
    monkeypatch.setattr(cli, "load_model_arg", lambda name, device, dtype=None: loaded.append(dtype) or
                        real(name, device, dtype))
    out_file = tmp_path / "verify.json"
    code = main(["verify", "--model", str(tiny_folders["llada"]), "--quick", "--quiet", "--dtype", "bfloat16",
                 "--json", str(out_file), "--out", str(tmp_path / "table")])
    table = capsys.readouterr().out
    assert code == 0, table
    assert set(loaded) == {torch.bfloat16, torch.float32}
    results = {r["name"]: r for r in json.loads(out_file.read_text())["checks"]}
    skipped = results["reference/batch-equals-single"]
    assert skipped["cases"] == 0 and skipped["detail"].startswith("not run: bit-for-bit only in float64")
    assert results["reference/precision-pair"]["cases"] > 0 and results["model/padding"]["cases"] > 0
    assert all(r["passed"] for r in results.values())
    record = json.loads((tmp_path / "table" / "exactness.records.jsonl").read_text().splitlines()[0])
    assert record["settings"]["dtype"] == "bfloat16"


def test_exactness_in_bfloat16_measures_against_float32(tmp_path, capsys):
    """--dtype bfloat16: the table runs the model in bf16, its tolerance comes from a float32 rerun (never a
    float64 copy), and its records carry the dtype (a float32 rerun in the same --out is refused)."""
    args = ["exactness", "--model", "hmm", "--quick", "--quiet", "--decoders", "sequential", "--out", str(tmp_path)]
    assert main([*args, "--dtype", "bfloat16"]) == 0
    rows = json.loads((tmp_path / "exactness.json").read_text())["rows"]
    spec = [r for r in rows if r["variant"].startswith("spec-")]
    assert spec and all(r["logit_tolerance"] > 1e-2 for r in spec)  # bf16 rounding, not float32's ~1e-5
    assert all(r["commit_order_match"] == 1 for r in rows if r["tier"] == "E")
    record = json.loads((tmp_path / "exactness.records.jsonl").read_text().splitlines()[0])
    assert record["settings"]["dtype"] == "bfloat16"
    assert main(args) == 2  # float32 settings against bfloat16 records: refused (a bad --out, one line)
    assert "other settings" in capsys.readouterr().err


def test_exactness_writes_json_and_markdown(tiny_folders, capsys, tmp_path):
    args = ["exactness", "--model", str(tiny_folders["dream"]), "--quick", "--quiet", "--out", str(tmp_path),
            "--decoders", "sequential,localleap"]
    assert main(args) == 0
    rows = json.loads((tmp_path / "exactness.json").read_text())["rows"]
    assert [(r["decoder"], r["variant"]) for r in rows][:5] == [
        ("sequential", "reference"), ("sequential", "optimized"), ("sequential", "prefix"),
        ("sequential", "dual"), ("localleap", "reference")]
    assert rows[0]["speedup_vs_sequential"] > 0 and rows[0]["hmm_nll_per_token"] is None
    assert (tmp_path / "exactness.md").read_text().startswith("# Exactness table")
    assert main(["exactness", "--model", str(tiny_folders["dream"]), "--decoders", "nope"]) == 2
    assert "--decoders: unknown preset(s) ['nope']; the presets are" in capsys.readouterr().err


def test_verify_exit_code_is_nonzero_when_a_check_fails(tiny_folders, capsys, monkeypatch):
    checks = dict(registry.all_checks())
    checks["test/always-fails"] = registry.Check("test/always-fails", "a deliberately failing check",
                                                 lambda ctx: registry.VerifyResult("test/always-fails", 1, False, -1.0))
    monkeypatch.setattr("veridec.harness.cli.all_checks", lambda: checks)
    code = main(["verify", "--model", str(tiny_folders["llada"]), "--quick", "--quiet", "--only", "always-fails"])
    assert code == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["verify", "--model", str(tiny_folders["llada"]), "--only", "no-such-check"]) == 2


def test_gpu_check_script_runs_on_cpu(tmp_path, capsys):
    from tools import gpu_check
    from veridec.rules.presets import PRESETS

    assert gpu_check.main(["--device", "cpu", "--shape", "tiny", "--repeats", "2", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["tier_e_all_pass"] and len(report["tier_e"]) == 2 * len(PRESETS) + 12 + 4
    assert sum(key.startswith("speculative/") for key in report["tier_e"]) == 12
    assert len(report["foreign_decoders"]) == 5 and all(report["foreign_decoders"].values())
    assert report["timing"]["full_forward_ms"] > 0 and report["timing"]["ratio"] > 0
    bf16 = report["bf16_rounding"]
    assert 0 < bf16["max_logit_error"] and bf16["argmax_agree_where_decided"] == bf16["positions_decided"]
    assert bf16["cached_block_within_tolerance"]


def test_bounds_shows_its_progress_and_time_left_unless_quiet(capsys):
    """A long run (up to 10^9 joints) says how far it is and how long it has left: a tqdm bar on stderr."""
    assert main(["bounds", "--cases", "3000", "--seed", "2"]) == 0
    err = capsys.readouterr().err
    assert "bounds: 100%" in err and "3.00k/3.00k" in err and "joint/s" in err, err
    assert main(["bounds", "--cases", "3000", "--seed", "2", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_bounds_command_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "bounds.json"
    assert main(["bounds", "--cases", "3000", "--seed", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| T1 general certificate |" in printed and "kappa=4/5, tau=3/5" in printed
    report = json.loads(out.read_text())
    assert report["joints_per_minute"] > 0 and len(report["rows"]) == 11
    assert main(["bounds", "--cases", "0"]) == 2


def test_a_speculative_row_that_diverges_at_a_tie_is_still_exact():
    """E3: a speculative row whose first difference from its base is a tie within the measured tolerance counts
    as matching; the tokens after the tie may differ (seen in bf16 on an H200: token match 0.89). Rows without a
    tolerance stay bit-exact."""
    from veridec.harness.exactness import Row

    row = dict(model="m", decoder="d", variant="spec-dual W2D2", tier="E", prompts=2, commit_order_match=1.0,
               token_match=0.89, max_logit_error=0.06, full_forwards=2, positions_per_prompt=10.0,
               tokens_per_step=2.0, seconds=1.0, speedup_vs_sequential=1.0)
    assert Row(**row, logit_tolerance=0.5).exact
    assert not Row(**{**row, "commit_order_match": 0.5}, logit_tolerance=0.5).exact
    assert not Row(**{**row, "max_logit_error": 0.6}, logit_tolerance=0.5).exact
    assert not Row(**{**row, "variant": "dual", "max_logit_error": 0.0}).exact  # token match 0.89: not exact
    assert Row(**{**row, "variant": "dual", "token_match": 1.0, "max_logit_error": 0.0}).exact
