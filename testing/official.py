"""Where the official code fails, as typed outcomes (spec/exactness.md EC6; the defects: spec/fastdllm.md FD9,
spec/sequential.md SQ1.9, SQ2.8, spec/block_diffusion.md BD7).

A target that is exact to an official loop knows where that loop raises, never ends or completes otherwise: its
``Official`` record predicts it from the case's settings and the target's own decode (its trace: which step of
which block, which positions each step committed), the first such place of one case or None. Each family's file
(``testing/families/``) defines the official loops of its targets. The predictions are held against the official
outcomes the golden data recorded (tests/test_golden_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from veridec.canvas import initial_canvas

OFFICIAL_DEFECT_MODES = ("match", "fail", "skip")  # what a check does where the official code fails (EC6)


@dataclass(frozen=True)
class OfficialDefect:
    clause: str  # the spec clause that documents it, e.g. "FD9.1"
    description: str
    kind: str  # "raises": the official run raises; "endless": it never ends; "deviates": it completes otherwise
    at_step: int  # the target's step (one model call each) at which the official run fails or deviates

    def __str__(self) -> str:
        return f"{self.clause} ({self.description})"


@dataclass(frozen=True)
class Official:
    """The official code a target is exact to: where it comes from, where it fails or deviates on a case, and,
    where veridec reproduces its deviations, what it does there.

    ``defects(case, steps, stalled, model, prompt, mask)`` is the first failure or deviation on ``case`` (None:
    none), from the target's trace ``steps`` (as far as it got; ``stalled``: its decode stopped at its step
    budget). ``run(model, prompt, attention_mask, ties, **settings)``, where given, decodes as the official code
    does, its deviations included (a candidate that deviates where it deviates must reproduce it)."""

    code: str  # the repository and commit, and the loop within it
    defects: Callable
    run: Callable | None = None


def defect(entry: tuple, at_step: int) -> OfficialDefect:
    return OfficialDefect(*entry, at_step)


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
