"""Five realistic bugs in ``examples/fastdllm_v2_sampler.py``, each one overridden decision; every token stays valid,
yet the decisions differ from Fast-dLLM v2's ``generate`` (spec/fastdllm_v2.md):

- ``no_token_shift``: a block's position i is scored by output i, not i - 1 (V2.1).
- ``boundary_sampled``: the boundary token is drawn from the step's top-p law at temperature > 0 instead of the argmax
  of the store forward's last output (V2.7: greedy at every temperature).
- ``commits_outside_sub_block``: the commit rule runs over every mask of the block, not only the current
  sub-block's (V2.4, V2.6).
- ``non_strict_threshold``: ``p >= threshold`` instead of ``p > threshold`` (V2.6); it shows where a confidence
  equals the threshold: a top-p nucleus of one token gives probability 1.0 exactly, against ``threshold=1.0``.
- ``row_zero_top_p_for_every_row``: every row takes row 0's sampled tokens at temperature > 0 (NVlabs/Fast-dLLM#64's
  sampler, made to run by broadcasting); each row should decode as alone (V2.10).

``veridec check`` catches each with a shrunk case, e.g.

    veridec check examples/fastdllm_v2_sampler_broken.py:no_token_shift --against fastdllm-v2 --model tiny-fastdllm-v2
"""

import torch
from fastdllm_v2_sampler import V2Sampler


class NoTokenShift(V2Sampler):
    def shift(self, logits):
        return logits  # the bug: position i scored by its own output


class BoundarySampled(V2Sampler):
    def boundary_token(self, logits):
        if self.temperature == 0:
            return int(logits.argmax())
        law = self.nucleus(torch.softmax(logits / self.temperature, dim=-1))
        return int(torch.multinomial(law, 1))  # the bug: sampled, not the argmax


class CommitsOutsideSubBlock(V2Sampler):
    def window(self, start, sub):
        return start + sub * self.s, start + self.b  # the bug: from the current sub-block to the block's end


class NonStrictThreshold(V2Sampler):
    def above(self, scores):
        return scores >= self.threshold  # the bug: a confidence equal to the threshold commits


class RowZeroTopPForEveryRow(V2Sampler):
    def decode_step(self, x, start, end, cache):
        self.rows_seen = 0
        return super().decode_step(x, start, end, cache)

    def draws(self, law):
        if self.rows_seen == 0:
            self.first = [torch.multinomial(row, 1)[:, 0] for row in law]  # row 0's draw (the first live row)
        self.rows_seen += 1
        return self.first  # the bug: every row takes it


def _variant(kind):
    def generate(model, input_ids, max_new_tokens, mask_id=151665, threshold=1, small_block_size=8, block_size=32,
                 stop_token=151645, top_p=0.95, temperature=0):
        return kind(model, mask_id, max_new_tokens, block_size, small_block_size, threshold, stop_token, top_p,
                    temperature).run(input_ids)
    return generate


no_token_shift = _variant(NoTokenShift)
boundary_sampled = _variant(BoundarySampled)
commits_outside_sub_block = _variant(CommitsOutsideSubBlock)
non_strict_threshold = _variant(NonStrictThreshold)
row_zero_top_p_for_every_row = _variant(RowZeroTopPForEveryRow)
