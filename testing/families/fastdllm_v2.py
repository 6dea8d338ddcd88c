"""The Fast-dLLM v2 family (target ``fastdllm-v2``, spec/fastdllm_v2.md): the published ``generate`` of the
checkpoint's modelling and ``batch_sample`` of NVlabs/Fast-dLLM's v2/generation_functions.py, their cases, knobs and
defects (V2.11), and the target's decode: veridec's prefix-cached decoder, one step per model call."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from veridec.optimized import fastdllm_v2 as cached
from veridec.rules.fastdllm_v2 import V2Params, generated_tokens
from veridec.trace import Decoded, StepRecord

from ..official import Official, OfficialDefect, defect
from .common import KNOB_TEMPERATURES, Family, choices, kept

V2_SETTINGS = ("max_new_tokens", "block_size", "small_block_size", "threshold", "temperature", "top_p", "stop_token")
V2_STRUCTURE = ("max_new_tokens", "block_size", "small_block_size")
SHAPES = ((4, 2), (4, 4), (8, 4), (8, 2), (8, 8))  # (block_size, small_block_size) a check draws
THRESHOLDS = (0.9, 0.5, 0.2, 0.05, 1.0)
TOP_PS = (0.95, 0.8, 0.1)  # 0.1: a nucleus of one token, probability 1.0 exactly (V2.6 at threshold 1)

TOP_P_ROW_ZERO = ("V2.11.1", "temperature > 0 at batch > 1: the published top-p sampler draws for row 0 only and the "
                  "commit indexes its [1, W] draw with a [B, W] mask (IndexError, NVlabs/Fast-dLLM#64)", "raises")
ONE_BLOCK_PROMPT = ("V2.11.2", "a prompt of exactly one block (the shortest, in batch_sample) is never prefilled: the "
                    "model never sees it and the cache positions shift by a block", "deviates")
STOP_FIRST_ROW = ("V2.11.3", "generate at batch > 1: the stop check reads the first row holding the stop token and "
                  "cuts every row at its position", "deviates")
NO_BOUNDARY = ("V2.11.4", "batch_sample: a row whose prompt ends on a block boundary past the shortest prompt's block "
               "(a longer row beyond) gets no boundary token: its first generated position is decoded as a mask",
               "deviates")
PROMPT_OVERWRITTEN = ("V2.11.5", "batch_sample: where the longest prompt ends one position past a block that another "
                      "row decodes, the boundary token overwrites that prompt's last token", "deviates")
MASK_OF_32 = ("V2.11.6", "block_size not dividing 32: the decode steps build their attention mask for blocks of 32 "
              "(block_size is not passed), so a block is not bidirectional", "deviates")
BATCH_BLOCK_CACHE = ("V2.11.7", "use_block_cache at batch > 1: the refresh is decided over all rows (a row's output "
                     "depends on the others); veridec's block cache takes one row", "deviates")
UNPREFILLED_FINISH = ("V2.11.9", "batch_sample: every row stops inside block 0 (no prefill, every prompt shorter "
                      "than a block): the store forward is skipped and the cache bookkeeping takes len(None) "
                      "(TypeError); through V2.11.2, a one-block prompt whose rows all stop in their first block does "
                      "the same",
                      "raises")
BOUNDARY_STOP = ("V2.11.8", "batch_sample: a boundary token equal to the stop token is not detected; the row decodes "
                 "on (its output holds tokens after the stop unless a later committed stop ends it)", "deviates")


def v2_defect(loop: str, settings: dict, lengths: list[int], decoded=None) -> OfficialDefect | None:
    """V2.11: the first defect of the published ``loop`` ("generate" or "batch_sample") on rows of prompt lengths
    ``lengths`` with ``settings`` (the published names), from the settings alone or, for the stop defects, from
    veridec's decode of the case (``decoded``: its canvas and trace)."""
    params = V2Params(**{k: v for k, v in settings.items() if k in V2Params.__dataclass_fields__})
    b, rows = params.block_size, len(lengths)
    if rows > 1 and params.temperature > 0:
        return defect(TOP_P_ROW_ZERO, 0)
    if settings.get("use_block_cache") and rows > 1:
        return defect(BATCH_BLOCK_CACHE, 0)
    if (lengths[0] if loop == "generate" else min(lengths)) == b:
        return defect(ONE_BLOCK_PROMPT, 0)
    if 32 % b:
        return defect(MASK_OF_32, 0)
    if loop == "batch_sample":
        found = _batch_sample_layout(lengths, b)
        if found is not None:
            return found
    return None if decoded is None else _stop_defect(loop, settings, lengths, decoded)


def _batch_sample_layout(lengths: list[int], b: int) -> OfficialDefect | None:
    """V2.11.4 and V2.11.5, from the prompt lengths (batch_sample's shared canvas and its boundary bookkeeping)."""
    shortest, longest = min(lengths), max(lengths)
    if any(n % b == 0 and n > shortest and longest > n + 1 for n in lengths):
        return defect(NO_BOUNDARY, 0)
    if longest % b == 1 and longest // b - 1 >= shortest // b and shortest < longest:
        return defect(PROMPT_OVERWRITTEN, 0)
    return None


def _stop_defect(loop: str, settings: dict, lengths: list[int], decoded) -> OfficialDefect | None:
    """V2.11.3 (generate, a batch, some row stops) and V2.11.8 (batch_sample, a row stopped by its boundary token)."""
    stop, b = settings["stop_token"], settings["block_size"]
    ends = [_stop_position(decoded.canvas[row].cpu(), n, stop) for row, n in enumerate(lengths)]
    if loop == "batch_sample" and max(lengths) < b and all(end is not None and end < b for end in ends):
        return defect(UNPREFILLED_FINISH, max(_step_of(decoded.trace, row, end) for row, end in enumerate(ends)))
    for row, n in enumerate(lengths):
        tokens = generated_tokens(decoded.canvas[row].cpu(), n, stop)
        if not tokens[n:] or tokens[-1] != stop:
            continue
        at = _step_of(decoded.trace, row, len(tokens) - 1)
        if loop == "generate" and len(lengths) > 1:
            return defect(STOP_FIRST_ROW, at)
        if loop == "batch_sample" and (len(tokens) - 1) % b == 0 and len(tokens) - 1 > n - 1:
            return defect(BOUNDARY_STOP, at)
    return None


def _stop_position(row: torch.Tensor, length: int, stop: int) -> int | None:
    """Where a row's decode stopped (its first stop token after the prompt), None where it did not."""
    tokens = generated_tokens(row, length, stop)
    return len(tokens) - 1 if len(tokens) > length and tokens[-1] == stop else None


def _step_of(trace, row: int, position: int) -> int:
    """The step that committed ``position`` in ``row`` (the last step when none did)."""
    for k, step in enumerate(trace.steps):
        if position in step.positions[row]:
            return k
    return len(trace.steps)


def _defects(case, steps, stalled, model, prompt, mask):
    from veridec.trace import Trace

    lengths = [prompt.shape[1]] * prompt.shape[0] if mask is None else mask.sum(dim=1).tolist()
    trace = Trace("target", {}, prompt.shape[1], prompt.shape[0], list(steps))
    canvas = _canvas(steps, model, prompt, mask, case["settings"], lengths)
    return v2_defect("generate", case["settings"], lengths, Decoded(canvas, trace))


def _canvas(steps, model, prompt, mask, settings: dict, lengths: list[int]) -> torch.Tensor:
    """The target's canvas rebuilt from its steps (V2.3's layout): what the stop defects read."""
    from veridec.rules.fastdllm_v2 import v2_canvas

    params = V2Params(**{k: v for k, v in settings.items() if k in V2Params.__dataclass_fields__})
    x, _, _ = v2_canvas(model, prompt, mask, params, model.special.mask_id)
    x = x.cpu()
    for step in steps:
        for row, (positions, tokens) in enumerate(zip(step.positions, step.tokens)):
            x[row, positions] = torch.tensor(tokens, dtype=x.dtype, device=x.device)
    return x


GENERATE = Official("Efficient-Large-Model/Fast_dLLM_v2_7B modeling.py Fast_dLLM_QwenForCausalLM.generate", _defects)


# ------------------------------------------------------------------------------------------------ cases
@st.composite
def v2_settings(draw, names, eos_id: int | None, sampled: bool = False):
    """The settings among ``names`` (the block structure always): blocks of 4 or 8 in sub-blocks dividing them, one
    or two blocks of new tokens, thresholds across [0.05, 1], temperature 0 first (unsampled), top-p, a stop at
    the model's EOS."""
    block, small = draw(st.sampled_from(SHAPES))
    settings = {"max_new_tokens": block * draw(st.integers(1, 2)), "block_size": block, "small_block_size": small,
                "threshold": draw(st.sampled_from(THRESHOLDS)),
                "temperature": draw(st.sampled_from((0.7, 1.0) if sampled else (0.0, 0.7, 1.0))),
                "top_p": draw(st.sampled_from(TOP_PS))}
    if eos_id is not None:
        settings["stop_token"] = eos_id
    return kept(settings, names, V2_STRUCTURE)


def small_block_sizes(settings: dict) -> list[dict]:
    """``small_block_size`` changed to another divisor of the block."""
    block = settings["block_size"]
    return [{**settings, "small_block_size": s} for s in range(1, block + 1)
            if block % s == 0 and s != settings["small_block_size"]]


FAMILY = Family("fastdllm-v2", lambda names, model, defaults, sampled: v2_settings(names, model.special.eos_id,
                                                                                     sampled),
                knobs={"threshold": choices("threshold", THRESHOLDS), "small_block_size": small_block_sizes,
                       "temperature": choices("temperature", KNOB_TEMPERATURES), "top_p": choices("top_p", TOP_PS)},
                resolve=lambda case, model, prompt, mask: case)


# --------------------------------------------------------------------------------------------- the target
def v2_target(model, prompt, attention_mask, ties, **settings) -> Decoded:
    """The prefix-cached decoder (V2.10), its canvas cut after each row's stop as ``generate`` returns it (the rest
    masks), with its trace as the recording of the published calls places commits:
    one step per model call (an empty one first for the prefill); a boundary token is no commit where a later call
    shows its block (that call first shows it filled), and is placed at the first call where none does (the last
    block's, or a stop there: no call shows it masked)."""
    decoded = cached.generate(model, prompt, attention_mask, **settings)
    trace, rows, b = decoded.trace, prompt.shape[0], settings.get("block_size", 32)
    lengths = [prompt.shape[1]] * rows if attention_mask is None else attention_mask.sum(dim=1).tolist()
    shown = {step.block for step in trace.steps}  # the blocks some call showed (a step's block: the one it forwards)
    steps = [StepRecord(-1, *([[] for _ in range(rows)] for _ in range(4)), [float("inf")] * rows)] \
        if min(lengths) >= b else []
    steps += [_without_boundaries(step, b) for step in trace.steps]
    for step in trace.steps:
        for row, positions in enumerate(step.positions):
            for position, token in zip(positions, step.tokens[row]):
                if position % b == 0 and position // b not in shown:
                    _commit(steps[0], row, position, token)
    cuts = _cut_after_stops(decoded.canvas, lengths, settings.get("stop_token", model.special.eos_id),
                            model.special.mask_id)
    trace.steps = [_unseen_past_cuts(step, k, steps, cuts, b) for k, step in enumerate(steps)]
    return decoded


def _cut_after_stops(canvas, lengths: list[int], stop: int, mask_id: int) -> list:
    """V2.9 as ``generate`` returns it: a row cut after its first generated stop token, the positions past it shown
    as masks (in place, canvas [B, T]); returns each row's first masked position (None: not cut)."""
    cuts = []
    for row, length in enumerate(lengths):
        tokens = generated_tokens(canvas[row].cpu(), length, stop)
        stopped = len(tokens) > length and tokens[-1] == stop
        if stopped:
            canvas[row, len(tokens):] = mask_id
        cuts.append(len(tokens) if stopped else None)
    return cuts


def _unseen_past_cuts(step: StepRecord, index: int, steps: list, cuts: list, block_size: int) -> StepRecord:
    """Step ``index`` without its commits past a row's cut that no later call shows (the recording sees them only
    in the final canvas, masked); one a later call of its block shows stays (a commit, then a revocation)."""
    later = {other.block for other in steps[index + 1:]}
    keep = [[i for i, p in enumerate(positions) if cuts[row] is None or p < cuts[row] or p // block_size in later]
            for row, positions in enumerate(step.positions)]
    pick = lambda values: [[row[i] for i in kept] for row, kept in zip(values, keep)]  # noqa: E731
    return StepRecord(step.block, pick(step.positions), pick(step.tokens), pick(step.confidences),
                      pick(step.margins), list(step.selection_gaps))


def _commit(step: StepRecord, row: int, position: int, token: int) -> None:
    step.positions[row].append(position)
    step.tokens[row].append(token)
    step.confidences[row].append(float("nan"))
    step.margins[row].append(float("nan"))


def _without_boundaries(step: StepRecord, block_size: int) -> StepRecord:
    """A step without its boundary commits: those at a block's first position (a step never decodes one, V2.7)."""
    keep = [[i for i, p in enumerate(positions) if p % block_size] for positions in step.positions]
    pick = lambda values: [[row[i] for i in kept] for row, kept in zip(values, keep)]  # noqa: E731
    return StepRecord(step.block, pick(step.positions), pick(step.tokens), pick(step.confidences),
                      pick(step.margins), list(step.selection_gaps))
