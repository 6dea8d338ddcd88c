"""Running one side of a case: veridec's decoder on the model, or a decoder written elsewhere on the model behind
its calling convention (veridec.adapters) and a recording proxy (veridec.recording), torch's global RNG seeded
with the case's seed first. Shared by the tiers (check.py: E and A; stochastic.py: S)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from veridec.adapters import adapt
from veridec.decoding import DecodeStalled
from veridec.recording import CallLimitExceeded, ModuleRecording, RecordingModel

from .candidates import CandidateError, Fit, call_candidate, checked_tokens
from .guard import CandidateExited, CandidateTimedOut, candidate_limit, guarded
from .families.common import resolve_first_forward
from .hooks import live_hooks
from .targets import Target

CALL_SLACK = 64  # model calls a candidate may make beyond twice the target's before it counts as looping
BLOCK_CONVENTIONS = {"hf-block": "block_length", "fastdllm-v2": "block_size"}  # block calls: their block setting


@dataclass(frozen=True)
class CheckSetup:
    """What every case runner of one check shares: the candidate and how its signature fits the target, the
    model, the calling convention, the tie rule, and per tier the numeric error that excuses a tie (E, A),
    whether the candidate's logit error is measured (A), the false-alarm level of one case, the samples per
    side and the detectable TV (S)."""

    candidate: Callable
    fit: Fit
    goal: Target
    model: object
    convention: str
    ties: str = "lowest"
    numeric_error: float = 0.0
    measure_logits: bool = False
    level: float = 0.01
    samples: int | None = None
    delta: float = 0.05
    progress: bool = False
    official_defects: str = "match"  # where the official code fails: match | fail | skip (spec EC6)
    case_timeout: float | None = None  # seconds per candidate call; None: derived from the target's (spec EC8)
    candidate_model: object = None  # the user's own model the candidate runs on (spec EC9); None: ``model``
    agreement: object = None  # tier A: vLLM's token-agreement rule (``agreement.Agreement``, spec EC10) or None
    flip_budget: bool = False  # tier A on the candidate's own model: judge its decision flips (spec EC13)
    flip_rejoin: int | None = None  # the steps a position flip must rejoin within (None: before the decode ends)


@dataclass
class Side:
    """One side of a case: its canvas, trace (veridec's, or reconstructed from the recorded calls) and costs."""

    canvas: torch.Tensor | None = None
    trace: object = None
    counters: object = None
    nfe: int | None = None
    error: str | None = None
    logit_error: float | None = None  # tier A: its cached calls' largest logit error against full forwards
    stalled: bool = False  # the decode stopped at its step budget (``trace``: as far as it got)
    hook_calls: list = field(default_factory=list)  # Dream's hooks: (name, step, logits is None) per call
    seconds: float | None = None  # the target's wall-clock time on the case
    timed_out: bool = False  # the candidate ran past its time limit (its failure is not shrunk)
    drift: list | None = None  # tier A on its own model (spec EC9): per full call, its logits' drift from veridec's


def case_tensors(case: dict, model) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A case's prompt [B, P] and attention mask [B, P] (or None) as tensors on the model's device."""
    prompt = torch.tensor(case["prompt"], dtype=torch.long, device=model.device)  # [B, P]
    mask = None if case["attention_mask"] is None else torch.tensor(case["attention_mask"], device=model.device)
    return prompt, mask


def resolve_case(case: dict, model, prompt: torch.Tensor, mask: torch.Tensor | None,
                 goal: Target | None = None) -> dict:
    """The case with its ``{"at_confidence": r}`` thresholds replaced by the confidences they name, as the target's
    family resolves them (``Family.resolve``; without a target, the first forward's: spec FD2). ``prompt`` [B, P]
    and ``mask`` are the case's, as tensors."""
    resolve = resolve_first_forward if goal is None else goal.family.resolve
    return resolve(case, model, prompt, mask)


def run_target(setup: CheckSetup, prompt, mask, case) -> Side:
    """The target on ``case`` (torch's global RNG seeded with its seed first)."""
    goal = setup.goal
    torch.manual_seed(case["seed"])
    started = time.perf_counter()
    try:
        if not goal.veridec:
            side = run_foreign(goal.decode, goal.fit, goal, RecordingModel(setup.model), prompt, mask, case,
                               setup.convention)
        else:
            settings, hook_calls = live_hooks(goal.settings_of(case))
            decoded = goal.decode(setup.model, prompt, mask, setup.ties, **settings)
            side = Side(decoded.canvas, decoded.trace, decoded.trace.counters, hook_calls=hook_calls)
        side.seconds = time.perf_counter() - started
        return side
    except DecodeStalled as err:  # the model proposes the mask token where nothing else commits
        return Side(trace=err.trace, error=f"RuntimeError: {err}", stalled=True)
    except (ValueError, RuntimeError) as err:  # invalid settings for it
        return Side(error=f"{type(err).__name__}: {err}")


def run_candidate(setup: CheckSetup, prompt, mask, case, limit: int, measure_logits: bool = False,
                  target_seconds: float | None = None) -> Side:
    """The candidate on ``case`` behind its convention and a recording stopped past ``limit`` calls, within its
    time limit (``guard.candidate_limit``) and unable to end the process; any failure of foreign code is its
    Side's ``error``. A family that runs its candidates its own way (``Family.candidate_side``) runs it so."""
    if setup.goal.family.candidate_side is not None:
        return setup.goal.family.candidate_side(setup, prompt, mask, case, limit, target_seconds)
    own = setup.candidate_model is not None
    recording = ModuleRecording(setup.candidate_model, limit=limit, keep_logits=measure_logits) if own else \
        RecordingModel(setup.model, limit=limit, keep_logits=measure_logits)
    seconds = candidate_limit(setup.case_timeout, target_seconds)
    torch.manual_seed(case["seed"])
    try:
        with guarded(seconds, f"the case {json.dumps(case)}"):
            side = run_own(setup, recording, prompt, mask, case) if own else \
                run_foreign(setup.candidate, setup.fit, setup.goal, recording, prompt, mask, case, setup.convention)
        if measure_logits and own:  # what a cache inside the user's model changed, call by call
            side.drift = recording.drift(adapt(setup.model, setup.convention))
            side.logit_error = max(side.drift, default=None)
        elif measure_logits and setup.convention in BLOCK_CONVENTIONS and side.canvas is not None:
            block = case["settings"][BLOCK_CONVENTIONS[setup.convention]]
            side.logit_error = max(recording.block_logit_errors(side.canvas, block, mask), default=None)
        elif measure_logits and side.trace is not None:  # the trace places the commits the errors need
            side.logit_error = max(recording.logit_errors(side.canvas, prompt.shape[1], mask), default=None)
        return side
    except CallLimitExceeded:
        return Side(counters=recording.counters(), error=f"it made more than {limit} model calls (stopped there)")
    except CandidateError as err:
        return Side(counters=recording.counters(), error=str(err))
    except CandidateTimedOut:
        why = "--case-timeout" if setup.case_timeout is not None else (
            "20x the target's time on it + 10 s" if target_seconds is not None else "the default for untimed cases")
        return Side(counters=recording.counters(), timed_out=True,
                    error=f"it ran past its time limit of {seconds:.3g} s on this case ({why}; it made "
                          f"{recording.counters().model_calls} model calls)")
    except CandidateExited as err:
        return Side(counters=recording.counters(), error=f"it called {err}: a candidate may not end the check")
    except (SystemExit, KeyboardInterrupt) as err:  # foreign code may not end the check: a finding, reported
        return Side(counters=recording.counters(), error=f"it raised {type(err).__name__}({err}): a candidate may "
                                                         "not end the check")
    except Exception as err:  # noqa: BLE001 - any failure of foreign code is a finding, reported as such
        return Side(counters=recording.counters(), error=f"it raised {type(err).__name__}: {err}")
    except BaseException as err:  # noqa: BLE001 - GeneratorExit, its own BaseException: a finding too
        return Side(counters=recording.counters(), error=f"it raised {type(err).__name__}({err})")


def run_foreign(decoder, fit, goal, recording: RecordingModel, prompt, mask, case, convention) -> Side:
    """A decoder written elsewhere, on the recorded model behind ``convention``."""
    return _run_recorded(decoder, fit, goal, recording, adapt(recording, convention), recording.model, prompt, mask,
                         case)


def run_own(setup: CheckSetup, recording: ModuleRecording, prompt, mask, case) -> Side:
    """The candidate on the user's own model (spec EC9), recorded at its top-level forward; the mask id and the
    settings are veridec's model's, as for the target."""
    with recording:
        return _run_recorded(setup.candidate, setup.fit, setup.goal, recording, recording.model, setup.model,
                             prompt, mask, case)


def _run_recorded(decoder, fit, goal, recording, served, model, prompt, mask, case) -> Side:
    """``decoder`` given ``served`` (what it calls), its calls logged by ``recording``; ``model``: veridec's."""
    settings, hook_calls = live_hooks(goal.settings_of(case))
    tokens, nfe = call_candidate(decoder, fit, served, prompt, mask, settings, goal.mask_name, model.special.mask_id)
    tokens = checked_tokens(tokens, model.vocab_size, prompt.device)
    trace = _recorded_trace(recording, tokens, prompt.shape[1], model)
    counters = recording.counters() if trace is None else trace.counters  # the trace's counts its revocations
    return Side(tokens, trace, counters, nfe, hook_calls=hook_calls)


def _recorded_trace(recording: RecordingModel, tokens, prompt_length: int, model):
    try:
        return recording.trace(tokens, prompt_length, model.special.mask_id)
    except (ValueError, RuntimeError):  # drafts or stacked calls: no commit order to reconstruct
        return None


def drawn_canvas(side: Side, like: torch.Tensor, prompt_length: int) -> tuple[torch.Tensor | None, str | None]:
    """A candidate's draw as the whole canvas shaped ``like`` [B, P + G] (``full_canvas``), or None and why it
    has none (its error, or the shape it returned)."""
    canvas = None if side.error is not None else full_canvas(side.canvas, like, prompt_length)
    if canvas is None:
        return None, side.error or f"it returned shape {tuple(side.canvas.shape)}"
    return canvas, None


def full_canvas(tokens: torch.Tensor, canvas: torch.Tensor, prompt_length: int) -> torch.Tensor | None:
    """The candidate's output as the whole canvas [B, P + G]: the whole canvas, or the generation alone [B, G];
    any other width (an output cut at EOS, say) is None (positions could not be matched)."""
    if tokens.shape == canvas.shape:
        return tokens
    if tokens.shape[0] == canvas.shape[0] and tokens.shape[1] == canvas.shape[1] - prompt_length:
        return torch.cat([canvas[:, :prompt_length].to(tokens.device), tokens], dim=1)
    return None
