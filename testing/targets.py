"""What a candidate is held against: a veridec decoder of the same rule and cache policy, exact to the
official code where one exists (spec/fastdllm.md FD4, FD8; spec/sequential.md SQ1.8, SQ2.6).

``wino`` is WINO's ``decoding_wino`` (spec/wino.md), ``editing`` LLaDA2.1's block sampler with token edits
(spec/editing.md): one row, no padding, their traces hold events.
``sdar`` is SDAR / TraDo's ``block_diffusion_generate`` (spec/block_diffusion.md), cached as the published code
calls the model, one step per model call (BD9).
``llada2`` is LLaDA2.0's loop (spec/block_diffusion.md BD12.1): full block-causal forwards of the canvas up to the
block's end, one per step, in the llada convention's explicit call; one row.
``fastdllm-2025-06`` is the June 2025 loop of Fast-dLLM (commit 24cc59e: the extra cached forward of FD6, no
factor mode). ``target(against, cache)`` gives the decoder, the calling convention its official counterpart
speaks, and the settings it understands; ``against`` may also be any callable in a convention (a reference of
the user's own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from veridec.adapters import CONVENTIONS
from veridec.events import event_trace
from veridec.optimized import block_diffusion
from veridec.optimized import fastdllm as fast
from veridec.optimized.parallel import CACHES
from veridec.trace import Decoded, StepRecord
from veridec.reference import dream, editing, llada, wino
from veridec.reference.block_diffusion import llada2_generate
from veridec.reference import fastdllm as fastdllm_reference

BLOCK_SETTINGS = ("steps", "gen_length", "block_length", "temperature", "remasking")
FASTDLLM_SETTINGS = (*BLOCK_SETTINGS, "threshold", "factor")
EDITING_SETTINGS = ("max_new_tokens", "block_size", "temperature", "top_p", "top_k", "threshold", "editing_threshold",
                    "max_post_steps", "num_to_transfer", "eos_early_stop")
WINO_SETTINGS = ("gen_length", "block_length", "temperature", "threshold", "threshold_back")
SDAR_SETTINGS = ("gen_length", "block_length", "denoising_steps", "temperature", "top_k", "top_p", "remasking_strategy",
                 "confidence_threshold", "eb_threshold", "stopping_criteria_idx")
LLADA2_SETTINGS = ("gen_length", "block_length", "steps", "temperature", "top_k", "top_p", "threshold", "minimal_topk",
                   "eos_id")
DREAM_SETTINGS = ("max_new_tokens", "steps", "eps", "alg", "alg_temp", "temperature", "top_p", "top_k",
                  "generation_tokens_hook_func", "generation_logits_hook_func")


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
    upstream: str | None = None  # the official loop it is exact to (upstream.defect_of's family), if any
    max_batch: int | None = None  # the most rows the official function takes (None: any)
    family: str = "block"  # how its cases are drawn: "block", "dream", "wino", "editing", "sdar" or "llada2"
    published: Callable | None = None  # the official code's behaviour, defects included (where it deviates, EC6)

    def settings_of(self, case: dict) -> dict:
        """The case's settings this target understands (both sides get these; a candidate those it names)."""
        return {name: value for name, value in case["settings"].items() if name in self.settings}


def _with_events(generate, name: str, refusal: str):
    """A revocable decoder (WINO, the editing sampler) as a target returning a Decoded whose trace holds its
    events; it takes no padding (``refusal`` says why)."""
    def decode(model, prompt, attention_mask, ties, **settings):
        if attention_mask is not None:
            raise ValueError(f"attention_mask: {refusal}")
        decoded = generate(model, prompt, ties=ties, **settings)
        params = {**settings, "mask_id": model.special.mask_id}
        return Decoded(decoded.canvas, event_trace(decoded, name, params, prompt.shape[1]))
    return decode


WINO = _with_events(wino.generate, "wino", "WINO takes no padding (spec WN1: the official function has none)")
EDITING = _with_events(editing.generate, "editing", "the editing sampler takes no padding (spec ED1: one row)")


def _block_diffusion_target(model, prompt, attention_mask, ties, **settings) -> Decoded:
    """The cached block decoder (BD8) with its trace made one step per model call (BD9): an empty step, of block
    -1, for the prefill (when the prompt has whole blocks) and after each block's last step for its store."""
    decoded = block_diffusion.generate(model, prompt, attention_mask, ties=ties, **settings)
    trace, steps = decoded.trace, decoded.trace.steps
    rows = prompt.shape[0]
    empty = lambda: StepRecord(-1, [[] for _ in range(rows)], [[] for _ in range(rows)],  # noqa: E731
                               [[] for _ in range(rows)], [[] for _ in range(rows)], [float("inf")] * rows)
    real = prompt.shape[1] if attention_mask is None else int(attention_mask.sum(dim=1).max())
    calls = [empty()] if trace.counters.model_calls and real >= settings.get("block_length", 8) else []
    for k, step in enumerate(steps):
        calls.append(step)
        if k + 1 == len(steps) or steps[k + 1].block != step.block:
            calls.append(empty())
    trace.steps = calls
    return decoded


def _published_block_diffusion(model, prompt, attention_mask, ties, **settings) -> Decoded:
    """What the published block_diffusion_generate does, overwrites included (BD10): the canvas and counters a
    candidate that deviates where it deviates must reproduce."""
    return block_diffusion.generate(model, prompt, attention_mask, ties=ties, loop="official", **settings)


def _veridec(decoder, **fixed):
    return lambda model, prompt, attention_mask, ties, **settings: decoder(model, prompt, attention_mask, ties=ties,
                                                                            **fixed, **settings)


# The cached targets compute every window column's logits, as a faithful port of the official code does: a check
# draws thresholds at the exact confidences, where a narrowed forward's rounding could flip a decision.
WHOLE = {"narrow_logits": False}
FIXED = "narrow_logits=False, "

TARGETS = {
    ("llada", "none"): Target("llada", "llada", _veridec(llada.generate),
                              (*BLOCK_SETTINGS, "cfg_scale", "logits_eos_inf", "confidence_eos_eot_inf"),
                              call="veridec.reference.llada.generate", upstream="llada"),
    ("fastdllm", "none"): Target("fastdllm", "llada", _veridec(fastdllm_reference.generate),
                                 FASTDLLM_SETTINGS, call="veridec.reference.fastdllm.generate",
                                 upstream="fastdllm/current/none"),
    ("fastdllm", "prefix"): Target("fastdllm --cache prefix", "fastdllm",
                                   _veridec(fast.generate_with_prefix_cache, **WHOLE), FASTDLLM_SETTINGS,
                                   call="veridec.optimized.fastdllm.generate_with_prefix_cache", fixed=FIXED,
                                   upstream="fastdllm/current/prefix"),
    ("fastdllm", "dual"): Target("fastdllm --cache dual", "fastdllm", _veridec(fast.generate_with_dual_cache, **WHOLE),
                                 FASTDLLM_SETTINGS,
                                 call="veridec.optimized.fastdllm.generate_with_dual_cache", fixed=FIXED,
                                 upstream="fastdllm/current/dual"),
    ("fastdllm-2025-06", "none"): Target("fastdllm-2025-06", "llada", _veridec(fastdllm_reference.generate),
                                         (*BLOCK_SETTINGS, "threshold"), call="veridec.reference.fastdllm.generate",
                                         upstream="fastdllm/legacy/none"),
    ("fastdllm-2025-06", "prefix"): Target("fastdllm-2025-06 --cache prefix", "fastdllm",
                                           _veridec(fast.generate_with_prefix_cache, loop="june2025", **WHOLE),
                                           (*BLOCK_SETTINGS, "threshold"),
                                           call="veridec.optimized.fastdllm.generate_with_prefix_cache",
                                           fixed="loop='june2025', " + FIXED, upstream="fastdllm/legacy/prefix"),
    ("fastdllm-2025-06", "dual"): Target("fastdllm-2025-06 --cache dual", "fastdllm",
                                         _veridec(fast.generate_with_dual_cache, loop="june2025", **WHOLE),
                                         (*BLOCK_SETTINGS, "threshold"),
                                         call="veridec.optimized.fastdllm.generate_with_dual_cache",
                                         fixed="loop='june2025', " + FIXED, upstream="fastdllm/legacy/dual"),
    ("dream", "none"): Target("dream", "dream", _veridec(dream.diffusion_generate), DREAM_SETTINGS,
                              mask_name="mask_token_id", length_name="max_new_tokens",
                              call="veridec.reference.dream.diffusion_generate", upstream="dream", family="dream"),
    ("wino", "none"): Target("wino", "llada", WINO, WINO_SETTINGS, call="veridec.reference.wino.generate",
                             max_batch=1, family="wino"),
    ("sdar", "none"): Target("sdar", "hf-block", _block_diffusion_target, SDAR_SETTINGS,
                             call="veridec.optimized.block_diffusion.generate", upstream="sdar",
                             family="sdar", published=_published_block_diffusion),
    ("llada2", "none"): Target("llada2", "llada", _veridec(llada2_generate), LLADA2_SETTINGS,
                               call="veridec.reference.block_diffusion.llada2_generate", max_batch=1,
                               family="llada2"),
    ("editing", "none"): Target("editing", "llada", EDITING, EDITING_SETTINGS, length_name="max_new_tokens",
                                call="veridec.reference.editing.generate", max_batch=1, family="editing"),
}
AGAINST = sorted({name for name, _ in TARGETS})


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
            "dream": TARGETS[("dream", "none")], "hf-block": TARGETS[("sdar", "none")]}
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    template = base[convention]
    fit = fit_candidate(decoder, template)
    settings = tuple(name for name in template.settings if fit.takes(name))
    name = getattr(decoder, "__qualname__", repr(decoder))
    return Target(name, convention, decoder, settings, template.mask_name, template.length_name, veridec=False,
                  call=f"{getattr(decoder, '__module__', '?')}.{name}", fit=fit, family=template.family)
