"""Verify checks for the model layer and the oracles (spec/models.md). Margins: the share of the measured
tolerance left unused, 1 - error / tolerance (1 = exact, below 0 = failed)."""

from __future__ import annotations

import torch

from veridec.numerics import max_abs, tolerance
from veridec.oracles import HMMOracle

from .registry import VerifyContext, check

SLACK = "1 - err/tol"


def _canvas(model, batch: int, length: int, g: torch.Generator, mask_rate: float = 0.5) -> torch.Tensor:
    """A random canvas drawn on the host (the same cases on every device), on the model's device."""
    x = torch.randint(0, model.special.mask_id, (batch, length), generator=g, device="cpu")
    x = x.masked_fill(torch.rand(x.shape, generator=g, device="cpu") < mask_rate, model.special.mask_id)
    return x.to(model.device)


def _lengths(ctx: VerifyContext, g: torch.Generator, cases: int) -> list[int]:
    top = min(64, ctx.model.max_length)
    return torch.randint(2, top + 1, (cases,), generator=g, device="cpu").tolist()


def _slack(err: float, tol: float) -> float:
    return 1 - err / tol


@torch.no_grad()
def _measured_slack(ctx: VerifyContext, compute) -> float:
    """compute(model) -> (reference, candidate) tensors; the candidate's error against the reference in the
    model's dtype, as a share of the tolerance measured from the reference's error one precision up."""
    (reference, got), (higher, _) = compute(ctx.model), compute(ctx.higher)
    return _slack(max_abs(got, reference), tolerance(reference, higher))


@check("model/cache-subset", "MC2: queries at a random subset against a freshly filled cache = full forward")
def cache_subset(ctx: VerifyContext):
    g, slacks = ctx.generator(1), []
    for length in _lengths(ctx, g, 4 if ctx.quick else 12):
        x = _canvas(ctx.model, 2, length, g)
        positions = torch.stack([torch.randperm(length, generator=g, device="cpu")[: max(1, length // 3)]
                                 for _ in range(2)]).to(x.device)

        def compute(model):
            _, cache = model.prefill(x)
            full = model.raw_forward(x, torch.arange(length, device=x.device).expand_as(x)).logits
            cached = model.forward_cached(x.gather(1, positions), positions, cache).logits
            return full.gather(1, positions[..., None].expand_as(cached)), cached

        slacks.append(_measured_slack(ctx, compute))
    return len(slacks), min(slacks) >= 0, min(slacks), SLACK, ""


@check("model/cache-recompute",
       "MC3: recomputing every position through a stale cache = full forward of the new canvas")
def cache_recompute(ctx: VerifyContext):
    g, slacks = ctx.generator(2), []
    for length in _lengths(ctx, g, 3 if ctx.quick else 8):
        x, y = _canvas(ctx.model, 2, length, g), _canvas(ctx.model, 2, length, g)
        positions = torch.arange(length, device=x.device).expand(2, -1)

        def compute(model):
            _, cache = model.prefill(x)
            return model.raw_forward(y, positions).logits, model.forward_cached(y, positions, cache).logits

        slacks.append(_measured_slack(ctx, compute))
    return len(slacks), min(slacks) >= 0, min(slacks), SLACK, ""


@check("model/padding", "M2: a left-padded batch = each row run alone")
def padding(ctx: VerifyContext):
    g, slacks = ctx.generator(3), []
    for length in _lengths(ctx, g, 3 if ctx.quick else 8):
        rows = [_canvas(ctx.model, 1, n, g)[0] for n in (length, max(1, length // 2), 1)]
        x = torch.full((3, length), ctx.model.special.pad_id or 0, dtype=torch.long, device=ctx.model.device)
        mask = torch.zeros(3, length, dtype=torch.long, device=ctx.model.device)
        for i, row in enumerate(rows):
            x[i, length - len(row):], mask[i, length - len(row):] = row, 1
        with torch.no_grad():
            batch, higher = ctx.model(x, mask).logits, ctx.higher(x, mask).logits
            for i, row in enumerate(rows):
                alone = ctx.model(row[None]).logits[0]
                real = slice(length - len(row), length)
                slacks.append(_slack(max_abs(batch[i, real], alone), tolerance(batch[i, real], higher[i, real])))
    return len(slacks), min(slacks) >= 0, min(slacks), SLACK, ""


@check("oracle/hmm-conditionals", "M9: HMM forward-backward conditionals = enumeration of the joint (float64)")
def hmm_conditionals(ctx: VerifyContext):
    g, errors, bound = ctx.generator(4), [], 1e-12
    for case in range(10 if ctx.quick else 40):
        states, symbols, length = (int(torch.randint(lo, hi, (1,), generator=g, device="cpu"))
                                   for lo, hi in ((1, 5), (2, 4), (1, 6)))
        hmm = HMMOracle.random(states, symbols, seed=ctx.seed * 1000 + case, concentration=0.5)
        x = torch.randint(0, symbols, (3, length), generator=g, device="cpu")  # the oracles run on the host
        x = x.masked_fill(torch.rand(x.shape, generator=g, device="cpu") < 0.5, hmm.special.mask_id)
        errors.append(max_abs(hmm(x).logits.exp(), hmm.to_enumerated(length)(x).logits.exp()))
    return len(errors), max(errors) <= bound, _slack(max(errors), bound), f"1 - err/{bound:g}", ""
