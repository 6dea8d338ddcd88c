"""Counters (spec N8) measured independently of the decoders: a proxy around the model counts every call, the
whole-canvas forwards and the query positions fed, and a proxy around the reward counts its forward passes
(each followed by one backward in guidance); every decoder's trace must report exactly those numbers."""

import pytest
import torch

from veridec.guidance import GuidanceParams, LinearReward
from veridec.guidance.fastguide import FastGuideParams
from veridec.optimized import fastdllm as fast
from veridec.optimized.fastguide import generate as fastguide_sparse
from veridec.optimized.parallel import decode as optimized
from veridec.reference.dream import diffusion_generate
from veridec.reference.fastdllm import generate as fastdllm_reference
from veridec.reference.fastguide import generate as fastguide_exact
from veridec.reference.guided import best_of_n, generate as guided, parallel_guided
from veridec.reference.llada import generate as llada
from veridec.reference.parallel import decode as reference
from veridec.rules.presets import PRESETS


class CountingReward:
    """A reward whose ``score`` calls are counted (one reward forward each; guidance backpropagates each once)."""

    def __init__(self, reward):
        self.reward, self.scores = reward, 0
        self.embedding = reward.embedding

    def bind(self, prompts):
        self.reward = self.reward.bind(prompts)
        return self

    def score(self, embeddings):
        self.scores += 1
        return self.reward.score(embeddings)

    def score_tokens(self, tokens):
        return self.score(self.embedding[tokens])


def prompt_batch(lengths=(3, 5)):
    width = max(lengths)
    prompt = torch.randint(0, 90, (len(lengths), width), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths])
    return prompt, mask


def assert_counted(counting, trace):
    counters = trace.counters
    assert (counters.model_calls, counters.full_forwards, counters.query_positions) == counting.counted(), \
        (counters, counting.counted())


DECODERS = {
    "llada": lambda m, p, a: llada(m, p, a, steps=6, gen_length=6, block_length=3),
    "llada-cfg": lambda m, p, a: llada(m, p, a, steps=4, gen_length=8, block_length=4, cfg_scale=1.5),
    "llada-top-k": lambda m, p, a: llada(m, p, a, gen_length=8, block_length=4, tokens_per_step=3),
    "dream": lambda m, p, a: diffusion_generate(m, p, a, max_new_tokens=6, steps=4, alg="entropy"),
    "dream-origin": lambda m, p, a: diffusion_generate(m, p, a, max_new_tokens=6, steps=5, alg="origin",
                                                       generator=torch.Generator().manual_seed(1)),
    "fastdllm": lambda m, p, a: fastdllm_reference(m, p, a, steps=2, gen_length=8, block_length=4, threshold=0.3),
    "fastdllm-none": lambda m, p, a: fast.generate(m, p, a, steps=2, gen_length=8, block_length=4, threshold=0.3),
    "fastdllm-prefix": lambda m, p, a: fast.generate_with_prefix_cache(m, p, a, steps=2, gen_length=8,
                                                                       block_length=4, factor=1.0),
    "fastdllm-dual": lambda m, p, a: fast.generate_with_dual_cache(m, p, a, steps=4, gen_length=8, block_length=4),
    "fastdllm-dual-legacy": lambda m, p, a: fast.generate_with_dual_cache(m, p, a, steps=2, gen_length=8,
                                                                          block_length=4, threshold=0.05,
                                                                          loop="june2025"),
}
for _name in ("sequential", "localleap", "eb-hq", "klass-hq", "dapd-hq"):
    DECODERS[f"{_name}-reference"] = (lambda rule: lambda m, p, a: reference(
        m, p, a, rule=rule, gen_length=8, block_length=4))(PRESETS[_name])
    for _cache in ("none", "prefix", "dual"):
        DECODERS[f"{_name}-{_cache}"] = (lambda rule, cache: lambda m, p, a: optimized(
            m, p, a, rule=rule, cache=cache, gen_length=8, block_length=4))(PRESETS[_name], _cache)


@pytest.mark.parametrize("layout", ["llada", "dream"])
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_every_decoder_counts_what_it_asks_of_the_model(small_model, counting_model, layout, name):
    counting = counting_model(small_model(layout, 1))
    prompt, mask = prompt_batch()
    out = DECODERS[name](counting, prompt, mask)
    assert counting.calls > 0
    assert_counted(counting, out.trace)


def linear_reward(model):
    g = torch.Generator().manual_seed(3)
    return LinearReward(torch.randn(model.vocab_size, 5, generator=g, dtype=model.dtype),
                        torch.randn(5, generator=g, dtype=model.dtype))


GUIDED = {
    "sequential": lambda m, p, r, g: guided(m, p, r, ["a", "b"], gen_length=5, guidance=GuidanceParams(steps=2),
                                            generator=g),
    "parallel": lambda m, p, r, g: parallel_guided(m, p, r, ["a", "b"], PRESETS["fastdllm-hq"], gen_length=6,
                                                   block_length=3, guidance=GuidanceParams(steps=2), generator=g),
    "fastguide-exact": lambda m, p, r, g: fastguide_exact(m, p, r, ["a", "b"], gen_length=6, generator=g,
                                                          params=FastGuideParams(k=3, tau=0.05),
                                                          guidance=GuidanceParams(steps=2)),
    "fastguide-sparse": lambda m, p, r, g: fastguide_sparse(m, p, r, ["a", "b"], gen_length=6, generator=g,
                                                            params=FastGuideParams(k=3, tau=0.05, window=1),
                                                            guidance=GuidanceParams(steps=2)),
}


@pytest.mark.parametrize("layout", ["llada", "dream"])
@pytest.mark.parametrize("name", sorted(GUIDED))
def test_guided_decoders_count_model_and_reward_passes(small_model, counting_model, layout, name):
    model = small_model(layout, 2)
    counting, reward = counting_model(model), CountingReward(linear_reward(model))
    prompt, _ = prompt_batch((3, 3))
    out = GUIDED[name](counting, prompt, reward, torch.Generator().manual_seed(0))
    assert_counted(counting, out.trace)
    assert out.trace.counters.reward_forwards == out.trace.counters.reward_backwards == reward.scores > 0


def test_best_of_n_counts_every_sample_and_every_score(small_model, counting_model):
    model = small_model("llada", 2)
    counting, reward = counting_model(model), CountingReward(linear_reward(model))
    best, _ = best_of_n(counting, prompt_batch((3, 3))[0], reward, ["a", "b"], n=3, gen_length=4,
                        generator=torch.Generator().manual_seed(0))
    assert_counted(counting, best.trace)
    assert best.trace.counters.reward_forwards == reward.scores == 3
