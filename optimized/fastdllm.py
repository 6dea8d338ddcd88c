"""Fast-dLLM with a prefix or dual K/V cache, and batched without cache (spec/fastdllm.md FD5-FD8).

Official parameter names, so switching from NVlabs/Fast-dLLM ``llada/generate.py`` is an import away:

    from veridec.optimized.fastdllm import generate_with_dual_cache
    canvas, trace = generate_with_dual_cache(model, prompt, steps=8, gen_length=256, block_length=32,
                                             threshold=0.9)

The loop is ``veridec.optimized.parallel.decode`` with the rule ``FastDLLMParams`` picks and the official
loop's details as one hook (``OfficialLoop``), named by ``loop=``: ``"current"`` (the default) is the official
code as it is, whose prefix path's unused Gumbel draw per cached step is kept, so seeds reproduce it;
``"june2025"`` is the June 2025 code (commit 24cc59e), which tests after the forward and so spends one more
cached forward when a block's refresh step completed it (a cached loop: refused with ``cache="none"``).
``compile=True`` runs the refresh and the cached block step under ``torch.compile(fullgraph=True,
mode="reduce-overhead")``, one graph per shape (``veridec.optimized.compiled``); the same trace as eager where
the backend runs the eager kernels. ``narrow_logits=False`` computes every window column's logits, as the official
code does (by default only the step's columns: ``veridec.optimized.parallel.decode``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from veridec.checks import check_choice
from veridec.rules.common import gumbel_noisy_logits
from veridec.rules.fastdllm import FastDLLMParams

from .parallel import CACHES, LoopHook, decode


@dataclass(frozen=True)
class OfficialLoop(LoopHook):
    """NVlabs/Fast-dLLM's loop details that change random streams or forward counts, not the rule:
    ``caches``: the cache policies the loop has; ``extra_forward``: the June 2025 loop runs a cached forward at
    step 1 even when the refresh step finished the block; ``unused_draw`` (set per cache by ``for_cache``): the
    prefix path draws Gumbel noise over each cached forward's logits and discards it."""

    name: str
    caches: tuple[str, ...]
    extra_forward: bool = False
    unused_draw: bool = False

    def for_cache(self, cache: str) -> "OfficialLoop":
        """The loop as it runs with ``cache``; a ValueError where the official code has no such loop."""
        if cache not in self.caches:
            raise ValueError(f"loop={self.name!r} runs with cache in {list(self.caches)}, not cache={cache!r}: the "
                             "official code has no such loop")
        return replace(self, unused_draw=cache == "prefix")

    def forward_after_completion(self, step: int) -> bool:
        return self.extra_forward and step == 1

    def after_cached_forward(self, logits: torch.Tensor, temperature: float, generator) -> None:
        if self.unused_draw:
            gumbel_noisy_logits(logits, temperature, generator)


LOOPS = {"current": OfficialLoop("current", CACHES),
         "june2025": OfficialLoop("june2025", ("prefix", "dual"), extra_forward=True)}  # commit 24cc59e, FD6


def generate(model, prompt, attention_mask=None, steps=128, gen_length=128, block_length=128, temperature=0.0,
             remasking="low_confidence", mask_id=None, threshold=None, factor=None, **options):
    """No cache: a full forward per step, batched (Tier E against ``veridec.reference.fastdllm.generate``)."""
    return _generate("none", model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                     remasking, mask_id, threshold, factor, **options)


def generate_with_prefix_cache(model, prompt, attention_mask=None, steps=128, gen_length=128, block_length=128,
                               temperature=0.0, remasking="low_confidence", mask_id=None, threshold=None,
                               factor=None, **options):
    return _generate("prefix", model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                     remasking, mask_id, threshold, factor, **options)


def generate_with_dual_cache(model, prompt, attention_mask=None, steps=128, gen_length=128, block_length=128,
                             temperature=0.0, remasking="low_confidence", mask_id=None, threshold=None,
                             factor=None, **options):
    return _generate("dual", model, prompt, attention_mask, steps, gen_length, block_length, temperature,
                     remasking, mask_id, threshold, factor, **options)


@torch.no_grad()
def _generate(cache, model, prompt, attention_mask, steps, gen_length, block_length, temperature, remasking,
              mask_id, threshold, factor, *, inclusive: bool = True, last_rank: str = "commit", ties: str = "lowest",
              generator: torch.Generator | None = None, record_logits: bool = False, loop: str = "current",
              compile: bool | dict = False, narrow_logits: bool = True):
    """The three entry points' decode; ``loop``: a name of ``LOOPS``."""
    check_choice("loop", loop, LOOPS)
    hook = LOOPS[loop].for_cache(cache)
    params = FastDLLMParams(steps, gen_length, block_length, temperature, remasking, threshold, factor, inclusive,
                            last_rank, ties)
    return decode(model, prompt, attention_mask, rule=params.rule, cache=cache, gen_length=gen_length,
                  block_length=block_length, temperature=temperature, remasking=remasking, mask_id=mask_id,
                  ties=ties, generator=generator, record_logits=record_logits, name=f"fastdllm-{cache}-cache",
                  hook=hook, compile=compile, narrow_logits=narrow_logits)
