"""Four realistic bugs in ``examples/editing_sampler.py``, each one overridden decision (spec/editing.md ED4, ED5):

- ``non_strict_editing_threshold``: edits where q >= editing_threshold instead of q > editing_threshold.
- ``edits_prompt_tokens``: the edit set does not exclude the prompt positions inside the block.
- ``edits_unchanged_tokens``: an "edit" that rewrites the same token counts, so a maskless block never stops
  early: the post-step loop runs on to max_post_steps.
- ``no_post_steps``: the block stops as soon as it has no mask (no edit pass after the last transfer).

    veridec check examples/editing_sampler_broken.py:edits_prompt_tokens --against editing --model tiny-llada
"""

import torch
from editing_sampler import EditingSampler


class NonStrictEditingThreshold(EditingSampler):
    def edits(self, tokens, q, old, active, prompt_in_block):
        return ~active & ~prompt_in_block & (q >= self.editing_threshold) & (tokens != old)  # [b]


class EditsPromptTokens(EditingSampler):
    def edits(self, tokens, q, old, active, prompt_in_block):
        return ~active & (q > self.editing_threshold) & (tokens != old)  # [b]


class EditsUnchangedTokens(EditingSampler):
    def edits(self, tokens, q, old, active, prompt_in_block):
        return ~active & ~prompt_in_block & (q > self.editing_threshold)  # [b]


class NoPostSteps(EditingSampler):
    def block(self, x, end, attention_mask, position_ids):
        start = end - self.block_size
        prompt_in_block = torch.arange(start, end, device=x.device) < self.prompt_length  # [b]
        while True:
            old = x[0, start:end].clone()  # [b]
            active = old == self.mask_id  # [b]
            if not active.any():
                return
            self.step(x, end, attention_mask, position_ids, old, active, prompt_in_block)


def _variant(name, cls):
    """A module-level function with ``generate``'s signature that decodes with ``cls``."""
    def generate(model, prompt, max_new_tokens=128, block_size=32, temperature=0.0, top_p=None, top_k=None,
                 threshold=0.95, editing_threshold=0.9, max_post_steps=16, num_to_transfer=1, eos_early_stop=False,
                 mask_id=126336):
        return cls(model, mask_id, temperature, top_p, top_k, threshold, editing_threshold, max_post_steps,
                   num_to_transfer).run(prompt, max_new_tokens, block_size, eos_early_stop)
    generate.__name__ = generate.__qualname__ = name
    return generate


non_strict_editing_threshold = _variant("non_strict_editing_threshold", NonStrictEditingThreshold)
edits_prompt_tokens = _variant("edits_prompt_tokens", EditsPromptTokens)
edits_unchanged_tokens = _variant("edits_unchanged_tokens", EditsUnchangedTokens)
no_post_steps = _variant("no_post_steps", NoPostSteps)
