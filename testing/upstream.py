"""Where the official code fails, as typed outcomes (spec/exactness.md EC6; the defects: spec/fastdllm.md FD9,
spec/sequential.md SQ1.9, SQ2.8, spec/block_diffusion.md BD7).

A target that is exact to an official loop knows where that loop raises, never ends or completes otherwise: a
prediction from the case's settings and the target's own decode (its trace: which step of which block, which
positions each step committed). ``defect_of`` gives the first such place of one case, or None. The predictions
are held against the official outcomes the golden data recorded (tests/test_golden_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from veridec.canvas import initial_canvas

UPSTREAM_MODES = ("match", "fail", "skip")  # what a check does where the official code fails (EC6)


@dataclass(frozen=True)
class UpstreamDefect:
    clause: str  # the spec clause that documents it, e.g. "FD9.1"
    description: str
    kind: str  # "raises": the official run raises; "endless": it never ends; "deviates": it completes otherwise
    at_step: int  # the target's step (one model call each) at which the official run fails or deviates

    def __str__(self) -> str:
        return f"{self.clause} ({self.description})"


QUOTA_EXHAUSTED = ("FD9.1", "quota mode: the block outlives its schedule, the official loop indexes past it "
                   "(IndexError)", "raises")
ENDLESS = ("FD9.2", "a step at temperature 0 commits nothing (the top-ranked candidate proposes the mask token): "
           "the official loop repeats it forever", "endless")
FACTOR_ROW_DONE = ("FD9.3", "factor mode at batch > 1: a row without candidates gets an empty threshold list "
                   "(IndexError)", "raises")
DUAL_BATCH = ("FD9.4", "dual cache at batch > 1: replace_position's indices of every row are scattered into one "
              "row (RuntimeError)", "raises")
JUNE_BATCH = ("FD9.5", "the June 2025 file has one canvas row: batch > 1 fails before the first forward "
              "(RuntimeError)", "raises")
LEFTOVERS_ACROSS_ROWS = ("FD9.6", "no cache at batch > 1: a row whose block is complete goes on committing its "
                         "masks before the block while another row decodes it (its output depends on the others)",
                         "deviates")
CFG_WITHOUT_MASK = ("SQ1.9", "cfg_scale > 0 without attention_mask: the official generate reads an unbound "
                    "variable (UnboundLocalError)", "raises")
CFG_NAN = ("SQ1.11", "cfg_scale > 0 where the model bans a token (a -inf logit in both branches): the official "
           "combination is NaN there and its argmax proposes the banned token", "deviates")
LLADA_8B_EOS = (126081, 126348)  # the EOS and EoT ids the official LLaDA generate.py hard-codes
EOS_IDS_HARD_CODED = ("SQ1.10", "logits_eos_inf / confidence_eos_eot_inf index LLaDA-8B's ids 126081 / 126348: "
                      "on a vocabulary without them IndexError, on one whose EOS / EoT are other ids other tokens "
                      "are banned", "raises")
ROW_CLAMP = ("SQ2.8", "a row has fewer masks than the step's count: the official loop writes the mask token over "
             "committed or prompt tokens", "deviates")


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


def defect(entry: tuple, at_step: int) -> UpstreamDefect:
    return UpstreamDefect(*entry, at_step)


def defect_of(family: str, case: dict, steps: list, stalled: bool, model, prompt, mask) -> UpstreamDefect | None:
    """The first official failure or deviation on ``case`` for the target ``family`` ("llada", "fastdllm/LOOP/CACHE"
    with LOOP current or legacy, "dream"), from the target's trace ``steps`` (as far as it got; ``stalled``: its
    decode stopped at its step budget)."""
    settings = case["settings"]
    if family == "llada":
        return llada_defect(settings, case["attention_mask"], model, prompt, mask)
    if family == "dream":
        return dream_defect(settings, steps, model, prompt, mask)
    if family == "sdar":
        return sdar_defect(settings, steps, prompt, model.special.mask_id)
    _, loop, cache = family.split("/")
    return fastdllm_defect(settings, loop, cache, steps, stalled, model, prompt, mask)


def llada_defect(settings: dict, attention_mask, model, prompt, mask) -> UpstreamDefect | None:
    """SQ1.9-SQ1.11: ML-GSAI/LLaDA ``generate`` (65cbed2) before its first forward (cfg without a mask) or at it
    (the hard-coded EOS / EoT ids: IndexError past the vocabulary, other tokens banned where the ids differ; cfg
    over a banned token: NaN)."""
    if settings.get("cfg_scale", 0) > 0 and attention_mask is None:
        return defect(CFG_WITHOUT_MASK, 0)
    if settings.get("cfg_scale", 0) > 0 and _bans_a_token(model, prompt, mask, settings["gen_length"]):
        return defect(CFG_NAN, 0)
    flags = [settings.get("logits_eos_inf", False), settings.get("confidence_eos_eot_inf", False)]
    needed = LLADA_8B_EOS[:1] if flags == [True, False] else LLADA_8B_EOS
    if not any(flags) or (model.special.eos_id, model.special.eot_id)[: len(needed)] == needed:
        return None
    entry = EOS_IDS_HARD_CODED if max(needed) >= model.vocab_size else (*EOS_IDS_HARD_CODED[:2], "deviates")
    return defect(entry, 0)


def _bans_a_token(model, prompt, mask, gen_length: int) -> bool:
    """Whether a full forward of the initial canvas gives some token the logit -inf (a model that bans it)."""
    canvas, full_mask = initial_canvas(model, prompt, mask, gen_length, model.special.mask_id)
    with torch.no_grad():
        return bool(torch.isneginf(model(canvas, attention_mask=full_mask).logits).any())


def fastdllm_defect(settings: dict, loop: str, cache: str, steps: list, stalled: bool, model, prompt,
                    mask) -> UpstreamDefect | None:
    """FD9: NVlabs/Fast-dLLM's loops (``loop`` current: f6b35ec; legacy: 24cc59e) with ``cache`` none, prefix or
    dual. Step j of a block is its j-th forward (0: the refresh); the quota schedule has S = steps / blocks
    entries per block."""
    batch = prompt.shape[0]
    if loop == "legacy" and batch > 1:
        return defect(JUNE_BATCH, 0)
    quota = settings.get("threshold") is None and settings.get("factor") is None
    per_block = settings["steps"] // (settings["gen_length"] // settings["block_length"])
    canvases = canvases_before(steps, model, prompt, mask, settings["gen_length"])
    in_block = 0
    for k, step in enumerate(steps):
        in_block = in_block + 1 if k and step.block == steps[k - 1].block else 0
        if cache == "dual" and batch > 1 and in_block >= 1:
            return defect(DUAL_BATCH, k)
        if quota and in_block >= per_block:
            return defect(QUOTA_EXHAUSTED, k)
        if settings.get("factor") is not None and batch > 1 and _a_row_without_candidates(
                canvases[k], step.block, cache, settings, prompt.shape[1], model.special.mask_id):
            return defect(FACTOR_ROW_DONE, k)
        if cache == "none" and batch > 1 and _a_done_row_with_leftovers(canvases[k], step.block, settings,
                                                                        prompt.shape[1], model.special.mask_id):
            return defect(LEFTOVERS_ACROSS_ROWS, k)
    deterministic = settings.get("temperature", 0) == 0 and settings.get("remasking") != "random"
    if stalled and deterministic:
        return defect(ENDLESS, _first_empty_step_of_last_block(steps))
    return None


def _a_row_without_candidates(canvas: torch.Tensor, block: int, cache: str, settings: dict, prompt_length: int,
                              mask_id: int) -> bool:
    """The official factor step's candidates: masks before the block's end (no cache), masks inside the block
    (prefix, dual); a row with none while the loop goes on (some row still decodes the block)."""
    start = prompt_length + block * settings["block_length"]
    end = start + settings["block_length"]
    masked = canvas == mask_id  # [B, L]
    candidates = masked[:, :end] if cache == "none" else masked[:, start:end]
    return bool((candidates.sum(dim=1) == 0).any() and masked[:, start:end].any())


def _a_done_row_with_leftovers(canvas: torch.Tensor, block: int, settings: dict, prompt_length: int,
                               mask_id: int) -> bool:
    """FD9.6: some row's block is complete but it holds masks before the block (the official no-cache loop keeps
    them as candidates while another row still decodes the block); ours leaves a finished row alone (P11)."""
    start = prompt_length + block * settings["block_length"]
    end = start + settings["block_length"]
    masked = canvas == mask_id  # [B, L]
    in_block = masked[:, start:end].any(dim=1)  # [B]
    done_with_leftovers = ~in_block & masked[:, :start].any(dim=1)
    return bool(done_with_leftovers.any() and in_block.any())


def _first_empty_step_of_last_block(steps: list) -> int:
    last = steps[-1].block if steps else 0
    for k, step in enumerate(steps):
        if step.block == last and not any(step.positions):
            return k
    return len(steps)


def dream_defect(settings: dict, steps: list, model, prompt, mask) -> UpstreamDefect | None:
    """SQ2.8: with a scheduled count (maskgit_plus, topk_margin, entropy; ``alg_temp`` unset) ``k`` from the mean
    masks per row (SQ2.4), the first step at which a row holds fewer than ``k`` masks."""
    from veridec.rules.dream import DreamParams, _transfer_count

    if settings.get("alg", "origin") == "origin" or settings.get("alg_temp") or "tokens_per_step" in settings:
        return None
    total = settings["max_new_tokens"]
    params = DreamParams(steps=settings["steps"], alg=settings["alg"])
    timesteps = torch.linspace(1, settings.get("eps", 1e-3), settings["steps"] + 1, device="cpu")
    for k, canvas in enumerate(canvases_before(steps, model, prompt, mask, total)):
        masked = canvas == model.special.mask_id  # [B, L]
        count = _transfer_count(masked, timesteps[k], timesteps[k + 1], k == settings["steps"] - 1, params)
        if bool((masked.sum(dim=1) < count).any()):
            return defect(ROW_CLAMP, k)
    return None


def sdar_defect(settings: dict, steps: list, prompt: torch.Tensor, mask_id: int) -> UpstreamDefect | None:
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
    length = -(-(prompt.shape[1] + params.gen_length) // b) * b
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


def canvases_before(steps: list, model, prompt: torch.Tensor, mask, gen_length: int) -> list[torch.Tensor]:
    """The canvas [B, L] (on the host) before each step: the initial canvas with every earlier step's commits."""
    canvas, _ = initial_canvas(model, prompt, mask, gen_length, model.special.mask_id)
    canvas = canvas.cpu().clone()
    found = []
    for step in steps:
        found.append(canvas.clone())
        for row, (positions, tokens) in enumerate(zip(step.positions, step.tokens)):
            canvas[row, positions] = torch.tensor(tokens, dtype=canvas.dtype, device=canvas.device)
    return found
