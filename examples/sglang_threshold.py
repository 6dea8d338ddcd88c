"""A dLLM algorithm written from scratch to SGLang's ``DllmAlgorithm`` contract (sglang/srt/dllm/algorithm/base.py):
built from a ``DllmConfig``, its ``step(forward_batch, full_logits, states)`` advances every row's block in place and
returns which rows may emit. The rule is Fast-dLLM's threshold (spec/parallel.md P3): every masked position whose
confidence reaches ``threshold`` takes its argmax token, at least the most confident one; a row may emit once a step
finds no mask left in its block (the forward before it persisted the final tokens). No sglang import: the class
keeps the contract by its methods alone.

    veridec check --engine sglang:examples/sglang_threshold.py:ThresholdUnmasking --against threshold
"""

import torch


class ThresholdUnmasking:
    def __init__(self, config):
        self.block_size, self.mask_id = config.block_size, config.mask_id
        self.threshold = config.algorithm_config.get("threshold", 0.9)

    def init_step_state(self, forward_batch):
        return [None] * forward_batch.batch_size

    def max_steps(self, block_size):
        return block_size + 1

    def passes(self, confidence):
        return confidence >= self.threshold  # [B, b]

    def finished(self, masked):
        return [not bool(masked[i].any()) for i in range(masked.shape[0])]

    def step(self, forward_batch, full_logits, states):
        rows = forward_batch.batch_size
        ids = forward_batch.input_ids.view(rows, self.block_size)  # [B, b], a view: written in place
        logits = full_logits.view(rows, self.block_size, -1)  # [B, b, V]
        masked = (ids == self.mask_id) & ~forward_batch.dllm_prompt_mask  # [B, b]
        done = self.finished(masked)
        tokens = logits.argmax(dim=-1)  # [B, b] the first maximum
        confidence = torch.softmax(logits, dim=-1).gather(-1, tokens[..., None])[..., 0]  # [B, b]
        confidence = confidence.masked_fill(~masked, -torch.inf)
        chosen = self.passes(confidence) & masked  # [B, b]
        best = confidence.argmax(dim=1)  # [B] the most confident mask (lowest position on ties)
        for row in range(rows):
            if masked[row].any() and not chosen[row].any():
                chosen[row, best[row]] = True
        self.write(ids, torch.where(chosen, tokens, ids))
        return done

    def write(self, ids, new):
        ids.copy_(new)
