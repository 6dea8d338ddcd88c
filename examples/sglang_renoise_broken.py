"""Four realistic bugs in ``examples/sglang_renoise.py``, each one overridden decision:

- ``ScheduleOneStepEarly``: the temperature of the step after (the schedule read one step ahead; vLLM's
  DiffusionGemma committed canvases one step early, vllm#45965).
- ``OneGeneratorPerBatch``: every row draws from one generator seeded from the first request (the rows' streams
  are no longer each request's own).
- ``NoSelfConditioning``: never hands the model its previous step (the soft embeddings dropped).
- ``StopsWithoutStability``: stops on a low mean entropy alone, ignoring ``stability_threshold``.

    veridec check --engine sglang:examples/sglang_renoise_broken.py:NoSelfConditioning --against diffusiongemma
"""

from sglang_renoise import RenoiseSampler


class ScheduleOneStepEarly(RenoiseSampler):
    def temperature(self, left):
        return super().temperature(left - 1)


class OneGeneratorPerBatch(RenoiseSampler):
    def init_step_state(self, forward_batch):
        states = super().init_step_state(forward_batch)
        for state in states[1:]:
            state["generator"] = states[0]["generator"]
        return states


class NoSelfConditioning(RenoiseSampler):
    def soft_embeddings(self, probs):
        return None


class StopsWithoutStability(RenoiseSampler):
    def stops(self, state, argmax, entropy):
        self.stable_for = 0
        return super().stops(state, argmax, entropy)
