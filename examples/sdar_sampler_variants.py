"""A reading of ``examples/sdar_sampler.py`` that is no bug in the published code's terms: ``entropy_bounded`` as
JetAstra's ``generate.py`` (c2041a8) computes its score, repaired so that it runs (the published selection never
assigns ``transfer_index``, spec/block_diffusion.md BD7.2): one entropy per row, ``-sum q log q`` of the block's
drawn tokens' probabilities, for every mask, and the first ``k`` masks where ``k`` is where ``eb_threshold``
falls in the running sum. veridec asks for BD6.4 (each mask's entropy of its own filtered law) and reports the
difference by name:

    veridec check examples/sdar_sampler_variants.py:published_entropy_score --against sdar --model tiny-sdar \\
        --max-batch 1 --no-padding
"""

import torch
from sdar_sampler import SdarSampler


class PublishedEntropyScore(SdarSampler):
    def entropy_bounded(self, masked, law, confidence=None):
        positions = masked.nonzero()[:, 0]  # [m]
        q = self.drawn_probabilities.clamp_min(1e-12)  # [b] every position's drawn token, masked or not
        score = -(q * q.log()).sum()  # one number for the row (the published sum over the block)
        cumulative = torch.cumsum(score.expand(len(positions)), dim=0)  # [m]
        k = int(torch.searchsorted(cumulative, torch.tensor(self.eb_threshold), right=False))
        return positions[:max(1, min(k, len(positions)))]

    def select(self, masked, confidence, law, n):
        self.drawn_probabilities = confidence
        return super().select(masked, confidence, law, n)


def published_entropy_score(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                            temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                            confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return PublishedEntropyScore(model, mask_id, gen_length, block_length, denoising_steps, temperature, top_k,
                                 top_p, remasking_strategy, confidence_threshold, eb_threshold,
                                 stopping_criteria_idx).run(prompt)
