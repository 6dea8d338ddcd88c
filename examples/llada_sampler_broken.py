"""A realistic bug in ``examples/llada_sampler.py`` that keeps every token valid but changes the output law:
the logits are divided by the temperature before the Gumbel-max, which applies the temperature again (T^2 in
all). Tier E catches it on a tiny model; tier S catches it on an oracle model against the exact law:

    veridec check examples/llada_sampler_broken.py:temperature_applied_twice --against llada \
        --model oracle-joint --tier S
"""

import torch
from llada_sampler import LLaDASampler


class TemperatureTwice(LLaDASampler):
    def propose(self, logits):
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        return super().propose(logits.to(torch.float64) / self.temperature)


def temperature_applied_twice(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                              remasking="low_confidence", mask_id=126336):
    return TemperatureTwice(model, mask_id, temperature, remasking).run(prompt, steps, gen_length, block_length)
