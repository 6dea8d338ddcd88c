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
