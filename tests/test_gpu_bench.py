"""tools/gpu_bench.py runs end to end on the CPU (``--tiny``, the compiled path on ``aot_eager``): every part of
the GPU report is there, each speed in veridec.throughput's terms, compiled decoding equal to eager."""

import json

from tools import gpu_bench

SPEED = {"tokens_per_second", "tokens", "seconds", "model_calls", "device", "dtype", "batch"}


def test_tiny_run_writes_every_part(tmp_path):
    assert gpu_bench.main(["--tiny", "--device", "cpu", "--compile-backend", "aot_eager", "--out",
                           str(tmp_path)]) == 0
    (written,) = tmp_path.glob("*-tiny.json")
    result = json.loads(written.read_text())
    assert set(result) == {"config", "decodes", "forwards", "speculation", "profile", "goals", "seconds"}
    assert {"device", "dtype", "batches", "gens", "weight_bytes", "bandwidth_bound_ms", "official",
            "throughput"} <= set(result["config"])
    assert result["config"]["official"].startswith("skipped: no --fastdllm folder")
    assert [(c["batch"], c["gen"]) for c in result["decodes"]] == [(1, 16), (2, 16)]
    for config in result["decodes"]:
        variants = config["variants"]
        for name in ("veridec eager dual", "veridec eager prefix", "veridec compiled dual"):
            assert SPEED <= set(variants[name]), (name, variants[name])
            assert variants[name]["batch"] == config["batch"] and variants[name]["tokens"] == 16 * config["batch"]
        compiled = variants["veridec compiled dual"]
        assert compiled["same_tokens"] and compiled["same_calls"]  # aot_eager: compiled is eager, exactly
        assert variants["official"]["skipped"]
    for row in result["forwards"]:
        assert {"full_forward_ms", "eager_block_step_ms", "compiled_refresh_ms", "compiled_block_step_ms",
                "compiled_block_step_over_bound"} <= set(row)
    spec = result["speculation"]
    assert {"base", "W2D2", "chain W1D4"} <= set(spec) and "same_tokens" in spec["W2D2"]
    assert set(result["profile"]) == {"eager", "compiled"} and result["profile"]["eager"]
    assert set(result["goals"]) == {"compiled_over_official_b1_first_gen", "compiled_block_step_over_bandwidth_bound",
                                    "eager_over_official", "speculation_wall_over_base_b1"}
