"""tools/gpu_bench.py works the first time on a device (issue 47): the documented 8-minute plan's exact argument
list runs end to end in its --tiny form on the CPU (the compiled path on ``aot_eager``), every part written as it
ends; the device failures seen on the first GPU run are simulated here: an official model left on the host
(a ``.to`` that moves nothing) stops the run with one line, a part past its limit is recorded and the run goes
on, a killed run keeps its finished parts."""

import json
import time

import pytest
import torch
from torch import nn

from tools import gpu_bench

SPEED = {"tokens_per_second", "tokens", "seconds", "model_calls", "device", "dtype", "batch", "tokens_per_call",
         "ms_per_call"}
TINY_FORM = ["--tiny", "--device", "cpu", "--compile-backend", "aot_eager"]


def test_the_plan_runs_in_its_tiny_form(tmp_path, capsys):
    started = time.perf_counter()
    assert gpu_bench.main([*gpu_bench.PLAN, *TINY_FORM, "--out", str(tmp_path)]) == 0
    seconds = time.perf_counter() - started
    (written,) = tmp_path.glob("*-tiny-4-layers.json")
    result = json.loads(written.read_text())
    parts = result["parts"]
    assert list(parts) == ["setup", "forwards", "decodes b1 g16", "decodes b2 g16", "block diffusion", "speculation",
                           "syncs", "termination", "profile"]  # no official folder: no official part
    failed = {name: part["result"] for name, part in parts.items()
              if not isinstance(part["result"], (dict, list)) or {"error", "timed_out", "skipped"} & set(
                  part["result"] if isinstance(part["result"], dict) else {})}
    assert not failed, failed
    assert all(0 < part["limit_s"] <= gpu_bench.PART_LIMITS_S[kind] for part, kind in zip(parts.values(), (
        "setup", "forwards", "decodes", "decodes", "block diffusion", "speculation", "syncs", "termination",
        "profile")))
    assert {"device", "dtype", "batches", "gens", "weight_bytes", "weight_bytes_all_layers", "bandwidth_tbs",
            "official", "throughput", "part_limits_s"} <= set(result["config"])
    assert result["config"]["layers"] == 4 and result["config"]["official"].startswith("skipped: no --fastdllm")
    calibration = parts["setup"]["result"]
    assert calibration["target_tokens_per_step"] == 3.0 and calibration["measured_tokens_per_step"] > 1
    forwards = parts["forwards"]["result"]
    assert {"per_layer_ms", "extrapolated_ms", "over_bound"} <= set(forwards[0])
    assert {"eager_block_step_ms", "compiled_block_step_ms", "full_forward_ms"} <= set(forwards[0]["per_layer_ms"])
    for name in ("decodes b1 g16", "decodes b2 g16"):
        variants = parts[name]["result"]["variants"]
        batch = parts[name]["result"]["batch"]
        for variant in ("veridec eager dual", "veridec eager prefix", "veridec compiled dual"):
            assert SPEED <= set(variants[variant]), (variant, variants[variant])
            assert variants[variant]["batch"] == batch and variants[variant]["tokens"] == 16 * batch
        assert variants["veridec compiled dual"]["same_tokens"] and variants["veridec compiled dual"]["same_calls"]
        assert variants["official"]["skipped"]
    compiled_rows = [row for name, row in parts["block diffusion"]["result"]["variants"].items() if "compiled" in name]
    assert len(compiled_rows) == 2 and all(row["same_tokens"] and row["same_calls"] for row in compiled_rows)
    assert parts["syncs"]["result"]["inside_block_per_cached_step"] == 0
    termination = parts["termination"]["result"]
    assert termination["compiled"] and termination["cached_steps"] == termination["model_calls"] - termination[
        "blocks"] > 0 and {"read_cost_ms_per_cached_step", "lagged_read_would_save"} <= set(termination)
    spec = parts["speculation"]["result"]
    assert {"base", "W2D2", "chain W1D4"} <= set(spec) and "same_tokens" in spec["W2D2"]
    assert set(parts["profile"]["result"]) == {"eager", "compiled"} and parts["profile"]["result"]["eager"]
    assert set(result["goals"]) == {
        "eager_block_step_over_full_forward_b1", "compiled_block_step_over_bandwidth_bound_b1",
        "compiled_over_official_b1_g16", "compiled_over_official_b2_g16", "speculation_wall_over_base_b1",
        "host_syncs_per_cached_step"}
    print(f"the tiny plan ran in {seconds:.1f} s")


def test_the_scripted_termination_takes_the_decodes_own_steps_and_no_read():
    """The termination part's control: the decode's own schedule gives its tokens and calls with no termination
    read (tools/step_gates.py's counter); a schedule one step short in a block does not."""
    from tools.step_gates import decode_costs, structured_model

    model = structured_model(1)
    prompt = torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(1))
    settings = dict(steps=16, gen_length=16, block_length=8, threshold=0.9)
    read = decode_costs(model, prompt, **settings)
    schedule = gpu_bench.steps_per_block(read["trace"])
    with gpu_bench.scripted_termination(schedule):
        unread = decode_costs(model, prompt, **settings)
    assert torch.equal(unread["canvas"], read["canvas"]) and unread["cached_steps"] == read["cached_steps"] > 0
    assert read["termination_reads_per_cached_step"] > 0 == unread["termination_reads_per_cached_step"]
    short = {**schedule, 0: schedule[0] - 1}
    with gpu_bench.scripted_termination(short):
        cut = decode_costs(model, prompt, **settings)
    assert cut["cached_steps"] != read["cached_steps"]


def test_the_plan_is_documented_and_printed(capsys):
    from pathlib import Path

    assert gpu_bench.main(["--print-plan"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == " ".join(gpu_bench.PLAN)
    assert printed in (Path(gpu_bench.ROOT) / "docs" / "gpus.md").read_text()


class LeftBehind(nn.Linear):
    """An official model whose ``.to`` moves nothing (the official ``LLaDAModelLM`` ignored the device)."""

    def to(self, *args, **kwargs):
        return self


def test_an_official_model_left_on_the_host_stops_the_run_with_one_line():
    with pytest.raises(SystemExit) as stopped:
        gpu_bench.place_official(LeftBehind(2, 2), torch.device("meta"))
    message = str(stopped.value)
    assert "\n" not in message and "has tensors on cpu, not on meta" in message
    moved = gpu_bench.place_official(nn.Linear(2, 2), torch.device("meta"))  # control: a real move passes
    assert moved.weight.device.type == "meta"
    with pytest.raises(SystemExit, match="returned its canvas on cpu, not on meta"):
        gpu_bench.check_output_device(torch.zeros(1, 2), torch.device("meta"), "the official generate")


def test_the_stop_is_written_to_the_json_before_the_run_ends(tmp_path):
    run = gpu_bench.Report(tmp_path / "r.json", budget_s=60, scale=1.0)
    with pytest.raises(SystemExit):
        run.part("official", "official", lambda: gpu_bench.place_official(LeftBehind(2, 2), torch.device("meta")))
    assert "not on meta" in json.loads((tmp_path / "r.json").read_text())["parts"]["official"]["stopped"]


def test_a_part_past_its_limit_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(gpu_bench.PART_LIMITS_S, "syncs", 0.2)
    run = gpu_bench.Report(tmp_path / "r.json", budget_s=60, scale=1.0)

    def forever():
        while True:
            time.sleep(0.01)

    assert run.part("syncs", "syncs", forever) is None
    seen = {}
    run.part("profile", "profile", lambda: seen.update(json.loads((tmp_path / "r.json").read_text())) or {"ok": 1})
    assert seen["parts"]["syncs"]["result"] == {"timed_out": "stopped after its limit of 0 s"}  # written at once
    written = json.loads((tmp_path / "r.json").read_text())["parts"]
    assert written["profile"]["result"] == {"ok": 1}
    assert run.part("setup", "setup", lambda: {"never": 1}, None) is None  # a part whose input is missing
    assert "skipped" in json.loads((tmp_path / "r.json").read_text())["parts"]["setup"]["result"]


def test_a_spent_budget_skips_the_remaining_parts(tmp_path):
    run = gpu_bench.Report(tmp_path / "r.json", budget_s=0, scale=1.0)
    assert run.part("setup", "setup", lambda: {"never": 1}) is None
    assert "budget" in run.result["parts"]["setup"]["result"]["skipped"]


def test_the_layer_count_is_checked():
    with pytest.raises(SystemExit):
        gpu_bench.parse(["--layers", "33"])
    assert gpu_bench.parse(["--layers", "4"]).layers == 4 and gpu_bench.parse(["--tiny"]).layers == 2
