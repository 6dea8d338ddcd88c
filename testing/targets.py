"""What a candidate is held against: a veridec decoder of the same rule and cache policy, exact to the
official code where one exists (spec/fastdllm.md FD4, FD8; spec/sequential.md SQ1.8, SQ2.6).

``wino`` is WINO's ``decoding_wino`` (spec/wino.md), ``editing`` LLaDA2.1's block sampler with token edits
(spec/editing.md): one row, no padding, their traces hold events.
``diffusiongemma`` is transformers' ``DiffusionGemmaForBlockDiffusion.generate`` (spec/diffusiongemma.md): uniform-state
canvases, veridec's cached decoder, bit-exact to the official loop; its family runs its own cases (DG11).
``sdar`` is SDAR / TraDo's ``block_diffusion_generate`` (spec/block_diffusion.md), cached as the published code
calls the model, one step per model call (BD9).
``llada2`` is LLaDA2.0's loop (spec/block_diffusion.md BD12.1): full block-causal forwards of the canvas up to the
block's end, one per step, in the llada convention's explicit call; one row.
``fastdllm-v2`` is Fast-dLLM v2's ``generate`` (spec/fastdllm_v2.md) in the published modelling's calling convention,
prefix-cached, one step per model call.
``fastdllm-2025-06`` is the June 2025 loop of Fast-dLLM (commit 24cc59e: the extra cached forward of FD6, no
factor mode). ``target(against, cache)`` gives the decoder, the calling convention its official counterpart
speaks, and the settings it understands; ``against`` may also be any callable in a convention (a reference of
the user's own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from veridec.adapters import CONVENTIONS
from veridec.optimized import fastdllm as fast
from veridec.optimized.parallel import CACHES
from veridec.reference import dream, llada
from veridec.reference import fastdllm as fastdllm_reference
from veridec.reference.block_diffusion import llada2_generate

from .families import block, editing, fastdllm_v2, sdar, wino
from .families import diffusiongemma as diffusiongemma_family
from .families import dream as dream_family
from .families.common import Family
from .official import Official


@dataclass(frozen=True)
class Target:
    name: str  # e.g. "fastdllm --cache dual"
    convention: str  # the calling convention of the official counterpart
    decode: Callable  # (model, prompt, attention_mask, ties, **settings) -> Decoded; or a foreign decoder
    settings: tuple[str, ...]  # keyword settings it understands (besides the mask id and attention mask)
    mask_name: str = "mask_id"  # the keyword that carries the mask token id
    length_name: str = "gen_length"  # the keyword that sets the number of generated tokens
    veridec: bool = True  # returns a Decoded with a trace (else tokens, or (tokens, nfe))
    call: str = ""  # how the reproducer calls it
    fixed: str = ""  # keyword arguments the reproducer adds (the June 2025 loop's loop='june2025')
    fit: object = None  # a foreign decoder's signature fit (candidates.Fit); None for veridec's
    official: Official | None = None  # the official loop it is exact to, with its defects (spec EC6), if any
    max_batch: int | None = None  # the most rows the official function takes (None: any)
    family: Family = block.FAMILY  # how its cases are drawn and resolved, and its knobs (testing.families)
    exact_law: bool = False  # an oracle model's exact law of its decode can be enumerated (decoder_law, ST7)

    def settings_of(self, case: dict) -> dict:
        """The case's settings this target understands (both sides get these; a candidate those it names)."""
        return {name: value for name, value in case["settings"].items() if name in self.settings}


def _veridec(decoder, **fixed):
    return lambda model, prompt, attention_mask, ties, **settings: decoder(model, prompt, attention_mask, ties=ties,
                                                                            **fixed, **settings)


# The cached targets compute every window column's logits, as a faithful port of the official code does: a check
# draws thresholds at the exact confidences, where a narrowed forward's rounding could flip a decision.
WHOLE = {"narrow_logits": False}
FIXED = "narrow_logits=False, "

TARGETS = {
    ("llada", "none"): Target("llada", "llada", _veridec(llada.generate), block.LLADA_SETTINGS,
                              call="veridec.reference.llada.generate", official=block.LLADA, exact_law=True),
    ("fastdllm", "none"): Target("fastdllm", "llada", _veridec(fastdllm_reference.generate),
                                 block.FASTDLLM_SETTINGS, call="veridec.reference.fastdllm.generate",
                                 official=block.FASTDLLM_NONE, exact_law=True),
    ("fastdllm", "prefix"): Target("fastdllm --cache prefix", "fastdllm",
                                   _veridec(fast.generate_with_prefix_cache, **WHOLE), block.FASTDLLM_SETTINGS,
                                   call="veridec.optimized.fastdllm.generate_with_prefix_cache", fixed=FIXED,
                                   official=block.FASTDLLM_PREFIX),
    ("fastdllm", "dual"): Target("fastdllm --cache dual", "fastdllm", _veridec(fast.generate_with_dual_cache, **WHOLE),
                                 block.FASTDLLM_SETTINGS,
                                 call="veridec.optimized.fastdllm.generate_with_dual_cache", fixed=FIXED,
                                 official=block.FASTDLLM_DUAL),
    ("fastdllm-2025-06", "none"): Target("fastdllm-2025-06", "llada", _veridec(fastdllm_reference.generate),
                                         block.JUNE_2025_SETTINGS, call="veridec.reference.fastdllm.generate",
                                         official=block.JUNE_NONE, exact_law=True),
    ("fastdllm-2025-06", "prefix"): Target("fastdllm-2025-06 --cache prefix", "fastdllm",
                                           _veridec(fast.generate_with_prefix_cache, loop="june2025", **WHOLE),
                                           block.JUNE_2025_SETTINGS,
                                           call="veridec.optimized.fastdllm.generate_with_prefix_cache",
                                           fixed="loop='june2025', " + FIXED, official=block.JUNE_PREFIX),
    ("fastdllm-2025-06", "dual"): Target("fastdllm-2025-06 --cache dual", "fastdllm",
                                         _veridec(fast.generate_with_dual_cache, loop="june2025", **WHOLE),
                                         block.JUNE_2025_SETTINGS,
                                         call="veridec.optimized.fastdllm.generate_with_dual_cache",
                                         fixed="loop='june2025', " + FIXED, official=block.JUNE_DUAL),
    ("dream", "none"): Target("dream", "dream", _veridec(dream.diffusion_generate), dream_family.DREAM_SETTINGS,
                              mask_name="mask_token_id", length_name="max_new_tokens",
                              call="veridec.reference.dream.diffusion_generate", official=dream_family.DREAM,
                              family=dream_family.FAMILY),
    ("wino", "none"): Target("wino", "llada", wino.WINO, wino.WINO_SETTINGS, call="veridec.reference.wino.generate",
                             max_batch=1, family=wino.FAMILY),
    ("sdar", "none"): Target("sdar", "hf-block", sdar.block_diffusion_target, sdar.SDAR_SETTINGS,
                             call="veridec.optimized.block_diffusion.generate", official=sdar.SDAR_OFFICIAL,
                             family=sdar.SDAR),
    ("llada2", "none"): Target("llada2", "llada", _veridec(llada2_generate), sdar.LLADA2_SETTINGS,
                               call="veridec.reference.block_diffusion.llada2_generate", max_batch=1,
                               family=sdar.LLADA2),
    ("fastdllm-v2", "none"): Target("fastdllm-v2", "fastdllm-v2", fastdllm_v2.v2_target, fastdllm_v2.V2_SETTINGS,
                                    length_name="max_new_tokens", call="veridec.optimized.fastdllm_v2.generate",
                                    official=fastdllm_v2.GENERATE, family=fastdllm_v2.FAMILY),
    ("editing", "none"): Target("editing", "llada", editing.EDITING, editing.EDITING_SETTINGS,
                                length_name="max_new_tokens", call="veridec.reference.editing.generate", max_batch=1,
                                family=editing.FAMILY),
    ("diffusiongemma", "none"): Target("diffusiongemma", "diffusiongemma", diffusiongemma_family.decode_target,
                                       diffusiongemma_family.DG_SETTINGS, mask_name="", length_name="max_new_tokens",
                                       call="veridec.optimized.diffusiongemma.generate",
                                       family=diffusiongemma_family.FAMILY),
}
AGAINST = sorted({name for name, _ in TARGETS})
FAMILIES = {each.family.name: each.family for each in TARGETS.values()}  # the families of the targets


def target(against: str | Callable = "fastdllm", cache: str = "none", convention: str | None = None) -> Target:
    """The veridec decoder ``against`` names with the ``cache`` policy, or a user's callable in ``convention``."""
    if callable(against):
        if convention is None:
            raise ValueError(f"convention: a callable 'against' needs its calling convention named "
                             f"({', '.join(CONVENTIONS)})")
        return _callable_target(against, convention)
    if against not in AGAINST:
        raise ValueError(f"against must be one of {', '.join(AGAINST)} or a callable, got {against!r}")
    if cache not in CACHES:
        raise ValueError(f"cache must be one of {', '.join(CACHES)}, got {cache!r}")
    if (against, cache) not in TARGETS:
        raise ValueError(f"cache={cache!r}: veridec has no {against} decoder with a {cache} cache (only the "
                         "fastdllm loops have prefix and dual caches)")
    return TARGETS[(against, cache)]


def _callable_target(decoder: Callable, convention: str) -> Target:
    from .candidates import fit_candidate  # the same signature rules as a candidate's

    base = {"llada": TARGETS[("fastdllm", "none")], "fastdllm": TARGETS[("fastdllm", "dual")],
            "dream": TARGETS[("dream", "none")], "hf-block": TARGETS[("sdar", "none")],
            "fastdllm-v2": TARGETS[("fastdllm-v2", "none")],
            "diffusiongemma": TARGETS[("diffusiongemma", "none")]}
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    template = base[convention]
    fit = fit_candidate(decoder, template)
    settings = tuple(name for name in template.settings if fit.takes(name))
    name = getattr(decoder, "__qualname__", repr(decoder))
    return Target(name, convention, decoder, settings, template.mask_name, template.length_name, veridec=False,
                  call=f"{getattr(decoder, '__module__', '?')}.{name}", fit=fit, family=template.family)
