"""Recorded replays, logits in and decisions out (spec/engines.md EN6): a transcript's steps (each: the blocks a
step was given, the rows' prompt masks, the logits, and the decisions taken) fed again to a veridec rule or to an
engine algorithm, with no model. ``tests/golden/sglang.json`` holds SGLang's own decisions recorded this way
(``python -m tools.golden.sglang``); CI replays veridec's rules against them, and an installed sglang against
them when it imports (tests/test_engine_golden.py)."""

from __future__ import annotations

import torch

from .sglang import ReplayBatch


def _tensors(step: dict, logits_dtype: str = "float64"):
    """The step's blocks [B, b], prompt masks [B, b] and logits [B*b, V] float64 (read as ``logits_dtype``: a
    file may hold float32 values in their shortest decimal form)."""
    rows, size = len(step["rows"]), len(step["prompt_mask"][0])
    ids = torch.tensor(step["input_ids"], dtype=torch.long, device="cpu").view(rows, size)  # [B, b] host data
    logits = torch.tensor(step["logits"], dtype=getattr(torch, logits_dtype), device="cpu").double()  # [B*b, V]
    return ids, torch.tensor(step["prompt_mask"], device="cpu"), logits


def rule_decisions(rule, config: dict, mask_id: int, steps: list[dict], logits_dtype: str = "float64") -> list[dict]:
    """``rule`` (an ``EngineRule``) fed each recorded step: {"input_ids" [B*b], "done" [B]} per step; one rule
    per row, built afresh at each round, as the engine's states are."""
    decisions, rules, current = [], [], None
    for step in steps:
        if step["round"] != current:
            rules, current = [rule.rule(config, mask_id) for _ in step["rows"]], step["round"]
        ids, prompt_mask, logits = _tensors(step, logits_dtype)
        logits = logits.view(ids.shape[0], ids.shape[1], -1)  # [B, b, V]
        ruled = [rules[i].step(ids[i], prompt_mask[i], logits[i]) for i in range(ids.shape[0])]
        decisions.append({"input_ids": torch.cat([r.tokens for r in ruled]).tolist(), "done": [r.done for r in ruled]})
    return decisions


def engine_decisions(build, steps: list[dict], logits_dtype: str = "float64") -> list[dict]:
    """The algorithm ``build()`` returns, fed the recorded steps through its contract: each round starts from the
    recorded blocks; later steps continue from its own writes, with the recorded logits."""
    decisions, current, algorithm = [], None, build()
    for step in steps:
        ids, prompt_mask, logits = _tensors(step, logits_dtype)
        if step["round"] != current:
            batch = ReplayBatch(ids.flatten().clone(), prompt_mask)
            states, current = algorithm.init_step_state(batch), step["round"]
        done = algorithm.step(batch, logits, states)
        decisions.append({"input_ids": batch.input_ids.tolist(), "done": [bool(d) for d in done]})
    return decisions
