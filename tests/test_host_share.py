"""tools/host_share.py: the shipped decode step (issue 26's cut) records the trace the step of f53ad8f records,
kept verbatim in the tool, on every cache (a short run of what benchmarks/host-share.md measures)."""

from tools import host_share


def test_the_cut_step_records_the_old_steps_trace(monkeypatch):
    monkeypatch.setitem(host_share.SETTINGS, "gen_length", 64)
    monkeypatch.setitem(host_share.SETTINGS, "steps", 64)
    result = host_share.measure(["default"], ["none", "prefix", "dual"], repeats=1)
    assert result["same_trace"] == {"default/none": True, "default/prefix": True, "default/dual": True}
    assert {(r["cache"], r["variant"]) for r in result["rows"]} == {
        (cache, variant) for cache in ("none", "prefix", "dual") for variant in ("before", "after")}
    assert all(r["throughput"]["model_calls"] == r["model_calls"] for r in result["rows"])
    text = host_share.markdown(result)
    assert text.count("| default |") == 3


def test_the_official_rows_pair_each_repeat():
    """Against the official code: the ratio of the minima, and the repeat-by-repeat ratios' range (official
    seconds over veridec's of the same repeat), in the JSON and the table."""
    import torch

    from veridec.models.shipped import load_model
    from veridec.trace import Decoded, Trace

    model = load_model("default")
    prompt = torch.tensor([[1, 2, 3]])
    canvas = torch.tensor([[1, 2, 3, 5, 6, model.special.eos_id]])
    trace = Trace("t", {}, 3, 1)
    trace.counters.model_calls = 4
    theirs = [{"total": 3.0, "canvas": canvas, "calls": 4}, {"total": 2.0, "canvas": canvas, "calls": 4}]
    ours = [{"total": 1.0}, {"total": 1.6}]
    row = host_share.summarise_official("default", "none", theirs, ours, {"total_s": 1.0}, Decoded(canvas, trace),
                                        model, prompt)
    assert row["official_over_veridec"] == 2.0 and row["paired_range"] == [1.25, 3.0]
    assert row["same_tokens"] and row["same_calls"]
    result = {"config": {"device": "cpu", "threads": 1, "torch": "x", "repeats": 2, "prompt_length": 3,
                         "gen_length": 3, "block_length": 3, "official": "NVlabs/Fast-dLLM (legacy loop)"},
              "rows": [], "same_trace": {}, "official": [row]}
    assert "| default | none | 2.0 | 1.0 | 2.0x | 1.25-3.0x | yes | yes |" in host_share.markdown(result)


def test_before_computes_whole_windows_and_after_narrows(monkeypatch):
    """``before`` is f53ad8f's decode, whole-window forwards included; ``after`` the shipped one (narrowed logits):
    the rows of logits each forward returned, per variant."""
    import torch

    from veridec.models.shipped import load_model

    monkeypatch.setitem(host_share.SETTINGS, "gen_length", 64)
    monkeypatch.setitem(host_share.SETTINGS, "steps", 64)
    model = load_model("default")
    rows, inner = [], model.raw_forward

    def counted(*args, **kwargs):
        out = inner(*args, **kwargs)
        rows.append(out.logits.shape[1])
        return out

    model.raw_forward = counted
    prompt = torch.randint(0, model.special.mask_id, (1, 16), generator=torch.Generator().manual_seed(0))
    seen = {}
    for variant in ("before", "after"):
        rows.clear()
        host_share.timed_decode(model, "prefix", prompt, variant)
        seen[variant] = max(rows)
    assert seen == {"before": 16 + 64, "after": 32}
