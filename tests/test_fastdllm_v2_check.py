"""``veridec check --against fastdllm-v2`` (spec/fastdllm_v2.md): the fastdllm-v2 convention serves the published
modelling's calls (prefill, decode step, store, the block size of each call's mask), and the check holds a decoder
written from the spec alone (examples/fastdllm_v2_sampler.py) against veridec's, with five broken variants caught by
shrunk cases."""

from pathlib import Path

import pytest
import torch

from veridec.adapters import adapt
from veridec.harness.cli import main
from veridec.models.transformer import block_causal_bias
from veridec.testing import check_decoder, load_candidate, load_check_model

EXAMPLES = Path(__file__).parents[1] / "examples"
BROKEN = {"no_token_shift": 1, "boundary_sampled": 1, "commits_outside_sub_block": 1, "non_strict_threshold": 1,
          "row_zero_top_p_for_every_row": 2}  # variant -> the batch its shrunk case needs


def differ(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max |a - b| over the entries finite on both (the check models ban the mask token: -inf)."""
    finite = torch.isfinite(a) & torch.isfinite(b)
    return (a - b)[finite].abs().max().item()


def test_the_convention_serves_the_published_calls():
    """A prefill of two blocks, a decode step (not stored) and a store, as the published generate makes them, give
    the full block-causal forward's raw logits; a call that leaves block_size out gets the published default 32's
    mask (V2.11.6), which differs for blocks of 4 (negative control); the block cache is refused by name."""
    model = load_check_model("tiny-fastdllm-v2")
    x = torch.randint(0, 90, (1, 12), generator=torch.Generator().manual_seed(0))
    raw = model.raw_forward(x, torch.arange(12)[None], attn_bias=block_causal_bias(12, 4)[None, None]).logits[0]
    served = adapt(model, "fastdllm-v2")
    first = served.forward(input_ids=x[:, :8], use_cache=True, update_past_key_values=True, block_size=4)
    assert differ(first.logits[0], raw[:8]) < 1e-5 and first.past_key_values.get_seq_length() == 8
    step = served(input_ids=x[:, 8:], use_cache=True, past_key_values=first.past_key_values, block_size=4)
    assert differ(step.logits[0], raw[8:]) < 1e-5 and step.past_key_values.get_seq_length() == 8
    whole = served(input_ids=x, use_cache=True, block_size=4).logits[0]
    assert differ(whole, raw) < 1e-5
    default = served(input_ids=x, use_cache=True).logits[0]  # blocks of 32: all 12 positions see each other
    assert differ(default, raw) > 1e-3
    with pytest.raises(ValueError, match="use_block_cache"):
        served(input_ids=x, use_cache=True, use_block_cache=True)
    with pytest.raises(ValueError, match="logit shift 1"):
        adapt(load_check_model("tiny-sdar"), "fastdllm-v2")


def candidate(name: str):
    file = "fastdllm_v2_sampler.py" if name == "generate" else "fastdllm_v2_sampler_broken.py"
    return load_candidate(f"{EXAMPLES / file}:{name}")


def test_the_example_from_the_spec_passes_with_its_knobs():
    result = check_decoder(candidate("generate"), "fastdllm-v2", model="tiny-fastdllm-v2", max_examples=40)
    assert result.passed and result.trials == 40, result.markdown()
    assert set(result.knobs) == {"threshold", "small_block_size", "temperature", "top_p"}
    assert all(verdict == "effective" for verdict in result.knobs.values()), result.knobs


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_a_broken_variant_is_caught_with_a_shrunk_case(variant):
    result = check_decoder(candidate(variant), "fastdllm-v2", model="tiny-fastdllm-v2", max_examples=60, knobs=False)
    assert not result.passed and result.failure is not None, variant
    assert len(result.failure.case["prompt"]) == BROKEN[variant] and "--against fastdllm-v2" in result.command
    assert len(result.failure.case["prompt"][0]) == 1  # shrunk to a prompt of one token


def test_the_command_line_check_passes_the_example(capsys):
    code = main(["check", f"{EXAMPLES / 'fastdllm_v2_sampler.py'}:generate", "--against", "fastdllm-v2",
                 "--trials", "8", "--no-knobs", "--quiet"])
    assert code == 0, capsys.readouterr().out


def measured_block_rounding(model) -> float:
    """numerics.tolerance of the check model's block-causal forwards (finite entries: the mask token is banned)
    against a float64 copy, the largest over the drawn block sizes, on a prompt and masks."""
    import copy

    from veridec.numerics import tolerance

    higher = copy.deepcopy(model).double()
    x = torch.tensor([[1, 2, 3, 4, 5, 6] + [model.special.mask_id] * 10])  # [1, 16]
    worst = 0.0
    for b in (4, 8):
        low, high = model(x, block_size=b).logits, higher(x, block_size=b).logits
        finite = torch.isfinite(high)
        worst = max(worst, tolerance(low[finite], high[finite]))
    return worst


def test_tier_a_measures_each_block_calls_logit_error():
    """Each block call's raw logits (query j scores token j + 1) against a block-causal forward of the canvas it
    showed: the example within the measured rounding; a decoder that stores each block at its first step, masks
    and all, reads stale and misplaced keys (the negative control)."""
    sampler = load_candidate(f"{EXAMPLES / 'fastdllm_v2_sampler.py'}:V2Sampler")

    class StoresAtFirstStep(sampler):
        def forward(self, x, start, end, cache, store):
            first = not store and getattr(self, "stored_at", None) != start  # a block's first decode step
            self.stored_at = start
            return super().forward(x, start, end, cache, store or first)

    def stale(model, input_ids, max_new_tokens, mask_id=151665, threshold=1, small_block_size=8, block_size=32,
              stop_token=151645, top_p=0.95, temperature=0):
        return StoresAtFirstStep(model, mask_id, max_new_tokens, block_size, small_block_size, threshold, stop_token,
                                 top_p, temperature).run(input_ids)

    rounding = measured_block_rounding(load_check_model("tiny-fastdllm-v2"))
    run = dict(model="tiny-fastdllm-v2", tier="A", max_examples=10, knobs=False)
    good = check_decoder(candidate("generate"), "fastdllm-v2", **run)
    bad = check_decoder(stale, "fastdllm-v2", **run)
    assert 0 < good.metrics["max_logit_error"] <= rounding, (good.metrics, rounding)
    assert bad.metrics["max_logit_error"] > 1000 * rounding, bad.metrics
