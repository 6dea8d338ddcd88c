"""Argument checks and bookkeeping every block decoder shares (reference and optimized alike)."""

from __future__ import annotations

import inspect
from dataclasses import asdict

import torch

from .checks import check_choice, check_range
from .rules.common import REMASKING, TIES, check_blocks
from .trace import Progress


def check_decode_args(gen_length, block_length, temperature, remasking, ties) -> None:
    check_blocks(gen_length, block_length, 1, steps_split=False)
    check_sampling(temperature, remasking, ties)


def check_sampling(temperature, remasking, ties) -> None:
    check_range("temperature", temperature, low=0)
    check_choice("remasking", remasking, REMASKING)
    check_choice("ties", ties, TIES)


def decode_params(rule, gen_length, block_length, temperature, remasking, mask_id) -> dict:
    return {"rule": rule.name, **asdict(rule), "gen_length": gen_length, "block_length": block_length,
            "temperature": temperature, "remasking": remasking, "mask_id": mask_id}


SAMPLED_PATIENCE = 64  # steps a sampled decode may spend per committable mask (spec/parallel.md P11)


def step_budget(candidates: torch.Tensor, rule, sampled: bool = False) -> int:
    """Steps a block may take: one per mask it starts with (prompt masks before it included, [B, L] bool
    ``candidates``), plus a quota schedule's possibly empty steps. A deterministic decode that exceeds it
    repeats itself forever (the top-ranked candidate proposes the mask token); a ``sampled`` one (temperature
    > 0 or random remasking) may draw the mask token and commit nothing while a later draw moves on, so it gets
    ``SAMPLED_PATIENCE`` times as many steps."""
    budget = int(candidates.sum(dim=1).max()) + getattr(rule, "steps_per_block", 0)
    return budget * SAMPLED_PATIENCE if sampled else budget


class DecodeStalled(RuntimeError):
    """A block stopped progressing: its decode would repeat itself (or, sampled, wander) past its step budget.
    ``trace``: the decode's trace as far as it got."""

    def __init__(self, message: str, trace=None):
        super().__init__(message)
        self.trace = trace


def check_progress(step: int, block: int, budget: int, trace=None) -> None:
    """Every rule commits a candidate per step unless the model proposes the mask token itself."""
    if step > budget:
        raise DecodeStalled(f"block {block} stalled after {step} steps: the model predicts the mask token", trace)


def check_rule(rule) -> None:
    """A decoding rule object, not its name or None (spec P1)."""
    if isinstance(rule, type) or not hasattr(rule, "name") or not (hasattr(rule, "counts") or hasattr(rule, "select")):
        raise ValueError(f"rule must be a decoding rule (TopK, Threshold, Factor, Quota, LocalLeap, EntropyBounded, "
                         f"KLASS, DAPD from veridec.rules.parallel, or veridec.rules.presets.preset(name)), got "
                         f"{rule!r}")


def check_model_supports(model, rule, cache: str = "none") -> None:
    """Clear errors for pairings the model cannot serve: attention for DAPD, a K/V cache for caches."""
    check_rule(rule)
    if getattr(rule, "needs_attention", False) and "output_attentions" not in _parameters(model):
        raise ValueError(f"rule {rule.name!r} needs attention weights; {type(model).__name__} does not return "
                         "them (use a transformer model)")
    if cache != "none" and not hasattr(model, "forward_cached"):
        raise ValueError(f"cache={cache!r} needs a model with a K/V cache API; {type(model).__name__} has none "
                         "(use cache='none')")


def check_block_rule(rule) -> None:
    """BD11: a parallel rule that needs no attention weights (block forwards return none)."""
    check_rule(rule)
    if getattr(rule, "needs_attention", False):
        raise ValueError(f"rule {rule.name!r} reads attention weights, which block-diffusion forwards do not return; "
                         "use a rule without them (sequential, conf, fastdllm, factor, klass, eb, localleap)")


def _parameters(model):
    return inspect.signature(getattr(model, "forward", model.__call__)).parameters


def has_llada_layout(model) -> bool:
    """A transformer with the LLaDA layout (logit shift 0) whose forward takes RoPE positions and an attention
    bias (``raw_forward``): what WINO, the editing sampler and their calling convention need."""
    return hasattr(model, "raw_forward") and getattr(model, "logit_shift", None) == 0


def is_block_model(model) -> bool:
    """A block-diffusion model (the SDAR layout, spec/block_diffusion.md BD1): its attention is block-causal, so
    it is decoded block by block (BD2-BD11), never as a bidirectional canvas."""
    return getattr(model, "layout", None) == "sdar"


def check_llada_layout(model, decoder: str = "WINO") -> None:
    """spec/wino.md WN1, spec/editing.md ED1: refuse a model without ``has_llada_layout``, naming it."""
    if not has_llada_layout(model):
        raise ValueError(f"{decoder} needs a transformer with the LLaDA layout (raw_forward, logit_shift 0); "
                         f"{type(model).__name__} is not one")


class NonFiniteLogits(ValueError):
    """The logits a decoding step acts on hold NaN or +inf, or a position bans every token (all -inf): a broken
    model, or a guidance that diverged."""


def check_logits(logits: torch.Tensor, progress: Progress, offset: int = 0, what: str = "the model's logits",
                 where: torch.Tensor | None = None) -> None:
    """Refuse NaN anywhere, +inf, or a position whose logits are all -inf in ``logits`` [B, W, V] (or [B, V]) a
    step acts on, naming the step and the model call (``progress``: a trace's ``Trace.progress``), the row, the
    canvas position (and the token); -inf stays
    allowed per token (it bans that token). ``where`` [B, W] (or [B]) bool: only those positions are checked
    (a parallel step's candidates, spec SQ0.6); every position when None. Two comparisons and two reductions
    on the device, and one host synchronisation, per step."""
    bad = ~(logits < torch.inf)  # NaN and +inf; -inf and finite values compare below +inf
    banned = ~(logits > -torch.inf).any(dim=-1)  # [B, W] (or [B]): no token left to draw
    if where is not None:
        bad, banned = bad & where[..., None], banned & where
    if not (bad.any() | banned.any()):  # both flags in one read from the device
        return
    when = f"at step {progress.steps} (after model call {progress.model_calls})"
    if bad.any():
        index = bad.nonzero()[0].tolist()
        value = logits[tuple(index)].item()
        place = _row_position(index[:-1], offset) + f", token {index[-1]}"
        raise NonFiniteLogits(f"{what} {when} are {value} at {place}: a decoder refuses NaN and +inf logits "
                              "(-inf bans a token)")
    if banned.any():
        place = _row_position(banned.nonzero()[0].tolist(), offset)
        raise NonFiniteLogits(f"{what} {when} are -inf for every token at {place}: the softmax there is NaN, so a "
                              "decoder refuses a position with no finite logit (-inf may ban some tokens, not all)")


def check_step_logits(logits: torch.Tensor, token_probs: torch.Tensor, candidates: torch.Tensor, progress: Progress,
                      offset: int = 0, what: str = "the model's logits") -> None:
    """``check_logits(logits, ..., where=candidates)`` fused into the step's own float64 softmax: the
    probabilities p(x̂) [B, W] a parallel step computed from ``logits`` are NaN exactly where a position's logits
    hold NaN or +inf or are all -inf (the softmax of such a row is NaN throughout), so one comparison and one
    reduction over [B, W] and one host read replace two passes over [B, W, V]. On a refusal ``check_logits``
    names the step, call, row, position and token."""
    if not bool((token_probs.isnan() & candidates).any()):
        return
    check_logits(logits, progress, offset, what, where=candidates)
    raise NonFiniteLogits(f"{what} at step {progress.steps} give a NaN probability at a candidate")


def _row_position(index: list[int], offset: int) -> str:
    """'row r' or 'row r, position p' for an index [row] or [row, window column] (the column counted from offset)."""
    return f"row {index[0]}" + (f", position {offset + index[1]}" if len(index) == 2 else "")
