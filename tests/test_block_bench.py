"""tools/block_bench.py on a tiny model (the full run writes benchmarks/block-diffusion.md): both paths give the same
output, the cache computes fewer query positions, and every speed carries its calls, device, dtype and batch."""

from tools import block_bench


def test_the_tiny_benchmark_measures_both_paths():
    result = block_bench.run(block_bench.TINY, 5, 16, [2, 4])
    for row in result["rows"]:
        assert row["cached"]["query_positions"] < row["reference"]["query_positions"]
        assert row["cached"]["full_forwards"] == 0 and row["reference"]["full_forwards"] == row["reference"][
            "model_calls"]
        for side in ("reference", "cached"):
            assert {"tokens_per_second", "model_calls", "device", "dtype", "batch"} <= set(row[side])
    assert "| 4 |" in block_bench.markdown(result)


def test_a_parallel_rule_inside_blocks_is_measured_the_same_way():
    result = block_bench.run(block_bench.TINY, 5, 16, [2, 4], rule="fastdllm")
    assert result["config"]["rule"] == "fastdllm" and "`fastdllm` inside blocks" in block_bench.markdown(result)
    for row in result["rows"]:
        assert row["cached"]["query_positions"] < row["reference"]["query_positions"]
        assert row["cached"]["full_forwards"] == 0 < row["reference"]["full_forwards"]
