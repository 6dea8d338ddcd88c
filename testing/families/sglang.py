"""The SGLang engine family (``veridec check --engine sglang:ALGORITHM``, spec/engines.md): the veridec rules an
engine's dLLM algorithm is held against by logit replay, the settings a case draws, and the differences SGLang
states (typed outcomes, each asserted by a test).

- ``threshold``: Fast-dLLM's threshold rule (spec/parallel.md P3; veridec.rules.parallel.Threshold): commit
  every masked position whose confidence passes ``threshold``, at least the most confident one. The official
  Fast-dLLM comparison is inclusive (``c >= threshold``); SGLang's ``LowConfidence`` is strict (``c >
  threshold``), difference ``strict-threshold``. A block is done (it may emit) once a step finds no mask in it:
  the step after its last commit, whose forward persisted the final tokens (base.py's contract).
- ``editing``: LLaDA2.1's edit rule and block loop (spec/editing.md ED4-ED5; veridec.rules.editing), greedy, one
  transfer per step at least, ``torch.topk``'s order among equal confidences (as SGLang picks its fallback). A
  block is done on the step that edits nothing while no mask is left, or on the first step after
  ``max_post_steps`` mask-free steps (ED5 stops before that step's forward; the engine has made it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from hypothesis import strategies as st

from veridec.rules.editing import EditParams, edit_step
from veridec.rules.parallel import Threshold
from veridec.rules.step import parallel_step

from .common import at_confidence

THRESHOLDS = (0.95, 0.9, 0.5, 0.2)  # SGLang LowConfidence's default first
EDIT_THRESHOLDS = (0.0, 0.5, 0.9, 1.0)  # JointThreshold's default (0) first; 1.0: no edit can pass
POST_STEPS = (16, 0, 1, 2)


class RuleStep:
    """What a veridec rule decides on one row's block at one step: the block after it [b], whether the row may
    emit, and the decision's margin (the smallest distance of a confidence from its threshold or of the
    proposal from the runner-up)."""

    def __init__(self, tokens: torch.Tensor, done: bool, margin: float = math.inf):
        self.tokens, self.done, self.margin = tokens, done, margin


class Visits:
    """A rule's visited (block, state) pairs: ``stalled`` once one comes back before the rule finished, so the rule
    would repeat its steps forever (the logits are a function of the row's canvas)."""

    def visit(self, block: torch.Tensor, state: tuple) -> None:
        key = (tuple(block.tolist()), state)
        self.stalled = getattr(self, "stalled", False) or key in getattr(self, "visited", set())
        self.visited = getattr(self, "visited", set()) | {key}


class ThresholdRule(Visits):
    """Fast-dLLM's threshold rule on one row's block (module docstring); ``inclusive``: ``c >= threshold``."""

    def __init__(self, threshold: float, mask_id: int, inclusive: bool = True):
        self.rule, self.mask_id = Threshold(threshold, inclusive=inclusive), mask_id

    def step(self, block: torch.Tensor, is_prompt: torch.Tensor, logits: torch.Tensor) -> RuleStep:
        """block [b], is_prompt [b] bool, logits [b, V] -> the rule's decision."""
        self.visit(block, ())
        candidates = (block == self.mask_id) & ~is_prompt  # [b]
        if not candidates.any():
            return RuleStep(block.clone(), True)
        result = parallel_step(self.rule, logits[None], block[None], candidates[None], temperature=0.0)
        confidence = result.view.confidence[0][candidates]  # [n] float64
        margin = (confidence - self.rule.threshold).abs().min().item()
        top2 = torch.softmax(logits.double(), dim=-1).topk(min(2, logits.shape[-1]), dim=-1).values  # [b, 2]
        if top2.shape[-1] == 2:
            margin = min(margin, (top2[:, 0] - top2[:, 1])[candidates].min().item())
        return RuleStep(result.x[0], False, margin)


class EditRule(Visits):
    """LLaDA2.1's edit rule and block loop on one row's block (module docstring), one per row and block."""

    def __init__(self, params: EditParams, mask_id: int):
        self.params, self.mask_id, self.post, self.finished = params, mask_id, 0, False

    def step(self, block: torch.Tensor, is_prompt: torch.Tensor, logits: torch.Tensor) -> RuleStep:
        self.visit(block, (self.post, self.finished))
        if self.finished:
            return RuleStep(block.clone(), True)
        self.post += not bool(((block == self.mask_id) & ~is_prompt).any())
        if self.post > self.params.max_post_steps:  # ED5: the block stops before this forward
            self.finished = True
            return RuleStep(block.clone(), True)
        decided = edit_step(logits, block, is_prompt, params=self.params, mask_id=self.mask_id)
        self.finished = not decided.had_masks and not decided.edits
        return RuleStep(decided.tokens, self.finished, decided.margin)


def threshold_rule(config: dict, mask_id: int, inclusive: bool = True) -> ThresholdRule:
    return ThresholdRule(config.get("threshold", 0.95), mask_id, inclusive)


def edit_rule(config: dict, mask_id: int) -> EditRule:
    params = EditParams(threshold=config.get("threshold", 0.5), editing_threshold=config.get("edit_threshold", 0),
                        max_post_steps=config.get("max_post_edit_steps", 16), num_to_transfer=1, ties="torch")
    return EditRule(params, mask_id)


@dataclass(frozen=True)
class Difference:
    """A difference the engine states or veridec found and documented: ``name``, ``clause`` (what the engine
    does instead of veridec's rule), ``explains(divergence)`` whether it accounts for a first divergence."""

    name: str
    clause: str
    explains: Callable


@dataclass(frozen=True)
class EngineRule:
    """A veridec rule an engine algorithm is held against: ``rule(config, mask_id)`` builds one row's rule for
    one block; ``knobs`` maps the algorithm_config keys a case draws to their strategies."""

    name: str
    rule: Callable | None
    knobs: dict
    clause: str = ""
    uniform_state: bool = False  # replayed by testing.engine_renoise (a DiffusionGemma model, canvases, streams)
    model: str = "blocks"  # the model a check runs on by default


def _strict_threshold(divergence) -> bool:
    """The rule committed a mask whose confidence equals the threshold; the engine kept it masked."""
    return any(d.reference_kind == "commit" and d.engine_kind == "kept" and d.confidence == d.threshold
               for d in divergence.positions)


def _step_cap(divergence) -> bool:
    return divergence.kind == "step cap"


def _mask_token(divergence) -> bool:
    return any(d.reference_token == divergence.mask_id for d in divergence.positions)


def _indel_token(divergence) -> bool:
    return any(d.reference_token in divergence.indel_ids for d in divergence.positions)


def _anti_loop(divergence) -> bool:
    """The row's block was seen before in this round, and the two sides differ at one position that both
    change, to different tokens (InDel resamples one write)."""
    positions = divergence.positions
    return divergence.block_seen_before and len(positions) == 1 and "kept" not in (positions[0].engine_kind,
                                                                                   positions[0].reference_kind)


def _update_cap(divergence) -> bool:
    """Past block_size + max_post_edit_steps updates, the engine commits masks the rule keeps."""
    late = divergence.step >= divergence.block_size + divergence.config.get("max_post_edit_steps", 16)
    return late and any(p.engine_kind == "commit" and p.reference_kind == "kept" for p in divergence.positions)


STRICT = Difference("strict-threshold", "SGLang commits a mask when c > threshold (strict); Fast-dLLM's official "
                    "code and veridec's default when c >= threshold", _strict_threshold)
STEP_CAP = Difference("step-cap", "SGLang's sync loop ends a block after max_steps (block_size + "
                      "max_post_edit_steps + 1; InDel + 2) steps and emits it as it is; ED5 has no such cap "
                      "(revocations can need more steps)", _step_cap)
INDEL = (Difference("indel-token", "InDel reads the DELETE / SPLIT tokens as edits of the block's structure; "
                    "veridec's rule writes them as tokens", _indel_token),
         Difference("mask-token", "InDel never writes the mask token at an original mask (the next best instead) "
                    "and scrubs it in its final cleanup; ED4 writes it (the position stays or becomes masked)",
                    _mask_token),
         Difference("anti-loop", "InDel changes the lowest-confidence write to an unseen token when the block "
                    "returns to a state seen before in this block; ED4 has no loop guard", _anti_loop),
         Difference("update-cap", "InDel commits every mask left after block_size + max_post_edit_steps updates "
                    "(final cleanup); ED5 goes on", _update_cap))

def _near_tie(divergence) -> bool:
    """The rule's decision at the diverging step is within measured rounding: an entropy margin (acceptance, stop)
    within its entropies' rounding, or the race's relative margin within its probabilities' (RenoiseDecision)."""
    return divergence.kind in ("decision", "done") and divergence.config.get("near_tie", False) is True


NEAR_TIE = Difference("near-tie", "SGLang computes entropies as -sum(p log p) and probabilities as exp(log_softmax) "
                      "in float32; transformers with Categorical and softmax: equal up to rounding, so a decision may "
                      "differ only where the rule's margin is within the measured rounding", _near_tie)
TEMPERATURE_ROUNDING = Difference(
    "temperature-rounding", "SGLang computes the schedule t_min + (t_max - t_min) * step / N in Python floats and "
    "rounds it once to float32; transformers (DG3.2) in float32 tensor arithmetic: one ulp apart at some steps, "
    "which at low temperatures moves the self-conditioning signal past rounding; explains a signal that is the "
    "soft embedding at SGLang's temperature", lambda d: d.kind == "self-conditioning" and
    d.config.get("engine_temperature", False))
THRESHOLD_KNOBS = {"threshold": st.sampled_from(THRESHOLDS) | at_confidence(1, 3)}
EDIT_KNOBS = {"threshold": st.sampled_from(THRESHOLDS[1:] + (0.95,)) | at_confidence(1, 3),
              "edit_threshold": st.sampled_from(EDIT_THRESHOLDS), "max_post_edit_steps": st.sampled_from(POST_STEPS)}

RULES = {
    "threshold": EngineRule("threshold", threshold_rule, THRESHOLD_KNOBS,
                            "Fast-dLLM's threshold rule (spec/parallel.md P3), inclusive, in SGLang's block loop"),
    "threshold-strict": EngineRule("threshold-strict", lambda config, mask_id: threshold_rule(config, mask_id,
                                                                                              False),
                                   THRESHOLD_KNOBS, "Fast-dLLM's threshold rule read strictly (c > threshold)"),
    "editing": EngineRule("editing", edit_rule, EDIT_KNOBS,
                          "LLaDA2.1's edit rule and block loop (spec/editing.md ED4-ED5), greedy"),
    "diffusiongemma": EngineRule("diffusiongemma", None, {}, "DiffusionGemma's step and stop (spec/diffusiongemma.md "
                                 "DG3-DG4) with SGLang's per-request streams (spec/engines.md EN8)",
                                 uniform_state=True, model="diffusiongemma"),
}
# SGLang's built-in algorithms: the rule each is held against and the differences it states or veridec documents
BUILT_IN = {"LowConfidence": ("threshold", (STRICT,)), "JointThreshold": ("editing", (STEP_CAP,)),
            "JointThresholdInDel": ("editing", (STEP_CAP, *INDEL)),
            "Gemma4Renoise": ("diffusiongemma", (NEAR_TIE, TEMPERATURE_ROUNDING))}
