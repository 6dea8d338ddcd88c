"""A candidate that replays a golden recording: what the official code did on one case, as a decoder ``veridec
check`` can hold against its target (tests/test_golden_check.py). Data only: it makes the model calls the official
run made (the recorded canvas of each call, in the official calling convention: full calls, and for Fast-dLLM's
caches the refresh and cached calls its loop makes), then returns the official output, raises the official error
after its recorded calls, or, where the official run never ended (``capped``), goes on calling until the check
stops it. The model's logits are never read: the outcome is the recording's."""

from __future__ import annotations

import torch

from .replay import case_inputs

ERRORS = {"IndexError": IndexError, "RuntimeError": RuntimeError, "UnboundLocalError": UnboundLocalError}


class OfficialCall:
    """The calls of one official decode over the canvas ``x`` [B, L] (the recorded canvases, one call each)."""

    def __init__(self, model, case: dict, x: torch.Tensor):
        self.model, self.case, self.x = model, case, x
        self.loop, self.cache = (case["variant"].split("/") if case["sampler"] == "fastdllm" else ("", "none"))
        self.block, self.in_block, self.kv = 0, 0, None

    def span(self) -> tuple[int, int]:
        settings, prompt_length = self.case["settings"], len(self.case["prompt"][0])
        start = prompt_length + self.block * settings["block_length"]
        return start, start + settings["block_length"]

    def call(self, attention_mask) -> None:
        """The next official call on the current canvas."""
        if self.case["sampler"] == "dream":
            self.model(self.x, "full", None)
        elif self.case["sampler"] == "llada":
            self.model(self._with_unconditional(), attention_mask=self._doubled(attention_mask))
        elif self.cache == "none":
            self.model(self.x)
        elif self.in_block == 0:
            self._refresh()
        else:
            self._cached()
        self.in_block += 1

    def _with_unconditional(self) -> torch.Tensor:
        """LLaDA with cfg_scale > 0 runs the canvas and its unconditional copy (prompt masked) as one batch."""
        if self.case["settings"].get("cfg_scale", 0) <= 0:
            return self.x
        unconditional = self.x.clone()
        unconditional[:, : len(self.case["prompt"][0])] = self.case["settings"]["mask_id"]
        return torch.cat([self.x, unconditional])

    def _doubled(self, attention_mask):
        """The prompt's mask extended over the generation with ones, twice under cfg (as the official code)."""
        if attention_mask is None:
            return None
        generated = torch.ones(attention_mask.shape[0], self.x.shape[1] - attention_mask.shape[1],
                               dtype=attention_mask.dtype)
        attention_mask = torch.cat([attention_mask, generated], dim=1)
        return attention_mask if self.case["settings"].get("cfg_scale", 0) <= 0 else \
            torch.cat([attention_mask, attention_mask])

    def _refresh(self) -> None:
        out = self.model(self.x, use_cache=True)
        start, _ = self.span()
        self.kv = out.past_key_values if self.cache == "dual" else \
            [tuple(t[:, :, :start] for t in layer) for layer in out.past_key_values]

    def _cached(self) -> None:
        start, end = self.span()
        if self.cache == "prefix":
            self.model(self.x[:, start:], past_key_values=self.kv, use_cache=True)
            return
        replace = torch.zeros_like(self.x, dtype=torch.bool)
        replace[:, start:end] = True
        self.model(self.x[:, start:end], past_key_values=self.kv, use_cache=True, replace_position=replace)

    def commit(self, triples: list) -> None:
        """Apply one call's recorded commits, then move to the next block where the official loop does: the
        current loop tests "block done?" before each cached call; the June 2025 loop always makes one cached
        call after the refresh and tests after each."""
        for row, position, token in triples:
            self.x[row, position] = token
        if self.case["sampler"] != "fastdllm" or self.cache == "none":
            return  # every call is a full forward
        start, end = self.span()
        done = not (self.x[:, start:end] == self._mask_id()).any()
        if done and not (self.loop == "legacy" and self.in_block == 1):
            self.block, self.in_block = self.block + 1, 0

    def _mask_id(self) -> int:
        settings = self.case["settings"]
        return settings.get("mask_id", settings.get("mask_token_id"))


def replay_candidate(case: dict):
    """``candidate(model, prompt, **settings)`` replaying the official run of ``case`` (the model: behind the
    official convention of the case's sampler)."""
    official = case["official"]

    def candidate(model, prompt, attention_mask=None, **settings):
        calls = OfficialCall(model, case, _initial_canvas(case))
        for index in range(official["forwards"]):
            calls.call(attention_mask)
            if index < len(official["steps"]):
                calls.commit(official["steps"][index])
        if official["status"] == "capped":
            while True:  # the official loop repeats the same call forever; the check's call limit stops it
                calls.call(attention_mask)
        if official["status"] == "error":
            name, _, message = official["error"].partition(": ")
            raise ERRORS.get(name, RuntimeError)(f"(replayed) {message}")
        canvas = torch.tensor(official["canvas"], dtype=torch.long)
        return (canvas, official["nfe"]) if case["sampler"] == "fastdllm" else canvas

    candidate.__qualname__ = f"replay[{case['id']}]"
    return candidate


def _initial_canvas(case: dict) -> torch.Tensor:
    """The official canvas before the first call: the prompt (pads included) followed by masks."""
    prompt, _ = case_inputs(case)
    settings = case["settings"]
    generated = settings.get("gen_length", settings.get("max_new_tokens"))
    mask_id = settings.get("mask_id", settings.get("mask_token_id"))
    return torch.cat([prompt, torch.full((prompt.shape[0], generated), mask_id, dtype=torch.long)], dim=1)
