"""Variants of ``examples/dream_sampler.py`` for tier S (spec/stochastic.md): three realistic one-line bugs that
change the output law at temperature > 0, and one change that keeps it (so only its random stream differs).
Tier E catches all four (another stream gives other tokens); tier S must catch the first three and pass the last:

    veridec check examples/dream_sampler_variants.py:temperature_applied_twice --against dream --tier S
"""

import torch
from dream_sampler import DreamSampler


class TemperatureAppliedTwice(DreamSampler):
    """The logits are divided by the temperature twice (once by the caller's helper, once here)."""

    def filtered(self, logits):
        return super().filtered(logits / self.temperature if self.temperature > 0 else logits)


class TopPDropsCrossingToken(DreamSampler):
    """Top-p removes the token whose cumulative probability crosses p (the shift by one is forgotten)."""

    def beyond_nucleus(self, cumulative):
        beyond = cumulative > self.top_p
        beyond[:, 0] = False
        return beyond


class ConfidenceBeforeTemperature(DreamSampler):
    """The confidence that ranks positions is the sampled token's probability before the temperature."""

    def sample(self, logits):
        confidence, tokens = super().sample(logits)
        if self.temperature > 0 and self.alg == "maskgit_plus":
            confidence = torch.softmax(logits, dim=-1).gather(-1, tokens[:, None])[:, 0]
        return confidence, tokens


class GumbelMaxDraws(DreamSampler):
    """Categorical draws replaced by Gumbel-max over the reversed vocabulary (ties to the highest id): the
    same law as the categorical draw, another random stream."""

    def draw(self, probs):
        noise = -torch.log(-torch.log(torch.rand_like(probs, dtype=torch.float64)))
        scores = (probs.double().log() + noise).flip(-1)  # [N, V] reversed: ties go to the highest id
        return probs.shape[-1] - 1 - scores.argmax(dim=-1)


def _entry(variant):
    @torch.no_grad()
    def diffusion_generate(model, input_ids, attention_mask=None, max_new_tokens=16, steps=16, eps=1e-3,
                           alg="origin", temperature=0.0, top_p=None, top_k=None, mask_token_id=None):
        sampler = variant(model, mask_token_id, steps, eps, alg, temperature, top_p, top_k)
        return sampler.run(input_ids, attention_mask, max_new_tokens)

    diffusion_generate.__doc__ = variant.__doc__
    return diffusion_generate


temperature_applied_twice = _entry(TemperatureAppliedTwice)
top_p_drops_crossing_token = _entry(TopPDropsCrossingToken)
confidence_before_temperature = _entry(ConfidenceBeforeTemperature)
gumbel_max_draws = _entry(GumbelMaxDraws)
LAW_CHANGING = ("temperature_applied_twice", "top_p_drops_crossing_token", "confidence_before_temperature")
LAW_KEEPING = ("gumbel_max_draws",)
