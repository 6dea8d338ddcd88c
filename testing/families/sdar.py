"""The block-diffusion families: SDAR / TraDo's ``block_diffusion_generate`` (target ``sdar``,
spec/block_diffusion.md BD9) with the published loop's defects (BD7), and LLaDA2.0's loop (target ``llada2``,
BD12.1). Their cases, the simplest first, and knobs; the ``sdar`` target's decode, one step per model call."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from veridec.canvas import whole_blocks
from veridec.optimized import block_diffusion
from veridec.optimized.block_diffusion import BlockLoop
from veridec.rules.common import entropy
from veridec.trace import Decoded, StepRecord

from ..flips import FlipScore
from ..official import Official, OfficialDefect, defect
from .common import KNOB_TEMPERATURES, KNOB_TOP_K, KNOB_TOP_P, Family, Reading, choices, divisor_block_lengths, kept

SDAR_SETTINGS = ("gen_length", "block_length", "denoising_steps", "temperature", "top_k", "top_p", "remasking_strategy",
                 "confidence_threshold", "eb_threshold", "stopping_criteria_idx")
LLADA2_SETTINGS = ("gen_length", "block_length", "steps", "temperature", "top_k", "top_p", "threshold", "minimal_topk",
                   "eos_id")
STRATEGIES = ("low_confidence_dynamic", "low_confidence_static", "sequential")
BLOCK_LENGTHS = (4, 2, 1, 8)
CONFIDENCE_THRESHOLDS = (0.85, 0.5, 0.3)
EB_THRESHOLDS = (1.0, 0.35, 5.0)


@st.composite
def sdar_settings(draw, names, eos_id: int | None, sampled: bool = False):
    """The settings among ``names`` (the block structure always: the target needs it): blocks of 4, 2, 1 or 8,
    1-8 new tokens, 1-6 steps; temperature 0 only unsampled (the published code fails there, BD7.1); top-k,
    top-p, the strategies (entropy_bounded where ``eb_threshold`` is named), thresholds, a stop at EOS."""
    settings = {"gen_length": draw(st.integers(1, 8)), "block_length": draw(st.sampled_from(BLOCK_LENGTHS)),
                "denoising_steps": draw(st.integers(1, 6)),
                "temperature": draw(st.sampled_from((1.0, 0.7) if sampled else (1.0, 0.7, 0.0))),
                "top_k": draw(st.sampled_from((0, 3, 1))), "top_p": draw(st.sampled_from((1.0, 0.9))),
                "remasking_strategy": draw(st.sampled_from(
                    STRATEGIES + (("entropy_bounded",) if "eb_threshold" in names else ()))),
                "confidence_threshold": draw(st.sampled_from(CONFIDENCE_THRESHOLDS))}
    if settings["remasking_strategy"] == "entropy_bounded":
        settings["eb_threshold"] = draw(st.sampled_from(EB_THRESHOLDS))
    if "stopping_criteria_idx" in names and eos_id is not None:
        settings["stopping_criteria_idx"] = draw(st.sampled_from((None, [eos_id])))
    return kept(settings, names, ("gen_length", "block_length", "denoising_steps"))


@st.composite
def llada2_settings(draw, names, eos_id: int | None, sampled: bool = False):
    """LLaDA2.0's settings among ``names`` (spec/block_diffusion.md BD12.1; the block structure and steps always):
    blocks of 4, 2, 1 or 8, 1-8 new tokens, 1-6 steps per block, ``minimal_topk`` 1 or 2 (at most gen_length),
    thresholds, temperature 0 first, top-k / top-p of None first, the model's EOS as ``eos_id``."""
    gen = draw(st.integers(1, 8))
    settings = {"gen_length": gen, "block_length": draw(st.sampled_from(BLOCK_LENGTHS)),
                "steps": draw(st.integers(1, 6)), "minimal_topk": draw(st.sampled_from((1, 2) if gen > 1 else (1,))),
                "threshold": draw(st.sampled_from((0.95, 0.5, 0.2, 0.05))),
                "temperature": draw(st.sampled_from((1.0, 0.7) if sampled else (0.0, 1.0, 0.7))),
                "top_k": draw(st.sampled_from((None, 3, 1))), "top_p": draw(st.sampled_from((None, 0.9)))}
    if "eos_id" in names and eos_id is not None:
        settings["eos_id"] = eos_id
    return kept(settings, names, ("gen_length", "block_length", "steps"))


def eb_thresholds(settings: dict) -> list[dict]:
    """``eb_threshold``'s knob, where the case uses the entropy bound (None elsewhere: nothing to change)."""
    return choices("eb_threshold", EB_THRESHOLDS)(settings) if settings.get("eb_threshold") is not None else []


def minimal_topks(settings: dict) -> list[dict]:
    """``minimal_topk`` 1 or 2, at most the gen length."""
    return [variant for variant in choices("minimal_topk", (1, 2))(settings)
            if variant["minimal_topk"] <= settings["gen_length"]]


# ------------------------------------------------------------------------- entropy_bounded, the published reading
class PublishedEntropyLoop(BlockLoop):
    """BD7.2's score repaired: JetAstra's ``entropy_bounded`` scores every masked position by one number per row,
    E = -sum q log q over the block's drawn tokens' probabilities q (clamped at 1e-12), and commits the first k
    masks in position order, k = max(1, min(searchsorted(cumsum of E over the masks, eb_threshold), masks)); the
    rest of the loop is veridec's (BD6)."""

    def select(self, params, masked, x0_p, probs, step):
        if params.remasking_strategy != "entropy_bounded" or step >= params.denoising_steps:
            return super().select(params, masked, x0_p, probs, step)
        return published_entropy_selection(params.eb_threshold, masked, x0_p)


def published_entropy_score(x0_p: torch.Tensor) -> torch.Tensor:
    """BD7.2: -sum q log q of the drawn tokens' probabilities ``x0_p`` [b] over the whole block (in their dtype)."""
    q = x0_p.clamp_min(1e-12)
    return -(q * q.log()).sum()


def published_entropy_selection(bound: float, masked: torch.Tensor, x0_p: torch.Tensor) -> torch.Tensor:
    """The masks [b] (bool) the published score commits: the first k in position order (module docstring)."""
    positions = masked.nonzero()[:, 0]  # [m]
    cumulative = torch.cumsum(published_entropy_score(x0_p).expand(len(positions)), dim=0)  # [m]
    bound_tensor = torch.tensor(bound, dtype=cumulative.dtype, device=cumulative.device)  # []
    k = int(torch.searchsorted(cumulative, bound_tensor, right=False))
    return torch.zeros_like(masked).index_fill(0, positions[:max(1, min(k, len(positions)))], True)


class CapturingLoop(BlockLoop):
    """veridec's loop, keeping each selection's inputs (masked [b], x0_p [b], probs [b, V], step) in call order."""

    def __init__(self):
        self.selections = []

    def select(self, params, masked, x0_p, probs, step):
        self.selections.append((masked.clone(), x0_p.clone(), probs.clone(), step))
        return super().select(params, masked, x0_p, probs, step)


def entropy_details(setup, outcome) -> list[str]:
    """At an ``entropy_bounded`` case's first divergence (one row): BD6.4's entropies of the masked positions and
    what they commit, and the published score of BD7.2 and what it would commit, from a rerun of the target
    that keeps its selections' inputs."""
    case, divergence = outcome.case, outcome.divergence
    settings = {**case["settings"]}
    if settings.get("remasking_strategy") != "entropy_bounded" or len(case["prompt"]) != 1:
        return []
    capture = CapturingLoop()
    prompt = torch.tensor(case["prompt"], dtype=torch.long, device=setup.model.device)
    torch.manual_seed(case["seed"])
    block_diffusion.generate(setup.model, prompt, None, ties=setup.ties, loop=capture,
                             **{k: v for k, v in settings.items() if k in SDAR_SETTINGS})
    index = sum(step.block >= 0 for step in outcome.target.trace.steps[:divergence.step])  # the denoising call
    if index >= len(capture.selections):
        return []
    masked, x0_p, probs, _ = capture.selections[index]
    start = divergence.position - divergence.position % settings["block_length"]
    positions = masked.nonzero()[:, 0].tolist()
    entropies = entropy(probs.double())
    ours = sorted(positions, key=lambda p: (float(entropies[p]), p))
    published = published_entropy_selection(settings["eb_threshold"], masked, x0_p).nonzero()[:, 0].tolist()
    shown = ", ".join(f"{start + p}: {float(entropies[p]):.6g}" for p in ours)
    return [f"BD6.4, the target's rule: the masked positions' entropies of their filtered laws, in increasing order "
            f"({shown}), committed while their running sum stays under eb_threshold {settings['eb_threshold']:g}",
            f"BD7.2, the published score: E = {float(published_entropy_score(x0_p)):.6g} at every masked position "
            f"(-sum q log q of the block's drawn tokens' probabilities), which commits "
            f"{', '.join(str(start + p) for p in published)}"]


PUBLISHED_ENTROPY = Reading("the published entropy score of entropy_bounded, repaired (one number per row)", "BD7.2",
                            "BD6.4's entropy of each masked position's filtered law",
                            settings={"loop": PublishedEntropyLoop()},
                            applies=lambda settings: settings.get("remasking_strategy") == "entropy_bounded")

def sdar_flip_score(settings: dict) -> FlipScore | str:
    """What SDAR's greedy strategies rank and compare (BD6; spec EC13): p(x̂) under the unfiltered softmax at
    temperature 0 whatever top-k / top-p say (BD6.1), against ``confidence_threshold`` for
    ``low_confidence_dynamic``; ``entropy_bounded``'s cumulative bound is not judged."""
    if (settings.get("temperature") or 0) > 0:
        return "sampled (temperature > 0): its decisions are draws"
    strategy = settings.get("remasking_strategy", "low_confidence_dynamic")
    if strategy == "entropy_bounded":
        return "entropy_bounded: its cumulative entropy bound is not in the trace"
    return FlipScore("probability", settings.get("confidence_threshold") if strategy == "low_confidence_dynamic"
                     else None)


SDAR = Family("sdar", lambda names, model, defaults, sampled: sdar_settings(names, model.special.eos_id, sampled),
              knobs={"denoising_steps": choices("denoising_steps", (1, 2, 4, 8)), "top_k": choices("top_k", KNOB_TOP_K),
                     "top_p": choices("top_p", KNOB_TOP_P),
                     "remasking_strategy": choices("remasking_strategy", STRATEGIES),
                     "confidence_threshold": choices("confidence_threshold", CONFIDENCE_THRESHOLDS),
                     "eb_threshold": eb_thresholds, "temperature": choices("temperature", KNOB_TEMPERATURES),
                     "block_length": divisor_block_lengths},
              readings=(PUBLISHED_ENTROPY,), details=entropy_details, flip_score=sdar_flip_score)
LLADA2 = Family("llada2", lambda names, model, defaults, sampled: llada2_settings(names, model.special.eos_id,
                                                                                   sampled),
                knobs={"threshold": choices("threshold", (0.95, 0.5, 0.2)), "top_k": choices("top_k", (None, 3)),
                       "top_p": choices("top_p", (None, 0.9)), "steps": choices("steps", (1, 2, 4, 8)),
                       "temperature": choices("temperature", KNOB_TEMPERATURES), "minimal_topk": minimal_topks,
                       "block_length": choices("block_length", BLOCK_LENGTHS)})


# --------------------------------------------------------------------------------------------- the sdar target
def block_diffusion_target(model, prompt, attention_mask, ties, **settings) -> Decoded:
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


def _official_block_diffusion(model, prompt, attention_mask, ties, **settings) -> Decoded:
    """What the published block_diffusion_generate does, overwrites included (BD10): the canvas and counters a
    candidate that deviates where it deviates must reproduce."""
    return block_diffusion.generate(model, prompt, attention_mask, ties=ties, loop="official", **settings)


SDAR_GREEDY = ("BD7.1", "temperature 0: the published sampler divides by it and torch.multinomial raises on the NaN "
               "probabilities (RuntimeError)", "raises")
SDAR_NO_EB = ("BD7.2", "entropy_bounded: JetAstra's selection never creates transfer_index (UnboundLocalError), "
              "dLLM-RL's has no such strategy (ValueError)", "raises")
SDAR_OVERWRITE = ("BD7.3", "a step's quota exceeds the masks left (or a sequential range runs over a committed "
                  "position): the published selection writes fresh samples over prompt or committed tokens",
                  "deviates")
SDAR_PAST_SCHEDULE = ("BD7.4", "a sampled mask token keeps the block open past its denoising_steps: the published "
                      "loop indexes past its schedule (IndexError)", "raises")
SDAR_BATCH = ("BD7.5", "batch > 1: the published canvas has one row (RuntimeError before the first forward)",
              "raises")


def sdar_defect(settings: dict, steps: list, prompt: torch.Tensor, mask_id: int) -> OfficialDefect | None:
    """BD7: the published ``block_diffusion_generate`` (Gen-Verse/dLLM-RL 10b4fd1, JetAstra/SDAR c2041a8) before
    its first forward (a batch, temperature 0, entropy_bounded) or at the first step of the target's decode
    (``steps``: one record per denoising forward, its block and commits) where a quota exceeds the masks left
    (BD7.3) or a block needs a step past its schedule (BD7.4)."""
    from veridec.rules.sdar import SDARParams, official_overwrites

    if prompt.shape[0] > 1:
        return defect(SDAR_BATCH, 0)
    if settings.get("remasking_strategy") == "entropy_bounded":
        return defect(SDAR_NO_EB, 0)
    params = SDARParams(**{k: v for k, v in settings.items() if k in SDARParams.__dataclass_fields__})
    if params.temperature == 0:
        return defect(SDAR_GREEDY, 0)
    b = params.block_length
    length = whole_blocks(prompt.shape[1] + params.gen_length, b)
    canvas = torch.full((length,), mask_id, dtype=torch.long, device="cpu")  # [T] on the host
    canvas[:prompt.shape[1]] = prompt[0].cpu()
    in_block, last = 0, None
    for k, step in enumerate(steps):
        if step.block < 0:  # a prefill or a store call (the check's target, BD9)
            continue
        in_block = in_block + 1 if step.block == last else 0
        last = step.block
        masked = canvas[step.block * b:(step.block + 1) * b] == mask_id  # [b]
        if in_block >= params.denoising_steps:
            return defect(SDAR_PAST_SCHEDULE, k)
        if official_overwrites(params, masked, in_block):
            return defect(SDAR_OVERWRITE, k)
        canvas[step.positions[0]] = torch.tensor(step.tokens[0], dtype=torch.long, device="cpu")
    return None


def _sdar_defects(case, steps, stalled, model, prompt, mask):
    return sdar_defect(case["settings"], steps, prompt, model.special.mask_id)


SDAR_OFFICIAL = Official("Gen-Verse/dLLM-RL 10b4fd1 / JetAstra/SDAR c2041a8 block_diffusion_generate", _sdar_defects,
                         run=_official_block_diffusion)
