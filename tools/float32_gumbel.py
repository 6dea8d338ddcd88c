"""The float32 Gumbel-max variant's law, exactly (spec/stochastic.md ST4): how far LLaDA's Gumbel-max computed in
float32 instead of float64 moves one position's sampled law, and the samples tier S would need to see it.

    python -m tools.float32_gumbel --out benchmarks/float32-gumbel.md   # ~6 min, 1 thread

LLaDA's proposal is argmax_j exp(l_j) / (-log u_j)^T with u_j ~ U(0, 1) (veridec.rules.common, float64). The
variant draws u with torch.rand in float32 and computes the scores in float32. torch's CPU float32 uniform takes
the values k 2^-24, k = 0 .. 2^24 - 1, each with probability 2^-24 (checked below on 10^7 draws), so the
variant's law is a finite sum: token i wins when its score beats every earlier token's strictly and every later
token's or ties (argmax keeps the first maximum), so

    P(i) = sum_k 2^-24 prod_{j < i} F_j(s_i(k)-) prod_{j > i} F_j(s_i(k)),

F_j the distribution function of token j's score over the grid (torch.searchsorted on its sorted scores, each
score computed by torch exactly as the variant computes it). Against softmax(l / T) in float64 this gives the
total variation exactly (up to float64 sums). Logits: N(0, 2^2) (seed 0), or all equal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from veridec.testing.stochastic import MAX_CELLS, samples_for_power

GRID = 2**24
ALPHA = 0.01


def grid_is_torchs(draws: int = 10**7) -> bool:
    """Whether torch's float32 uniforms all lie on the k 2^-24 grid (k < 2^24)."""
    u = torch.rand(draws, generator=torch.Generator().manual_seed(0)).double() * GRID
    return bool((u == u.round()).all() and u.max() < GRID)


def float32_law(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The exact law [V] (float64) of argmax exp(l) / (-log u)^T computed in float32 over torch's float32 grid."""
    u = torch.arange(GRID, dtype=torch.float64, device="cpu").div_(GRID).float()  # [2^24], exactly k 2^-24
    noise = (-torch.log(u)) ** temperature  # [2^24] float32, inf at u = 0
    scores = [torch.sort(logits[j].float().exp() / noise).values for j in range(len(logits))]  # V x [2^24]
    law = torch.zeros(len(logits), dtype=torch.float64, device="cpu")
    for i, own in enumerate(scores):
        values, counts = torch.unique_consecutive(own, return_counts=True)  # the distinct scores of token i
        log_beat = torch.zeros(len(values), dtype=torch.float64, device="cpu")  # log P(every other token loses)
        for j, other in enumerate(scores):
            if j != i:
                below = torch.searchsorted(other, values, right=j > i).double() / GRID  # F_j(v-) or F_j(v)
                log_beat += below.log()
        law[i] = (counts.double() / GRID * log_beat.exp()).sum()
    return law


def rows(vocabularies, temperatures) -> list[str]:
    """One row per (V, logits, T): logits N(0, 2^2) (seed 0) or all equal (where only ties can move the law)."""
    generator = torch.Generator().manual_seed(0)
    lines = ["| V | logits | T | TV(float32 law, softmax(l / T)) | mass - 1 | samples one-sample tier S needs to "
             "detect it (power 0.95, alpha 0.01) | seconds |", "|---|---|---|---|---|---|---|"]
    for vocabulary in vocabularies:
        drawn = 2.0 * torch.randn(vocabulary, generator=generator, dtype=torch.float64)
        for name, logits in (("N(0, 4)", drawn), ("equal", torch.zeros(vocabulary, dtype=torch.float64))):
            for temperature in temperatures:
                start = time.perf_counter()
                law = float32_law(logits, temperature)
                tv = 0.5 * (law - torch.softmax(logits / temperature, dim=0)).abs().sum().item()
                df = min(vocabulary, MAX_CELLS) - 1
                needed = f"{samples_for_power(tv, ALPHA, df=df, exact_law=True):.2e}" if 0 < tv < 1 else "-"
                lines.append(f"| {vocabulary} | {name} | {temperature} | {tv:.3g} | {law.sum().item() - 1:.1e} | "
                             f"{needed} | {time.perf_counter() - start:.0f} |")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    report = Path(__file__).resolve().parents[1] / "benchmarks" / "float32-gumbel.md"
    parser.add_argument("--out", type=Path, default=report)
    parser.add_argument("--vocabularies", default="2,4,8")
    parser.add_argument("--temperatures", default="1.0,0.1,0.02")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    if not grid_is_torchs():
        raise SystemExit("torch's float32 uniforms are not on the k 2^-24 grid here: the enumeration does not apply")
    table = rows([int(v) for v in args.vocabularies.split(",")], [float(t) for t in args.temperatures.split(",")])
    report = ["# Gumbel-max in float32: the law it samples, exactly", "",
              f"`python -m tools.float32_gumbel` (torch {torch.__version__}, CPU); see the module docstring for "
              "the method.", "", *table, ""]
    args.out.write_text("\n".join(report))
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
