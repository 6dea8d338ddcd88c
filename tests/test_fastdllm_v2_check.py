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
