"""The experiments (``veridec experiment ...``) and the workload helpers they share."""

import torch

from veridec.harness.experiments.models import fill_masks
from veridec.harness.workloads import generated_lines
from veridec.models import random_model
from veridec.oracles import HMMOracle


def masked_canvas(hmm, length, seed):
    g = torch.Generator().manual_seed(seed)
    x = hmm.sample(1, length, generator=g)
    return x.masked_fill(torch.rand(x.shape, generator=g) < 0.6, hmm.special.mask_id)


def test_fill_masks_fills_everything_at_the_requested_pace():
    hmm = HMMOracle.random(3, 4, seed=0, concentration=0.3)
    x = masked_canvas(hmm, 20, seed=1)
    masks = int((x == hmm.special.mask_id).sum())
    one, trace_one = fill_masks(hmm, x, per_step=1)
    four, trace_four = fill_masks(hmm, x, per_step=4)
    loose, trace_loose = fill_masks(hmm, x, threshold=0.5)
    for canvas in (one, four, loose):
        assert not (canvas == hmm.special.mask_id).any()
        assert torch.equal(canvas[x != hmm.special.mask_id], x[x != hmm.special.mask_id])
    assert trace_one.counters.full_forwards == masks
    assert trace_four.counters.full_forwards == -(-masks // 4)
    assert all(len(step.positions[0]) >= 1 for step in trace_loose.steps)


def test_generated_lines_stop_at_eos_and_drop_a_cut_line():
    model = random_model("llada", 0)
    tok = model.tokenizer
    prompt = tok("count 1 ")["input_ids"]
    ended = torch.tensor(prompt + tok("2 3\ncopy ab>ab")["input_ids"] + [model.special.eos_id] * 3)
    assert generated_lines(model, ended, len(prompt), "count 1 ") == (["count 1 2 3", "copy ab>ab"], True)
    cut = torch.tensor(prompt + tok("2 3\ncopy ab>")["input_ids"])
    assert generated_lines(model, cut, len(prompt), "count 1 ") == (["count 1 2 3"], False)


def test_experiment_parallel_reports_steps_and_quality(tmp_path):
    from veridec.harness.experiments import parallel as experiment_parallel

    report = experiment_parallel.run(tmp_path, quick=True, presets=["sequential", "fastdllm", "localleap", "wino"])
    rows = {(r["model"], r["decoder"], r["variant"]): r for r in report["rows"]}
    assert len(rows) == 2 * 4 * 2
    wino = rows["hmm", "wino", "reference"]  # WINO beside Fast-dLLM and LocalLeap on the HMM world: exact NLL
    assert 1 <= wino["steps_per_prompt"] < report["gen_length"] and wino["quality"] > 0
    assert wino["tokens_per_step"] == round(report["gen_length"] / wino["steps_per_prompt"], 3)
    assert rows["hmm", "sequential", "reference"]["steps_per_prompt"] == report["gen_length"]
    assert rows["default", "sequential", "reference"]["tokens_per_step"] == 1
    assert all(0 <= r["quality"] <= 1 for r in report["rows"] if r["quality_metric"] == "validity")
    assert set(report["localleap_vs_fastdllm_steps"]) == {"default/reference", "default/dual", "hmm/reference",
                                                          "hmm/dual"}
    assert (tmp_path / "parallel.md").read_text().startswith("# Parallel decoders")


def test_experiment_speculative_reports_identical_outputs_in_fewer_calls(speculative_quick):
    report, out = speculative_quick
    rows = report["rows"]
    assert all(r["identical_to_base"] for r in rows.values() if r["base"])
    assert rows["chain W1D4, dual"]["model_calls_per_prompt"] < rows["sequential, dual cache"]["model_calls_per_prompt"]
    assert rows["Fast-dLLM + intra W2D2(3)"]["calls_reduction_vs_base"] > 1
    assert (out / "speculative.md").read_text().startswith("# Speculative decoding")


def test_experiment_fastguide_writes_every_table_and_plot(tmp_path):
    """The report's shape on a tiny random reward (the shipped reward is exercised by the command itself)."""
    from veridec.guidance import load_reward_model
    from veridec.guidance.tiny import write_tiny_reward_model
    from veridec.harness.experiments import fastguide as experiment_fastguide
    from veridec.models.shipped import load_model

    reward = load_reward_model(write_tiny_reward_model(tmp_path / "reward"), load_model("default").tokenizer)
    report = experiment_fastguide.run(tmp_path / "out", sizes=(1, 12), reward=reward)
    table = report["table"]
    assert {"Sequential (EntRGi)", "Best-of-N (4)", "FastGuide (k 8)", "FastGuide exact (k 8)",
            "dapd-hq (cached guidance)"} <= set(table)
    assert all(len(row["scores"][0]) == 4 for row in table.values())
    assert table["Sequential (EntRGi)"]["tokens_per_step"] == 1 and report["speedup"] > 0
    gain = report["top1_gain_over_bon"]["fastguide"]  # one prompt: a mean, no standard error
    best = {name: max(table[name]["scores"][0]) for name in ("FastGuide (k 8)", "Best-of-N (4)")}
    assert gain["mean"] == round(best["FastGuide (k 8)"] - best["Best-of-N (4)"], 4)
    assert gain["stderr"] is None
    assert set(report["sweeps"]["window"]) == {"0", "1", "2", "4", "8", "exact"}
    assert set(report["sweeps"]["order"]) == {"confidence", "reverse-confidence", "left-to-right", "random"}
    assert all(row["tokens_per_step"] == 4 for row in report["sweeps"]["order"].values())  # k 4, no deferral
    assert (tmp_path / "out" / "fastguide.png").stat().st_size > 0
    assert "retention" in (tmp_path / "out" / "fastguide.md").read_text()


def test_experiment_models_reports_each_section(tmp_path):
    """The quick models experiment: every decoder of each section has its row (units summed per decoder), the
    one-token-per-step decoders take one token per step, and the HMM world scores every continuation."""
    from veridec.harness.experiments import models as experiment_models

    report = experiment_models.run(tmp_path, quick=True, quiet=True)
    assert set(report["prompt_mode"]) == set(experiment_models.prompt_decoders(32))
    assert set(report["infill_mode"]) == set(experiment_models.infill_decoders())
    assert report["prompt_mode"]["llada low_confidence"]["tokens_per_step"] == 1
    assert report["infill_mode"]["sequential"]["tokens_per_step"] == 1
    world = report["hmm_world"]
    assert all(0 < row["nll_per_token"] < 5 for name, row in world.items() if isinstance(row, dict))
    assert 0 < world["true_continuations_nll_per_token"] < 5
    assert (tmp_path / "models.records.jsonl").read_text().count("\n") == 5 * 8 + 3 * 8 + 5 * 8
