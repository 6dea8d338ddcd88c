"""Four realistic bugs in ``examples/llada2_sampler.py``, each one overridden decision; every token stays valid, yet
the calls or the decisions differ from LLaDA2.0's loop (spec/block_diffusion.md BD12, BD12.1):

- ``uncapped_steps``: the step budget is ``steps`` itself, not ``min(steps, gen_length // minimal_topk)`` (BD12); it
  shows whenever ``steps > gen_length // minimal_topk``: the schedule is spread over more steps, and the blocks take
  more calls.
- ``commits_after_schedule``: a block whose ``S`` steps are spent with masks left takes one more call that commits
  every mask left, the mask token banned (BD6.2's veridec default ``after_schedule="commit"``), instead of keeping
  them (BD12); it shows once a drawn mask token leaves a position masked through the last step.
- ``ranks_by_position``: when fewer than ``n_s`` masks are over the threshold the step takes the first ``n`` masks
  by position instead of the ``n`` most confident (BD5.2 ``low_confidence_dynamic``'s fallback, BD12).
- ``stops_at_first_eos``: a block's loop ends as soon as EOS is in the generation, mid-block, and the decode with it,
  instead of finishing the block and stopping after it (BD5.5, BD12: the stop is checked after the block); the
  block's remaining masks stay.

``veridec check`` catches each with a shrunk case, e.g.

    veridec check examples/llada2_sampler_broken.py:ranks_by_position --against llada2 --ties torch
    veridec check examples/llada2_sampler_broken.py:stops_at_first_eos --against llada2 --ties torch
"""

import importlib.util
from pathlib import Path

import torch

try:
    from llada2_sampler import Llada2Sampler
except ImportError:  # loaded by path, without examples/ on sys.path: load the sibling file the same way
    _spec = importlib.util.spec_from_file_location("llada2_sampler", Path(__file__).with_name("llada2_sampler.py"))
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    Llada2Sampler = _module.Llada2Sampler


class UncappedSteps(Llada2Sampler):
    """The step budget not capped by gen_length // minimal_topk (violates BD12's S = min(steps, ...))."""

    def step_budget(self):
        return self.steps  # the bug: min(steps, gen_length // minimal_topk) forgotten


class CommitsAfterSchedule(Llada2Sampler):
    """A block whose steps are spent commits its remaining masks in one more call (BD6.2's commit; BD12 leaves them)."""

    def after_schedule(self, x, start, end):
        masked = x[0, start:end] == self.mask_id  # [b]
        if not bool(masked.any()):
            return
        logits = self.forward(x, end).clone()  # [b, V]  the bug: an extra call past the schedule
        logits[:, self.mask_id] = -torch.inf  # the mask token banned, so every mask left commits
        tokens, _ = self.sample(logits)  # [b]
        x[0, start:end][masked] = tokens[masked]


class RanksByPosition(Llada2Sampler):
    """The fallback takes the first n masks by position, not the n most confident (violates BD5.2 / BD12)."""

    def fallback(self, masked, confidence, n):
        return masked.nonzero()[:n, 0]  # the bug: confidence ignored


class StopsAtFirstEos(Llada2Sampler):
    """The decode stops at the first EOS mid-block instead of after the block holding it (violates BD5.5 / BD12)."""

    def block_continues(self, x, start, end):
        return super().block_continues(x, start, end) and not self.stops(x, end)  # the bug: checked every step


def uncapped_steps(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0, top_k=None,
                   top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
    return UncappedSteps(model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                         minimal_topk, eos_id).run(prompt)


def commits_after_schedule(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0,
                           top_k=None, top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
    return CommitsAfterSchedule(model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                                minimal_topk, eos_id).run(prompt)


def ranks_by_position(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0,
                      top_k=None, top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
    return RanksByPosition(model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                           minimal_topk, eos_id).run(prompt)


def stops_at_first_eos(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0,
                       top_k=None, top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
    return StopsAtFirstEos(model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                           minimal_topk, eos_id).run(prompt)
