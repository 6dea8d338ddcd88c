"""``veridec check --against sdar`` (spec/block_diffusion.md BD9): the hf-block convention serves block diffusion's
calls as the published modelling does, the recording places the commits call by call, and the check holds a
decoder written from the spec alone (examples/sdar_sampler.py) against veridec's, with four broken variants
caught."""

import pytest
import torch

from veridec.adapters import adapt
from veridec.models.transformer import block_causal_bias
from veridec.recording import RecordingModel
from veridec.testing import load_check_model



def differ(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max |a - b| over the entries finite on both (the check models ban the mask token: -inf)."""
    finite = torch.isfinite(a) & torch.isfinite(b)
    assert torch.equal(finite, torch.isfinite(b))
    return (a - b)[finite].abs().max().item()


class Handle:
    """Any object the decoder keeps for its run stands for the cache (a DynamicCache, published)."""


def test_the_convention_serves_the_published_calls():
    """A prefill of two blocks with the block-causal mask, a denoising call and a store, as the published generate
    makes them (4-D mask, 3-D mask), give the full block-causal forward's logits; storing a block twice stores it
    twice (the published DynamicCache appends), which changes the next call's logits."""
    model = load_check_model("tiny-sdar")
    x = torch.randint(0, 90, (1, 12), generator=torch.Generator().manual_seed(0))
    full = model(x, block_size=4).logits[0]  # [12, V]
    sees = (block_causal_bias(12, 4) == 0).float()  # [12, 12] 1 attends
    served, cache = adapt(model, "hf-block"), Handle()
    first = served(x[:, :8], attention_mask=sees[None, None, :8, :8], position_ids=torch.arange(8)[None],
                   past_key_values=cache, use_cache=True, store_kv=True).logits[0]
    assert differ(first, full[:8]) < 1e-5
    third = served(x[:, 8:], attention_mask=sees[None, 8:, :12], position_ids=torch.arange(8, 12)[None],
                   past_key_values=cache, store_kv=False).logits[0]
    assert differ(third, full[8:]) < 1e-5
    served(x[:, 4:8], attention_mask=torch.ones(1, 4, 12), position_ids=torch.arange(4, 8)[None],
           past_key_values=cache, store_kv=True)  # block 1 again: 12 keys stored
    twice = served(x[:, 8:], attention_mask=torch.ones(1, 1, 4, 16), position_ids=torch.arange(8, 12)[None],
                   past_key_values=cache, store_kv=False).logits[0]
    assert differ(twice, full[8:]) > 1e-3
    fresh = served(x[:, :4], attention_mask=None, past_key_values=Handle()).logits[0]  # a new cache: nothing stored
    assert differ(fresh, full[:4]) < 1e-5


def test_the_convention_refuses_what_the_published_code_would_not_pass():
    served = adapt(load_check_model("tiny-sdar"), "hf-block")
    x = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="past_key_values: block diffusion's calls carry the run's cache"):
        served(x, attention_mask=torch.ones(1, 4, 4))
    with pytest.raises(ValueError, match=r"attention_mask must be \[B, Q, K\] or \[B, 1, Q, K\]"):
        served(x, attention_mask=torch.ones(1, 4, 3), past_key_values=Handle())
    with pytest.raises(ValueError, match="booleans or 0/1"):
        served(x, attention_mask=torch.full((1, 4, 4), 0.5), past_key_values=Handle())
    with pytest.raises(ValueError, match="without logit shift"):
        adapt(load_check_model("tiny-dream"), "hf-block")


def test_a_prompt_tail_first_shown_by_its_block_is_no_commit():
    """The recording: the prompt's last token sits in the first decoded block, first shown by that block's call;
    it is the canvas's state then, not a commit (the commits are the generated positions only)."""
    model = load_check_model("tiny-sdar")
    recording = RecordingModel(model)
    served, cache = adapt(recording, "hf-block"), Handle()
    x = torch.tensor([[5, 6, 7, 8, 9, 97, 97, 97]])
    served(x[:, :4], attention_mask=None, past_key_values=cache, store_kv=True)
    served(x[:, 4:], attention_mask=None, position_ids=torch.arange(4, 8)[None], past_key_values=cache)
    final = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    trace = recording.trace(final, 5, model.special.mask_id)
    assert [step.positions[0] for step in trace.steps] == [[], [5, 6, 7]]
    assert trace.counters.model_calls == 2 and trace.counters.full_forwards == 0
    assert trace.counters.query_positions == 8
