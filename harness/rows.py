"""The exactness table's rows, one model at a time: what every row reads (``TableInputs``), a kind of row
(``RowKind``: its label, its tier, how its two sides decode and what it compares), a row's two sides (``Sides``)
and the one builder (``build_row``). The kinds live with their decoders (``parallel_rows``, ``compiled_rows``,
``speculative_rows``, ``event_rows``, ``block_rows``); ``exactness.row_plan`` says which kinds a model's table
has. A row is a plain dict of ``exactness.Row``'s fields.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import torch

from veridec.canvas import initial_canvas
from veridec.numerics import HIGHER, tolerance
from veridec.rules.presets import PRESETS

from .workloads import run_variant, single_prompts

SEQUENTIAL = "sequential seconds"  # TableInputs.measured: the sequential reference's time on the table's prompts
PACKING = "packing tolerance"  # the measured rounding of the reference's forward (speculative, rounded event rows)


@dataclass
class TableInputs:
    """What every row of one model's table reads: the model, the table's left-padded prompts and their mask, the
    lengths, the compile backend of the compiled kinds; what is measured once for all rows (``measured``, through
    ``once``) and each decoder's eager decodes of this run (``eager``: decoder -> variant -> decode)."""

    model_name: str
    model: object
    prompt: torch.Tensor  # [B, P]
    mask: torch.Tensor  # [B, P], 0 on the left padding
    gen_length: int
    block_length: int
    compile: str | None = None
    seed: int = 0  # the table's seed (the decoders that draw seed their generators from it)
    measured: dict = field(default_factory=dict)
    eager: dict = field(default_factory=dict)

    def once(self, what: str, measure: Callable[[], object]):
        """``measure()``, on first use only: a resumed table whose rows are all recorded measures nothing."""
        if what not in self.measured:
            self.measured[what] = measure()
        return self.measured[what]

    def singles(self) -> list[torch.Tensor]:
        """The table's prompts as unpadded prompts [1, P_i]."""
        return single_prompts(self.prompt, self.mask)

    def decode(self, variant: str, rule, compile: str | None = None):
        """One decode of the table's batch by ``rule``'s ``variant`` -> (Decoded, seconds)."""
        return run_variant(self.model, variant, rule, self.prompt, self.mask, self.gen_length, self.block_length,
                           compile=compile)


class Sides(NamedTuple):
    """A row's two sides: what it holds the measured side to, what it measures, the measured side's seconds."""

    expected: object
    measured: object
    seconds: float


@dataclass(frozen=True)
class RowKind:
    """One kind of row: its label (the variant column; with the decoder, the row's records key), its tier (E: held
    to exactness, A: measured), how its two sides decode (``sides``) and what it compares (``compare``: the row's
    fields); ``settings``: the kind's own (an eager variant, a draft tree, a block length)."""

    label: str
    tier: str
    sides: Callable[[TableInputs, str, "RowKind"], Sides]
    compare: Callable[[TableInputs, str, "RowKind", Sides], dict]
    settings: dict = field(default_factory=dict)


def build_row(inputs: TableInputs, decoder: str, kind: RowKind) -> dict:
    """The row of ``decoder`` of this kind on the table's inputs: its two sides decoded, then compared."""
    return kind.compare(inputs, decoder, kind, kind.sides(inputs, decoder, kind))


def sequential_seconds(inputs: TableInputs) -> float:
    """The sequential reference's wall time on the table's prompts, measured once, after a warm-up decode."""
    def measure() -> float:
        for _ in range(2):  # the first run warms up allocations and kernels
            _, seconds = inputs.decode("reference", PRESETS["sequential"])
        return seconds

    return inputs.once(SEQUENTIAL, measure)


def packing_tolerance(inputs: TableInputs) -> float:
    """Measured rounding of R's forward: numerics.tolerance (2 x (2 x |low - high|) + one float32 ulp) of a full
    forward of the first prompt's initial canvas, against a copy of the model one precision up (``HIGHER``)."""
    def measure() -> float:
        model = inputs.model
        higher = copy.deepcopy(model).to(HIGHER[model.dtype])
        x, _ = initial_canvas(model, inputs.singles()[0], None, inputs.gen_length, model.special.mask_id)  # [1, T]
        tol = tolerance(model(x).logits, higher(x).logits)
        del higher
        return tol

    return inputs.once(PACKING, measure)
