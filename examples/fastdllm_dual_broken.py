"""Seven realistic one-line bugs of ``examples/fastdllm_dual.py``, each a decoder in the same calling convention.
``veridec check`` must catch every one (tests/test_check.py prints each one's cases to detection):

    veridec check examples/fastdllm_dual_broken.py:strict_threshold --against fastdllm --cache dual --model tiny-llada
"""

import torch
from fastdllm_dual import DualCacheDecoder


class StaleCache(DualCacheDecoder):
    """The K/V cache is built once for the whole decode: later blocks never get their refresh forward."""

    def refresh(self, x, end, quota):
        if not hasattr(self, "cache"):
            self.cache = super().refresh(x, end, quota)
        return self.cache


class TiesToHighestIndex(DualCacheDecoder):
    """Token ties go to the highest id (argmax over the reversed vocabulary)."""

    def propose(self, logits):
        vocab = logits.shape[-1]
        if self.temperature == 0:
            return vocab - 1 - logits.flip(-1).argmax(dim=-1)
        return super().propose(logits)


class StrictThreshold(DualCacheDecoder):
    """The paper's ``c > threshold`` where the official code commits ``c >= threshold``."""

    def choose(self, ranked, quota):
        if self.threshold is None:
            return super().choose(ranked, quota)
        real = ranked > -torch.inf
        chosen = real & (ranked > self.threshold)
        chosen[0] = real[0]
        return chosen


class BlockPositionsFromZero(DualCacheDecoder):
    """The block's cache slots counted from 0 instead of from the block's start."""

    def replace_position(self, x, start, end):
        replace = torch.zeros_like(x, dtype=torch.bool)
        replace[:, : end - start] = True
        return replace


class BlockDoneByRowZero(DualCacheDecoder):
    """Every row's block is taken as done when row 0's is."""

    def block_open(self, x, start, end):
        return bool((x[0, start:end] == self.mask_id).any())


class OneTooMany(DualCacheDecoder):
    """When no other candidate reaches the threshold, the two best commit instead of the best one."""

    def choose(self, ranked, quota):
        chosen = super().choose(ranked, quota)
        if self.threshold is not None and chosen.sum() == 1:
            chosen[:2] = ranked[:2] > -torch.inf
        return chosen


class ConfidenceOfNoisyLogits(DualCacheDecoder):
    """At temperature > 0 the confidence is read from the Gumbel-perturbed scores, not the model's softmax."""

    def propose(self, logits):
        if self.temperature == 0:
            return super().propose(logits)
        u = torch.rand_like(logits, dtype=torch.float64)
        self.noisy = logits.double() - self.temperature * torch.log(-torch.log(u))  # [B, W, V]
        return self.noisy.argmax(dim=-1)

    def score(self, logits, proposal):
        source = logits if self.temperature == 0 else self.noisy
        return super().score(source, proposal)


def _entry(variant):
    @torch.no_grad()
    def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
                 threshold=None):
        return variant(model, mask_id, threshold, temperature).run(prompt, steps, gen_length, block_length)

    generate.__doc__ = variant.__doc__
    return generate


stale_cache = _entry(StaleCache)
ties_to_highest_index = _entry(TiesToHighestIndex)
strict_threshold = _entry(StrictThreshold)
block_positions_from_zero = _entry(BlockPositionsFromZero)
block_done_by_row_zero = _entry(BlockDoneByRowZero)
one_too_many = _entry(OneTooMany)
confidence_of_noisy_logits = _entry(ConfidenceOfNoisyLogits)
VARIANTS = ("stale_cache", "ties_to_highest_index", "strict_threshold", "block_positions_from_zero",
            "block_done_by_row_zero", "one_too_many", "confidence_of_noisy_logits")
