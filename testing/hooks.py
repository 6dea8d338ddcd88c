"""Dream's hook points as data (spec EC5): a case describes a tokens hook and a logits hook by what they do, and
each side of a check gets live functions that do it and log when they are called, so a candidate is held to
calling the hooks where Dream's ``diffusion_generate`` does, with the same canvas and logits.

Dream's signatures: ``generation_tokens_hook_func(step, x, logits) -> x`` (once with ``step=None, logits=None``
before the first forward, then after each step's commits), ``generation_logits_hook_func(step, x, logits) ->
logits`` (after each forward, before sampling).
"""

from __future__ import annotations

import torch

TOKENS_HOOK = "generation_tokens_hook_func"
LOGITS_HOOK = "generation_logits_hook_func"
HOOK_NAMES = (TOKENS_HOOK, LOGITS_HOOK)


class DreamHook:
    """A live hook from its description; appends ``(name, step, logits is None)`` to ``log`` on each call.

    Tokens hook ``{"step": s, "position": -k, "token": t}``: at ``step == s`` (None: the call before the first
    forward) it writes ``t`` at position ``-k`` (from the canvas end) of every row. Logits hook ``{"from_step":
    s, "token": t, "bias": b}``: from step ``s`` on it adds ``b`` to token ``t``'s logit everywhere."""

    def __init__(self, name: str, description: dict, log: list | None = None):
        if name not in HOOK_NAMES:
            raise ValueError(f"hook name must be one of {', '.join(HOOK_NAMES)}, got {name!r}")
        self.name, self.description, self.log = name, description, [] if log is None else log

    def __call__(self, step, x: torch.Tensor, logits: torch.Tensor | None):
        self.log.append((self.name, step, logits is None))
        d = self.description
        if self.name == TOKENS_HOOK:
            if step != d["step"]:
                return x
            x = x.clone()  # [B, L]
            x[:, d["position"]] = d["token"]
            return x
        if step < d["from_step"]:
            return logits
        logits = logits.clone()  # [B, L, V]
        logits[..., d["token"]] += d["bias"]
        return logits

    def __repr__(self) -> str:
        return f"DreamHook({self.name!r}, {self.description!r})"


def live_hooks(settings: dict) -> tuple[dict, list]:
    """``settings`` with each hook description replaced by a live DreamHook; the log they share."""
    log: list = []
    live = {name: DreamHook(name, value, log) if name in HOOK_NAMES and isinstance(value, dict) else value
            for name, value in settings.items()}
    return live, log
