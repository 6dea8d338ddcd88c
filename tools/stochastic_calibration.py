"""Tier S calibration (spec/stochastic.md ST4): the false-alarm rate and the power of the two-sample tests,
measured, against what ST3 predicts. Writes a markdown report (committed as benchmarks/stochastic-calibration.md).

    python -m tools.stochastic_calibration --out benchmarks/stochastic-calibration.md   # ~20 min, 1 thread

1. The statistic alone, on synthetic laws over 20 cells: equal laws (false alarms at level alpha), and laws at
   total variation delta placed as ST3's bound assumes, at the samples ``samples_for_power`` derives (power,
   predicted 0.95).
2. Decoders on the tiny-dream check model (``check_decoder(..., tier="S", case=...)``, one case, fresh seeds each
   repetition): examples/dream_sampler.py and its law-keeping variant (Gumbel-max draws) against veridec's Dream
   sampler (false alarms), and the law-changing variants (detection rate). One-token cases also get the power
   ST3 predicts from their exact laws (the filtered softmax of the one forward: SQ2.5).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from veridec.rules.dream import filtered_probs  # noqa: E402
from veridec.testing import check_decoder, load_check_model, load_candidate  # noqa: E402
from veridec.testing.stochastic import MAX_CELLS, homogeneity, samples_for_power  # noqa: E402

ALPHA = 0.01
ONE_TOKEN = {"max_new_tokens": 1, "steps": 1, "alg": "origin"}


def synthetic(repetitions: int, rng: np.random.Generator) -> list[str]:
    """Rows: equal laws, and TV = delta with p - q proportional to p + q (ST3's bound nearly tight)."""
    cells = MAX_CELLS
    p = np.full(cells, 1 / cells)
    rows = ["| laws | delta | samples per side | repetitions | rejected (99% interval) | predicted |",
            "|---|---|---|---|---|---|"]
    for delta in (0.0, 0.05, 0.1, 0.2):
        signs = np.where(np.arange(cells) % 2 == 0, 1.0, -1.0)
        q = p * (1 + 2 * delta * signs)  # TV = delta * sum(p) = delta
        n = samples_for_power(delta, ALPHA) if delta > 0 else samples_for_power(0.1, ALPHA)
        rejected = sum(_rejects(rng.choice(cells, n, p=p), rng.choice(cells, n, p=q)) for _ in range(repetitions))
        predicted = "<= 0.01 (alpha)" if delta == 0 else ">= 0.95 (ST3)"
        rows.append(f"| {'equal' if delta == 0 else 'shifted'} | {delta} | {n} | {repetitions} | "
                    f"{_share(rejected, repetitions)} | {predicted} |")
    return rows


def _share(count: int, total: int) -> str:
    """count / total with its Clopper-Pearson 99% interval."""
    interval = stats.binomtest(count, total).proportion_ci(0.99)
    return f"{count / total:.3f} ({interval.low:.3f}-{interval.high:.3f})"


def _rejects(a: np.ndarray, b: np.ndarray) -> bool:
    return homogeneity(Counter(a.tolist()), Counter(b.tolist()))[2] < ALPHA


def decoders(repetitions: int, shifted_repetitions: int, samples: int) -> list[str]:
    model = load_check_model("tiny-dream")
    table = ["| candidate | case | law | samples per side | repetitions | rejected (99% interval) | predicted | "
             "seconds |",
             "|---|---|---|---|---|---|---|---|"]
    runs = [("dream_sampler.py:diffusion_generate", {**ONE_TOKEN, "temperature": 1.0, "top_k": 5}, "same",
             repetitions),
            ("dream_sampler.py:diffusion_generate", {"max_new_tokens": 3, "steps": 2, "alg": "maskgit_plus",
                                                     "temperature": 1.0, "top_k": 5}, "same", repetitions),
            ("dream_sampler_variants.py:gumbel_max_draws", {**ONE_TOKEN, "temperature": 1.0, "top_k": 5}, "same",
             repetitions),
            ("dream_sampler_variants.py:temperature_applied_twice", {**ONE_TOKEN, "temperature": 0.7, "top_k": 5},
             "shifted", shifted_repetitions),
            ("dream_sampler_variants.py:top_p_drops_crossing_token", {**ONE_TOKEN, "temperature": 1.0,
                                                                      "top_p": 0.9, "top_k": 5}, "shifted",
             shifted_repetitions),
            ("dream_sampler_variants.py:confidence_before_temperature", {"max_new_tokens": 3, "steps": 2,
                                                                         "alg": "maskgit_plus", "temperature": 0.7,
                                                                         "top_k": 5}, "shifted",
             shifted_repetitions),
            ("dream_sampler_variants.py:confidence_before_temperature", {"max_new_tokens": 7, "steps": 3,
                                                                         "alg": "maskgit_plus", "temperature": 0.7,
                                                                         "top_k": 5}, "shifted",
             shifted_repetitions)]
    rows_prompt = {7: [[38, 29], [56, 48], [72, 24]]}  # three rows: the case tier S first caught it on
    for name, settings, law, reps in runs:
        started = time.time()
        candidate = load_candidate(str(ROOT / "examples" / name))
        one_token = settings["max_new_tokens"] == 1
        prompt = _informative_prompt(model, name, settings, samples) if one_token and law == "shifted" else 7
        rows = rows_prompt.get(settings["max_new_tokens"], [[prompt]])
        rejected = 0
        for rep in range(reps):
            case = {"prompt": rows, "attention_mask": None, "seed": 1_000_003 * rep, "settings": settings}
            result = check_decoder(candidate, "dream", model=model, tier="S", case=case, samples=samples, alpha=ALPHA)
            rejected += not result.passed
        predicted = _predicted(model, name, settings, samples, prompt)[1] if one_token else "-"
        table.append(f"| `{name.split(':')[1]}` | prompt {rows}, {settings} | {law} | {samples} | {reps} | "
                     f"{_share(rejected, reps)} | {predicted} | {time.time() - started:.0f} |")
        print(table[-1], flush=True)
    return table


def _informative_prompt(model, name: str, settings: dict, samples: int) -> int:
    """The one-token prompt (ids 0-95) whose predicted power is nearest 0.8: a row that can tell a measured
    power from the predicted one (a case where the laws agree, or differ hugely, cannot)."""
    return min(range(96), key=lambda token: abs(_predicted(model, name, settings, samples, token)[0] - 0.8))


def _predicted(model, name: str, settings: dict, samples: int, prompt: int) -> tuple[float, str]:
    """ST3's power for a one-token case from its exact laws (veridec's filtered softmax and the variant's)."""
    canvas = torch.tensor([[prompt, model.special.mask_id]])
    with torch.no_grad():
        logits = model(canvas).logits[0, 1:2].double()  # [1, V] the generated position, token-aligned
    t, top_p, top_k = settings["temperature"], settings.get("top_p"), settings.get("top_k")
    ours = filtered_probs(logits, t, top_p, top_k)[0]
    if "temperature_applied_twice" in name:
        theirs = filtered_probs(logits / t, t, top_p, top_k)[0]
    elif "top_p_drops_crossing_token" in name:
        theirs = _drop_crossing(logits / t, top_p, top_k)
    else:
        theirs = ours
    support = (ours + theirs) > 0
    p, q = ours[support], theirs[support]
    tv = 0.5 * (p - q).abs().sum().item()
    if tv == 0:
        return 0.0, "<= 0.01 (alpha)"
    df = int(support.sum()) - 1
    noncentrality = samples * ((p - q) ** 2 / (p + q)).sum().item()
    level = ALPHA / 2  # two tests for one token: the output and its position (Bonferroni)
    power = stats.ncx2.sf(stats.chi2.isf(level, df), df, noncentrality)
    return power, f"{power:.3f} (TV {tv:.3f}, df {df})"


def _drop_crossing(logits: torch.Tensor, top_p: float, top_k: int | None) -> torch.Tensor:
    """The law of TopPDropsCrossingToken: the nucleus without the token that crosses p."""
    ranked, order = torch.sort(logits, descending=True, stable=True)
    beyond = torch.softmax(ranked, dim=-1).cumsum(-1) > top_p
    beyond[:, 0] = False
    filtered = logits.masked_fill(beyond.scatter(1, order, beyond), torch.finfo(logits.dtype).min)
    if top_k is not None:
        kth = filtered.topk(top_k).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, torch.finfo(logits.dtype).min)
    return torch.softmax(filtered, dim=-1)[0]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "stochastic-calibration.md")
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--shifted-repetitions", type=int, default=50)
    parser.add_argument("--samples", type=int, default=400, help="samples per side in the decoder rows")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    started = time.time()
    lines = ["# Tier S calibration", "",
             f"`python -m tools.stochastic_calibration` (alpha = {ALPHA}, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%d')}). spec/stochastic.md ST3 predicts the power; rejected = the share of "
             "repetitions whose test fired.", "", "## The statistic alone (synthetic laws over 20 cells)", "",
             *synthetic(args.repetitions, np.random.default_rng(0)), "",
             "## Decoders on tiny-dream (one case, fresh seeds per repetition)", "",
             *decoders(args.repetitions, args.shifted_repetitions, args.samples), "",
             f"Total {time.time() - started:.0f} s."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
