"""Reward models and reward guidance (spec/guidance.md)."""

import json

import pytest
import torch
import torch.nn.functional as F

from veridec.guidance import GuidanceParams, LinearReward, guidance_vector, load_reward_model
from veridec.guidance.guide import mixing_weight, soft_embeddings
from veridec.guidance.tiny import write_tiny_reward_model
from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.models.tokenizer import char_tokenizer
from veridec.numerics import assert_close_measured, assert_within_rounding, max_abs, tolerance
from veridec.reference.guided import best_of_n, generate


def linear(vocab=12, dim=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return LinearReward(torch.randn(vocab, dim, generator=g, dtype=torch.float64).to(dtype),
                        torch.randn(dim, generator=g, dtype=torch.float64).to(dtype))


def in_both_precisions(compute):
    """compute(dtype) -> tensors, run in float32 and in float64 (which measures float32's rounding)."""
    return compute(torch.float32), compute(torch.float64)


def test_one_adam_step_follows_the_closed_form_gradient():
    """G4: with r(e) = sum <w, e_g>, d r / d phi_gv = q_gv ((E w)_v - sum_u q_gu (E w)_u) / T; Adam's first step
    moves phi by lr * g / (|g| + eps) (bias-corrected moments of one gradient)."""
    params = GuidanceParams(method="expectation", steps=1, lr=0.3, temperature=0.7)

    def compute(dtype):
        reward = linear(dtype=dtype)
        phi = torch.randn(2, 3, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(dtype)
        r = guidance_vector(reward, phi, torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool),
                            params)
        q = F.softmax(phi / 0.7, dim=-1)
        ew = reward.embedding @ reward.weight  # [V]
        grad = q * (ew - (q * ew).sum(-1, keepdim=True)) / 0.7
        return r, 0.3 * grad / (grad.abs() + 1e-8)

    (r32, closed32), (_, closed64) = in_both_precisions(compute)
    assert_within_rounding(r32, closed32, closed64, "one Adam step vs its closed form")


def test_unmasked_slots_get_no_guidance_and_enter_as_their_tokens():
    reward = linear()
    phi = torch.randn(1, 4, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    masked = torch.tensor([[True, False, True, False]])
    r = guidance_vector(reward, phi, torch.tensor([[0, 5, 0, 7]]), masked, GuidanceParams(steps=2))
    assert (r[0, 1] == 0).all() and (r[0, 3] == 0).all() and r[0, 0].abs().max() > 0


def test_mixing_weight_at_its_limits():
    """EntRGi's w = H(q) / log|V| is 1 at the uniform distribution and 0 at a point mass."""
    w32, w64 = in_both_precisions(lambda dtype: mixing_weight(torch.full((1, 1, 8), 1 / 8, dtype=dtype), "entrgi"))
    assert_close_measured(w32, torch.ones(()), tolerance(w32, w64), "w at the uniform distribution")
    point = F.one_hot(torch.tensor([[3]]), 8).double()
    assert (mixing_weight(point, "entrgi") == 0).all()
    assert (mixing_weight(point, "expectation") == 0).all() and (mixing_weight(point, "aps") == 1).all()


def test_aps_forward_is_the_sampled_token_with_the_expected_gradient():
    """APS (straight-through): the forward value is the sampled token's embedding, the gradient the expected
    embedding's."""
    params = GuidanceParams(method="aps", top_p=1e-9)  # top-p this small keeps only the most likely token

    def compute(dtype):
        reward = linear(dtype=dtype)
        phi = torch.randn(1, 2, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(dtype)
        phi.requires_grad_()
        soft = soft_embeddings(phi, reward.embedding, params, torch.Generator().manual_seed(0))
        soft.sum().backward()
        phi2 = phi.detach().clone().requires_grad_()
        expected = F.softmax(phi2 / params.temperature, dim=-1) @ reward.embedding
        expected.sum().backward()
        return soft.detach(), reward.embedding[phi.argmax(-1)], expected.detach(), phi.grad, phi2.grad

    (soft, sampled32, expected, grad, grad_expected), (soft64, *_) = in_both_precisions(compute)
    assert_close_measured(soft, sampled32, tolerance(soft, soft64), "forward value vs the sampled embedding")
    assert torch.equal(grad, grad_expected)  # the sampled part is detached: the same graph as the expectation's
    assert max_abs(soft, expected) > 100 * tolerance(soft, soft64)  # and the value is not the expectation


@pytest.mark.parametrize("method", ["entrgi", "expectation", "aps"])
def test_guidance_raises_the_expected_reward(method):
    """G5: the guided distribution's expected linear reward exceeds the unguided one's, on every seed here."""
    for seed in range(10):
        reward = linear(seed=seed)
        phi = torch.randn(3, 6, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        r = guidance_vector(reward, phi, torch.zeros(3, 6, dtype=torch.long), torch.ones(3, 6, dtype=torch.bool),
                            GuidanceParams(method=method), torch.Generator().manual_seed(seed))
        value = lambda logits: reward.score(F.softmax(logits, -1) @ reward.embedding)  # noqa: E731
        assert (value(phi + r) > value(phi)).all(), (method, seed)


@pytest.fixture(scope="module")
def reward_folder(tmp_path_factory):
    return write_tiny_reward_model(tmp_path_factory.mktemp("reward"), seed=0)


def test_transformers_reward_loads_maps_vocabularies_and_pads_left(reward_folder):
    reward = load_reward_model(reward_folder, char_tokenizer("llada"))
    assert reward.embedding.shape == (100, 32) and (reward.reward_ids >= 0).all()  # identical strings everywhere
    reward64 = load_reward_model(reward_folder, char_tokenizer("llada"), dtype=torch.float64)
    tokens = torch.randint(0, 90, (2, 6), generator=torch.Generator().manual_seed(0))
    prompts = ["count 1 2", "hi"]
    alone = {r.table.dtype: torch.cat([r.bind([p]).score_tokens(tokens[i:i + 1]) for i, p in enumerate(prompts)])
             for r in (reward, reward64)}
    assert_within_rounding(reward.bind(prompts).score_tokens(tokens), alone[torch.float32], alone[torch.float64],
                           "a left-padded pair of responses vs each alone")
    embeds = reward.embedding[tokens].clone().requires_grad_()
    reward.bind(["a", "b"]).score(embeds).sum().backward()
    assert embeds.grad.abs().sum() > 0


def test_unmatched_tokens_get_zero_embeddings(reward_folder):
    dllm = char_tokenizer("dream")  # its mask/EoT strings are not in the (LLaDA-special) reward vocabulary
    reward = load_reward_model(reward_folder, dllm)
    unmatched = (reward.reward_ids < 0).nonzero().flatten().tolist()
    assert unmatched == [dllm.convert_tokens_to_ids("<|mask|>"), dllm.convert_tokens_to_ids("<|im_end|>")]
    assert (reward.embedding[unmatched] == 0).all()


def test_bad_reward_folders_and_parameters(reward_folder, tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_reward_model(tmp_path, char_tokenizer("llada"))
    config = json.loads((reward_folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"architectures": ["Qwen3ForCausalLM"]}))
    with pytest.raises(ValueError, match="has no score head"):
        load_reward_model(tmp_path, char_tokenizer("llada"))
    for kw, message in [(dict(steps=0), r"steps must lie in \[1, inf\)"), (dict(lr=0), r"lr must lie in \(0, inf\)"),
                        (dict(method="x"), "method must be one of"), (dict(top_p=0), r"top_p must lie in \(0, 1\]")]:
        with pytest.raises(ValueError, match=message):
            GuidanceParams(**kw)
    with pytest.raises(ValueError, match="weight must have shape"):
        LinearReward(torch.zeros(4, 3), torch.zeros(2))


def test_sequential_guided_decoding_and_best_of_n(reward_folder):
    """G6-G7 on a tiny dLLM: one token per step, M reward passes per step; Best-of-N keeps the best score."""
    model = never_predicts_mask(random_model("llada", 0))
    reward = load_reward_model(reward_folder, model.tokenizer)
    prompt = torch.tensor([model.tokenizer("hi ")["input_ids"]])
    out = generate(model, prompt, reward, ["hi "], gen_length=5, guidance=GuidanceParams(steps=2),
                   generator=torch.Generator().manual_seed(0))
    assert (out.canvas != model.special.mask_id).all()
    assert out.trace.counters.full_forwards == 5 and out.trace.counters.reward_backwards == 10
    assert all(len(step.positions[0]) == 1 for step in out.trace.steps)
    best, scores = best_of_n(model, prompt, reward, ["hi "], n=3, gen_length=5,
                             generator=torch.Generator().manual_seed(1))
    chosen = reward.bind(["hi "]).score_tokens(best.canvas[:, prompt.shape[1]:])
    assert scores.shape == (3, 1) and torch.isclose(chosen[0], scores.max())


def test_parallel_rules_with_cached_guidance(reward_folder):
    """G7b: one guidance computation per step whatever the step commits; a zero-step budget is refused, and a
    rule's unguided run is the plain reference decode."""
    from veridec.reference.guided import parallel_guided
    from veridec.reference.parallel import decode
    from veridec.rules.presets import PRESETS

    model = never_predicts_mask(random_model("llada", 1))
    reward = load_reward_model(reward_folder, model.tokenizer)
    prompt = torch.tensor([model.tokenizer("count ")["input_ids"]])
    for name in ("conf-hq", "fastdllm-hq", "klass-hq", "eb-hq", "dapd-hq"):
        out = parallel_guided(model, prompt, reward, ["count "], PRESETS[name], gen_length=8,
                              guidance=GuidanceParams(steps=1), generator=torch.Generator().manual_seed(0))
        assert (out.canvas != model.special.mask_id).all()
        assert out.trace.counters.reward_backwards == len(out.trace.steps) == out.trace.counters.full_forwards
    plain = decode(model, prompt, rule=PRESETS["conf-hq"], gen_length=8, block_length=8, temperature=0.7,
                   generator=torch.Generator().manual_seed(3))
    unguided = parallel_guided(model, prompt, reward, ["count "], PRESETS["conf-hq"], gen_length=8, guidance=None,
                               generator=torch.Generator().manual_seed(3))
    assert torch.equal(plain.canvas, unguided.canvas)
