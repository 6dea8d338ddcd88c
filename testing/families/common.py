"""What the checker's decoder families share: the ``Family`` record, the prompt strategy, thresholds drawn at a
confidence, the first forward's threshold resolution (spec/fastdllm.md FD2), and knob helpers (spec EC7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from hypothesis import strategies as st

from veridec.canvas import initial_canvas
from veridec.events import event_trace
from veridec.trace import Decoded

from ..flips import FlipScore

TEMPERATURES = (0.0, 0.7, 1.0)  # drawn temperatures, the simplest first (sampled draws skip the first)
KNOB_TEMPERATURES = (0.0, 0.7)  # the temperatures a knob search tries
MAX_PROMPT = 6
STRUCTURE = ("gen_length", "block_length", "steps")  # the target always gets these (the candidate if it names them)


def resolve_first_forward(case: dict, model, prompt: torch.Tensor, mask: torch.Tensor | None) -> dict:
    """The case with a ``{"at_confidence": r}`` threshold replaced by that confidence (spec FD2): the
    max-probability ranked r (0 = the highest, which commits anyway; so r >= 1) among row 0's masked positions
    before the first block's end, from a full forward of the initial canvas, in float64 (the last rank when
    fewer). ``prompt`` [B, P] and ``mask`` are the case's, as tensors."""
    settings = case["settings"]
    threshold = settings.get("threshold")
    if not isinstance(threshold, dict):
        return case
    canvas, full_mask = initial_canvas(model, prompt, mask, settings["gen_length"], model.special.mask_id)
    with torch.no_grad():
        logits = model(canvas, attention_mask=full_mask).logits[0]  # [L, V] row 0
    end = prompt.shape[1] + settings["block_length"]
    candidates = (canvas[0, :end] == model.special.mask_id).nonzero().flatten()
    confidence = torch.softmax(logits[candidates].double(), dim=-1).max(dim=-1).values.sort(descending=True).values
    rank = min(threshold["at_confidence"], confidence.numel() - 1)
    return {**case, "settings": {**settings, "threshold": confidence[rank].item()}}


def greedy_probability(settings: dict) -> FlipScore | str:
    """What a greedy block decoder ranks and compares (spec EC13): p(x̂), against ``threshold`` where one is set;
    why not, where its decisions are no function of the logits alone or the trace lacks their margin."""
    if (settings.get("temperature") or 0) > 0:
        return "sampled (temperature > 0): its decisions are draws"
    if settings.get("remasking") == "random":
        return "random remasking ranks positions by draws"
    if settings.get("factor") is not None:
        return "Fast-dLLM's factor rule: its margin is not in the trace"
    if settings.get("cfg_scale"):
        return "classifier-free guidance: its logits combine two forwards"
    threshold = settings.get("threshold")
    return FlipScore("probability", threshold if isinstance(threshold, (int, float)) else None)


@dataclass(frozen=True)
class Reading:
    """An alternative reading of a target's rule: ``name`` and ``clause`` say what it does, ``instead`` what the
    target does; ``ties`` the tie rule it decodes with (None: the check's), ``settings`` what it adds to the
    case's settings, ``decode`` (where given) the decode to run instead of the target's, ``applies(settings)``
    whether the reading can differ on a case with these settings."""

    name: str
    clause: str
    instead: str
    ties: str | None = None
    settings: dict = field(default_factory=dict)
    decode: Callable | None = None
    applies: Callable = lambda settings: True


@dataclass(frozen=True)
class Family:
    """A decoder family the checker knows: how its cases are drawn and resolved, and which knobs it searches.

    ``settings(names, model, defaults, sampled)`` is a strategy of the settings among ``names`` (those both sides
    take; ``defaults``: the candidate's defaults; ``sampled``: temperatures > 0 only, tier S). ``resolve(case,
    model, prompt, mask)`` replaces the case's ``{"at_confidence": r}`` thresholds by numbers before it runs.
    ``knobs`` maps each knob searched (spec EC7), in the order the report lists them, to the variants of a case's
    settings with another value of it (the rest kept valid). ``infill``: prompts may hold a mask, decoded with the
    first block (SQ1.2). ``readings``: documented alternative readings of its rules, which a failure's report
    names where the candidate follows one (``testing.explain``; the other tie order is every family's);
    ``details(setup, outcome)``: lines on the decision quantities of its rules at a failure's first divergence.
    ``prompts(model, max_batch, padding, infill)``: its prompt strategy where the common one does not fit (no mask
    token: uniform-state canvases); ``runners``: its own case runner per tier letter where the recording proxy does
    not apply (``(setup, case) -> outcome``), and ``candidate_side(setup, prompt, mask, case, limit, seconds)``
    its candidate's run (the knob search's); ``tiers``: the tiers it offers. ``flip_score(settings)``: what a case's
    rule ranks and compares, for tier A's decision-flip budget (a ``FlipScore``, or why its flips are not judged;
    spec EC13)."""

    name: str
    settings: Callable
    knobs: dict = field(default_factory=dict)
    resolve: Callable = resolve_first_forward
    infill: bool = False
    readings: tuple = ()
    details: Callable | None = None
    prompts: Callable | None = None
    runners: dict = field(default_factory=dict)
    candidate_side: Callable | None = None
    tiers: tuple = ("E", "A", "S")
    flip_score: Callable = greedy_probability


def ordinary_tokens(model) -> list[int]:
    """Token ids a prompt may hold: below 96 (text in the tiny tokenizers) and not special."""
    special = {getattr(model.special, name) for name in ("mask_id", "eos_id", "eot_id", "pad_id")}
    return [i for i in range(min(model.vocab_size, 96)) if i not in special]


@st.composite
def prompts(draw, model, max_batch: int = 3, padding: bool = True, infill: bool = False):
    """(prompt [B][P], attention_mask [B][P] or None): left-padded rows of 1..6 real tokens."""
    tokens = ordinary_tokens(model)
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, MAX_PROMPT))
    rows = [draw(st.lists(st.sampled_from(tokens), min_size=length, max_size=length)) for _ in range(batch)]
    mask = None
    if padding and batch > 1 and draw(st.booleans()):
        real = [draw(st.integers(1, length)) for _ in range(batch)]
        mask = [[0] * (length - n) + [1] * n for n in real]
        rows = [[model.special.pad_id] * (length - n) + row[length - n:] for row, n in zip(rows, real)]
    if infill and length >= 2 and draw(st.booleans()):
        rows[0][-1] = model.special.mask_id  # a prompt mask: decoded with the first block (spec SQ1.2)
    return rows, mask


def at_confidence(low: int, high: int):
    """A threshold drawn as ``{"at_confidence": r}``, r in [low, high]: resolved to a confidence of the decode."""
    return st.builds(lambda r: {"at_confidence": r}, st.integers(low, high))


def temperatures(sampled: bool, options: tuple = TEMPERATURES):
    """One of ``options``, the first (0: greedy) left out when ``sampled``."""
    return st.sampled_from(options[1:] if sampled else options)


def kept(settings: dict, names, structure) -> dict:
    """The drawn ``settings`` the candidate names (``names``), and the ``structure`` the target always gets."""
    return {name: value for name, value in settings.items() if name in names or name in structure}


def choices(name: str, options) -> Callable:
    """A knob over fixed ``options``: the case with each other option of ``name``."""
    return lambda settings: [{**settings, name: value} for value in options if value != settings.get(name)]


def divisor_block_lengths(settings: dict) -> list[dict]:
    """``block_length`` changed to another divisor of the gen length, the steps per block kept where they fit
    (where there is a schedule)."""
    gen, block = settings["gen_length"], settings["block_length"]
    blocks = [b for b in range(1, gen + 1) if gen % b == 0 and b != block]
    if "steps" not in settings:  # WINO: no schedule
        return [{**settings, "block_length": b} for b in blocks]
    per_block = settings["steps"] // (gen // block)
    return [{**settings, "block_length": b, "steps": (gen // b) * min(per_block, b)} for b in blocks]


KNOB_THRESHOLDS = (None, 0.9, 0.5, 0.2, 0.05)  # a threshold knob's values (quota mode first, where it applies)
KNOB_TOP_K = (0, 3)  # top-k's values (0: off, SDAR's spelling; a decoder that refuses 0 skips it)
KNOB_TOP_P = (1.0, 0.9)


def with_events(generate, name: str, refusal: str):
    """A revocable decoder (WINO, the editing sampler) as a target returning a Decoded whose trace holds its
    events; it takes no padding (``refusal`` says why)."""
    def decode(model, prompt, attention_mask, ties, **settings):
        if attention_mask is not None:
            raise ValueError(f"attention_mask: {refusal}")
        decoded = generate(model, prompt, ties=ties, **settings)
        params = {**settings, "mask_id": model.special.mask_id}
        return Decoded(decoded.canvas, event_trace(decoded, name, params, prompt.shape[1]))
    return decode
