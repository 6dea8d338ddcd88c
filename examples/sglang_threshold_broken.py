"""Four realistic bugs in ``examples/sglang_threshold.py``, each one overridden decision:

- ``StrictThreshold``: commits where c > threshold instead of c >= threshold.
- ``IgnoresThreshold``: accepts ``threshold`` in algorithm_config and ignores it (SGLang's regression accepted
  temperature and top_p and silently ignored them: test_dllm_batching_fdfo.py).
- ``StopsOnWrongRow``: each row's stop test reads the previous row's block.
- ``OffByOneFromSecondBlock``: from the second block on, the block's start is taken one position late, so every
  write lands one position to the right (the vLLM dLLM plug-in's positions off by one from block 2).

    veridec check --engine sglang:examples/sglang_threshold_broken.py:StrictThreshold --against threshold
"""

from sglang_threshold import ThresholdUnmasking


class StrictThreshold(ThresholdUnmasking):
    def passes(self, confidence):
        return confidence > self.threshold  # [B, b]


class IgnoresThreshold(ThresholdUnmasking):
    def passes(self, confidence):
        return confidence >= 0.9  # [B, b] the default, whatever the config says


class StopsOnWrongRow(ThresholdUnmasking):
    def finished(self, masked):
        return [not bool(masked[i - 1].any()) for i in range(masked.shape[0])]


class OffByOneFromSecondBlock(ThresholdUnmasking):
    def __init__(self, config):
        super().__init__(config)
        self.rounds = 0

    def init_step_state(self, forward_batch):
        self.rounds += 1
        return super().init_step_state(forward_batch)

    def write(self, ids, new):
        if self.rounds > 1:
            new = new.roll(1, dims=1)  # [B, b] the writes shifted one position right
            new[:, 0] = ids[:, 0]
        ids.copy_(new)
