"""Four realistic bugs in ``examples/sdar_sampler.py``, each one overridden decision; every token stays valid, yet
the calls or the decisions differ from SDAR / TraDo's ``block_diffusion_generate`` (spec/block_diffusion.md BD1-BD8):

- ``sees_the_next_block``: the prefill passes an all-ones mask over the prompt's whole blocks instead of the
  block-causal one, so a prompt block sees the later prompt blocks (BD1); it shows once the prompt has two whole
  blocks, whose stored keys and values then differ.
- ``stores_before_final``: the block's keys and values are stored by its first denoising call (``store_kv=True``
  there, with the block still masked) instead of by one more call once the block is final (BD5.1, BD5.4); the later
  calls of the block see its stale entries, the next blocks see them instead of the final ones.
- ``dynamic_threshold_on_committed``: ``low_confidence_dynamic``'s threshold is applied to every position of the
  block, committed and prompt ones included (the confidence not restricted to the masks, BD5.2): they count
  towards the quota and are overwritten by fresh draws.
- ``row_zero_sample_for_every_row``: every row takes row 0's sampled tokens (the first drawing row's, once row 0's
  block is finished), Fast-dLLM v2's top-p bug (NVlabs/Fast-dLLM #64); each row should decode as alone (BD8.2).

``veridec check`` catches each with a shrunk case, e.g.

    veridec check examples/sdar_sampler_broken.py:sees_the_next_block --against sdar --model tiny-sdar --max-batch 1 \
        --no-padding
    veridec check examples/sdar_sampler_broken.py:row_zero_sample_for_every_row --against sdar --model tiny-sdar \
        --max-batch 2 --no-padding
"""

import torch
from sdar_sampler import SdarSampler


class SeesTheNextBlock(SdarSampler):
    def prefill_mask(self, length):
        return torch.ones(1, 1, length, length)  # the bug: every prompt block sees every other


class StoresBeforeFinal(SdarSampler):
    def denoise_stores(self, s):
        return s == 0  # the bug: stored at the first denoising call, masks and all


class DynamicThresholdOnCommitted(SdarSampler):
    def dynamic(self, masked, confidence, n):
        high = confidence > self.threshold  # [b]  the bug: committed positions counted (and overwritten) too
        if int(high.sum()) >= n:
            return high.nonzero()[:, 0]
        return self.most_confident(masked, confidence, n)


class RowZeroSampleForEveryRow(SdarSampler):
    def sample_rows(self, logits, active, steps):
        tokens, laws = super().sample_rows(logits, active, steps)
        return tokens[active[0]].expand_as(tokens).clone(), laws  # the bug: row 0's draw for every row


def sees_the_next_block(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                        temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                        confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return SeesTheNextBlock(model, mask_id, gen_length, block_length, denoising_steps, temperature,
                            top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold,
                            stopping_criteria_idx).run(prompt)


def stores_before_final(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                        temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                        confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return StoresBeforeFinal(model, mask_id, gen_length, block_length, denoising_steps, temperature,
                             top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold,
                             stopping_criteria_idx).run(prompt)


def dynamic_threshold_on_committed(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                                   temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                                   confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return DynamicThresholdOnCommitted(model, mask_id, gen_length, block_length, denoising_steps, temperature,
                                       top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold,
                                       stopping_criteria_idx).run(prompt)


def row_zero_sample_for_every_row(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                                  temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                                  confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return RowZeroSampleForEveryRow(model, mask_id, gen_length, block_length, denoising_steps, temperature,
                                    top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold,
                                    stopping_criteria_idx).run(prompt)
