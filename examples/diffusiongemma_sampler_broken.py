"""Six realistic bugs in ``examples/diffusiongemma_sampler.py``, each one overridden decision; every token stays
valid, yet the decode differs from transformers' ``generate`` (spec/diffusiongemma.md DG3-DG4):

- ``stability_off_by_one``: a row stops once its argmax canvas equals the last k - 1, i.e. at k identical canvases
  (vllm#45965: transformers' k means k + 1 identical canvases, DG4.2);
- ``temperature_one_step_late``: step r (steps remaining) runs at the previous step's temperature, tau(r + 1)
  (the first at tau(N)), DG3.2;
- ``renoises_accepted_positions``: every position takes a fresh random token, accepted ones too (DG3.5);
- ``strict_entropy_bound``: accepts rank k when the entropies before it sum to < the bound, not <= (DG3.4); it
  shows only where that sum equals the bound, which the check arranges by drawing the bound at such a sum;
- ``stale_self_conditioning``: feeds the logits of the step before the previous one (DG3.7);
- ``stop_test_on_row_0``: the stop verdict of row 0 applied to every row (DG4.1).

``veridec check`` catches each with a shrunk case, e.g.

    veridec check examples/diffusiongemma_sampler_broken.py:stability_off_by_one --against diffusiongemma
"""

import functools

import torch
from diffusiongemma_sampler import Sampler, generate


class StabilityOffByOne(Sampler):
    def stable(self, history, argmax):
        if self.k <= 1:
            return torch.ones(argmax.shape[0], dtype=torch.bool)
        return (history[-(self.k - 1):] == argmax[None]).all(dim=-1).all(dim=0)  # the bug: k - 1 repeats


class TemperatureOneStepLate(Sampler):
    def temperature(self, remaining):
        return super().temperature(min(remaining + 1, self.steps))  # the bug: the previous step's temperature


class RenoisesAcceptedPositions(Sampler):
    def renoise(self, sampled, accepted, noise):
        return noise  # the bug: accepted positions renoised too


class StrictEntropyBound(Sampler):
    def accept(self, entropy):
        ranked, order = torch.sort(entropy, dim=-1)
        keep = torch.cumsum(ranked, dim=-1) - ranked < self.bound  # the bug: < instead of <=
        keep[..., 0] = True
        return torch.zeros_like(keep).scatter(-1, order, keep)


class StaleSelfConditioning(Sampler):
    def conditioning(self, logits, previous):
        return logits if previous is None else previous  # the bug: one step stale


class StopTestOnRow0(Sampler):
    def stops(self, history, argmax, logits):
        verdict = super().stops(history, argmax, logits)
        return verdict[:1].expand_as(verdict)  # the bug: row 0 decides for every row


def _variant(sampler):
    @functools.wraps(generate)
    def decode(*args, **kwargs):
        return generate(*args, **kwargs, sampler=sampler)
    return decode


stability_off_by_one = _variant(StabilityOffByOne)
temperature_one_step_late = _variant(TemperatureOneStepLate)
renoises_accepted_positions = _variant(RenoisesAcceptedPositions)
strict_entropy_bound = _variant(StrictEntropyBound)
stale_self_conditioning = _variant(StaleSelfConditioning)
stop_test_on_row_0 = _variant(StopTestOnRow0)
