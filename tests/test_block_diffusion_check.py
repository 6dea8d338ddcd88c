"""``veridec check --against sdar`` (spec/block_diffusion.md BD9): the hf-block convention serves block diffusion's
calls as the published modelling does, the recording places the commits call by call, and the check holds a
decoder written from the spec alone (examples/sdar_sampler.py) against veridec's, with four broken variants
caught."""

import copy
from pathlib import Path

import pytest
import torch

from veridec.adapters import adapt
from veridec.harness.cli import main
from veridec.models.transformer import block_causal_bias
from veridec.numerics import tolerance
from veridec.recording import RecordingModel
from veridec.testing import check_decoder, load_candidate, load_check_model



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


# ---------------------------------------------------------------------------------------------- the check
EXAMPLES = Path(__file__).parents[1] / "examples"
RUN = dict(model="tiny-sdar", max_batch=1, padding=False)
BROKEN = {"sees_the_next_block": 1, "stores_before_final": 1, "dynamic_threshold_on_committed": 1,
          "row_zero_sample_for_every_row": 2}  # variant -> the batch it needs
OVERWRITE = {"prompt": [[5]], "attention_mask": None, "seed": 1,  # quota 4 > 3 masks in the first block: BD7.3
             "settings": {"gen_length": 7, "block_length": 4, "denoising_steps": 1, "temperature": 1.0, "top_k": 0,
                          "top_p": 1.0, "remasking_strategy": "low_confidence_static", "confidence_threshold": 0.85,
                          "stopping_criteria_idx": None}}


def candidate(name: str):
    file = "sdar_sampler.py" if name == "generate" else "sdar_sampler_broken.py"
    return load_candidate(f"{EXAMPLES / file}:{name}")


def test_the_example_from_the_spec_passes_with_its_knobs():
    result = check_decoder(candidate("generate"), "sdar", max_examples=60, **RUN)
    assert result.passed and result.trials == 60, result.markdown()
    assert {"denoising_steps", "top_k", "top_p", "remasking_strategy", "temperature", "block_length"} <= {
        name for name, verdict in result.knobs.items() if verdict == "effective"}, result.knobs
    batched = check_decoder(candidate("generate"), "sdar", model="tiny-sdar", max_batch=3, padding=False,
                            max_examples=25, knobs=False)
    assert batched.passed, batched.markdown()


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_a_broken_variant_is_caught_with_a_shrunk_case(variant):
    result = check_decoder(candidate(variant), "sdar", model="tiny-sdar", max_batch=BROKEN[variant], padding=False,
                           max_examples=60, knobs=False)
    assert not result.passed and result.failure is not None, variant
    assert len(result.failure.case["prompt"]) == BROKEN[variant] and "--against sdar" in result.command


def measured_block_rounding(model) -> float:
    """numerics.tolerance of the check model's block-causal forwards (finite entries: the mask token is banned)
    against a float64 copy, the largest over the check's block sizes, on a prompt and masks."""
    higher = copy.deepcopy(model).double()
    x = torch.tensor([[1, 2, 3, 4, 5, 6] + [model.special.mask_id] * 10])  # [1, 16]
    worst = 0.0
    for b in (1, 2, 4, 8):
        low, high = model(x, block_size=b).logits, higher(x, block_size=b).logits
        finite = torch.isfinite(high)
        worst = max(worst, tolerance(low[finite], high[finite]))
    return worst


def test_tier_a_measures_each_block_calls_logit_error():
    """BD9: a block call's logits against a block-causal forward of the canvas it showed. The example is within
    the measured rounding; a decoder that stores a block's K/V before the block is final reads stale keys."""
    model = load_check_model("tiny-sdar")
    rounding = measured_block_rounding(model)
    good = check_decoder(candidate("generate"), "sdar", tier="A", max_examples=20, knobs=False, **RUN)
    stale = check_decoder(candidate("stores_before_final"), "sdar", tier="A", max_examples=20, knobs=False, **RUN)
    assert 0 < good.metrics["max_logit_error"] <= rounding, (good.metrics, rounding)
    assert stale.metrics["max_logit_error"] > 1000 * rounding, stale.metrics


def published_like():
    """The example with the published selection (BD10): the quota uncapped, torch.topk over confidences -inf off the
    masks (an over-quota step writes over committed tokens), an IndexError past the schedule."""
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        from sdar_sampler import SdarSampler
    finally:
        sys.path.remove(str(EXAMPLES))

    class Published(SdarSampler):
        def quota(self, s, masked):
            if s >= self.steps:
                raise IndexError("past the schedule")
            return self.b // self.steps + (1 if s < self.b % self.steps else 0)

        def most_confident(self, masked, confidence, n):
            return torch.topk(torch.where(masked, confidence, -torch.inf), n).indices

    def generate(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8, temperature=1.0,
                 top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic", confidence_threshold=0.85,
                 stopping_criteria_idx=None):
        return Published(model, mask_id, gen_length, block_length, denoising_steps, temperature, top_k, top_p,
                         remasking_strategy, confidence_threshold, None, stopping_criteria_idx).run(prompt)

    return generate


def test_where_the_published_code_overwrites_only_its_own_output_matches():
    """BD7.3 with BD10: a candidate that overwrites as the published code does reproduces the defect; one that
    deviates otherwise (a constant canvas, no model calls) fails, and so does better-than-upstream on request."""
    def constant(model, prompt, mask_id, gen_length=128, block_length=8, **unused):
        length = -(-(prompt.shape[1] + gen_length) // block_length) * block_length
        return torch.cat([prompt, torch.full((1, length - prompt.shape[1]), 3)], dim=1)

    run = dict(model="tiny-sdar", case=OVERWRITE, ties="torch")
    matched = check_decoder(published_like(), "sdar", **run)
    assert matched.passed and matched.official_defects == {"BD7.3": 1}, matched.markdown()
    assert not check_decoder(published_like(), "sdar", official_defects="fail", **run).passed
    wrong = check_decoder(constant, "sdar", **run)
    assert not wrong.passed and "deviates otherwise" in wrong.markdown()
    assert check_decoder(candidate("generate"), "sdar", **run).passed  # better than upstream: veridec's intent


def test_the_command_line_checks_the_example(capsys):
    code = main(["check", f"{EXAMPLES / 'sdar_sampler.py'}:generate", "--against", "sdar", "--max-batch", "1",
                 "--no-padding", "--trials", "10", "--no-knobs", "--quiet"])
    assert code == 0 and "against: sdar (convention hf-block, model tiny-sdar" in capsys.readouterr().out


def test_the_targets_trace_has_a_step_per_model_call():
    """BD9: an empty step (block -1) for the prefill, iff the prompt has a whole block, and one after each block's
    last denoising step for its store, so that step k of the target is its model call k."""
    from veridec.testing.targets import TARGETS

    decode = TARGETS[("sdar", "none")].decode
    model = load_check_model("tiny-sdar")
    for length, prefilled in ((4, True), (3, False), (9, True)):
        decoded = decode(model, torch.arange(5, 5 + length)[None], None, "lowest", gen_length=6, block_length=4,
                         denoising_steps=2, temperature=0.0)
        steps = decoded.trace.steps
        assert len(steps) == decoded.trace.counters.model_calls
        assert (steps[0].block == -1) is prefilled
        stores = [k for k, step in enumerate(steps) if step.block < 0 and (k or not prefilled)]
        assert all(steps[k - 1].block >= 0 and (k + 1 == len(steps) or steps[k + 1].block > steps[k - 1].block)
                   for k in stores), [step.block for step in steps]


def test_where_the_published_code_overwrites_its_calls_count_too():
    """BD10, EC6: the published canvas with one model call more (a block stored twice) does not reproduce it."""
    generate = published_like()

    def stores_twice(model, prompt, mask_id, **settings):
        out = generate(model, prompt, mask_id, **settings)
        model(out[:, :4], attention_mask=None, past_key_values=object(), store_kv=True)  # one call too many
        return out

    result = check_decoder(stores_twice, "sdar", model="tiny-sdar", case=OVERWRITE, ties="torch")
    assert not result.passed and "deviates otherwise" in result.markdown()


def test_every_block_diffusion_knob_has_other_values():
    """BD9, EC7: each setting the check searches has values other than the case's (a knob with none is never
    exercised, so an ignored setting would pass)."""
    from veridec.testing.targets import FAMILIES
    from veridec.testing.knobs import alternatives

    sdar = FAMILIES["sdar"]
    settings = {"gen_length": 4, "block_length": 4, "denoising_steps": 2, "temperature": 1.0, "top_k": 0, "top_p": 1.0,
                "remasking_strategy": "low_confidence_dynamic", "confidence_threshold": 0.85, "eb_threshold": 1.0}
    for name in ("denoising_steps", "top_k", "top_p", "remasking_strategy", "confidence_threshold", "eb_threshold"):
        others = alternatives(name, settings, sdar)
        assert name in sdar.knobs and others and settings[name] not in others, name


def test_block_logit_errors_leave_out_left_padded_rows():
    """BD9: a left-padded row's canvas layout is its decoder's own, so its block calls are not held against a
    forward of the canvas. Row 0's recorded logits are moved by 1 (as a decoder's own layout would move them):
    with row 0 padded the error stays at rounding; with the same row unpadded (the negative control) it is 1."""
    model = load_check_model("tiny-sdar")
    recording = RecordingModel(model, keep_logits=True)
    prompt = torch.tensor([[model.special.pad_id, 5, 6, 7], [3, 4, 5, 6]])  # [2, 4]
    canvas = candidate("generate")(adapt(recording, "hf-block"), prompt, model.special.mask_id, gen_length=4,
                                   block_length=4, denoising_steps=2, temperature=0.0)  # [2, 8]
    for call in recording.calls:
        if call.kind == "block" and call.logits is not None:
            call.logits[0] += 1.0
    padded = recording.block_logit_errors(canvas, 4, torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    unpadded = recording.block_logit_errors(canvas, 4, torch.ones(2, 4, dtype=torch.long))
    assert padded and max(padded) <= measured_block_rounding(model), padded
    assert unpadded and abs(max(unpadded) - 1.0) < 1e-3, unpadded
