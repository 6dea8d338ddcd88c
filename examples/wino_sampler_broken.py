"""Four realistic bugs in ``examples/wino_sampler.py``, each one overridden decision; every token stays valid,
yet the decisions differ from WINO's (spec/wino.md WN2-WN4):

- ``non_strict_back_threshold``: the re-mask test is ``b <= threshold_back``, not ``<`` (WN4.5); it shows where
  b hits threshold_back exactly, which the check arranges by drawing threshold_back at a verified confidence.
- ``revokes_prompt_tokens``: the revocable set is U plus every non-mask prompt position (the prompt counted as
  committed); with no slot of their own, prompt tokens are verified by the plain forward, and one scored under
  ``threshold_back`` is re-masked and drafted again (WN4.5: never a prompt position).
- ``revokes_same_step_drafts``: U takes this step's drafts before the revoke set is computed, so a draft is
  verified (by its slot) and can be revoked in the step that drafted it (WN4.5-6).
- ``no_verification_block``: the canvas is P + G long; a committed token is verified by the plain forward's
  confidence at its own position, which sees it, instead of a slot blind to it (WN1-WN2).

``veridec check`` catches each with a shrunk case, e.g.

    veridec check examples/wino_sampler_broken.py:revokes_same_step_drafts --against wino --model tiny-llada
"""

import torch
from wino_sampler import WinoSampler


class NonStrictBackThreshold(WinoSampler):
    def revoke(self, back, accepted, last):
        if accepted == 1:
            return back.new_zeros(0, dtype=torch.long)
        failed = int((back <= self.threshold_back).sum())  # the bug: <= instead of <
        order = torch.sort(back, stable=True).indices  # [P + G]
        return order[:last - 1 if failed >= last else failed]


class RevokesPromptTokens(WinoSampler):
    def revocable(self, x, verified, new):
        prompt = torch.arange(x.shape[1], device=x.device) < self.prompt_length  # [P + G]
        return verified | (prompt & (x[0] != self.mask_id))  # the bug: the prompt counted as committed


class RevokesSameStepDrafts(WinoSampler):
    def revocable(self, x, verified, new):
        return verified | new  # the bug: U updated with this step's drafts first


class NoVerificationBlock(WinoSampler):
    def layout(self, x, block):
        N = x.shape[1]  # P + G: the bug, no verification block
        attention = torch.ones(N, N, dtype=torch.bool, device=x.device)  # [N, N]
        positions = torch.arange(N, device=x.device)  # [N]
        return x, attention[None, None], positions, positions  # each position verifies itself


def non_strict_back_threshold(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                              threshold=0.6, threshold_back=0.9):
    return NonStrictBackThreshold(model, mask_id, temperature, threshold, threshold_back).run(
        prompt, gen_length, block_length)


def revokes_prompt_tokens(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                          threshold=0.6, threshold_back=0.9):
    return RevokesPromptTokens(model, mask_id, temperature, threshold, threshold_back).run(
        prompt, gen_length, block_length)


def revokes_same_step_drafts(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                             threshold=0.6, threshold_back=0.9):
    return RevokesSameStepDrafts(model, mask_id, temperature, threshold, threshold_back).run(
        prompt, gen_length, block_length)


def no_verification_block(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                          threshold=0.6, threshold_back=0.9):
    return NoVerificationBlock(model, mask_id, temperature, threshold, threshold_back).run(
        prompt, gen_length, block_length)
