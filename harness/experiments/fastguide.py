"""FastGuide and the guided baselines on the default dLLM and reward model (``veridec experiment fastguide``).

Seed 000 Table 1's columns for every method (Top@1 and Avg@4 of the reward over 4 trajectories per prompt,
Seq Gap, tokens/step, seconds per generation, plus the checkers' validity of the generated lines), Table 11's
time breakdown (per-call times x counts), Figure 6's tau sweep, Figure 12's window sweep with the exact line,
Table 8's verification-order ablation (k 4, no deferral), Table 9's greedy variant and D.4's batch-size curve;
markdown, JSON and PNG plots under ``out``.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import torch

from veridec.files import write_text_atomic
from veridec.guidance.fastguide import ORDERS, FastGuideParams
from veridec.guidance.guide import GuidanceParams, guidance_vector
from veridec.guidance.shipped import load_default_reward
from veridec.models.shipped import load_model
from veridec.optimized.fastguide import generate as fastguide_sparse
from veridec.reference.fastguide import generate as fastguide_exact
from veridec.reference.guided import generate as sequential_guided
from veridec.reference.guided import parallel_guided
from veridec.rules.presets import PRESETS

from ..distributed import Group
from ..records import weights_sha256
from ..units import Unit, run_recorded
from ..workloads import corpus_texts, validity

TRAJECTORIES = 4
SWEEP_PROMPTS = 3  # the sweeps run on the first prompts only (each sweep point costs a full table row)
BASELINES = ("conf-hq", "fastdllm-hq", "klass-hq", "eb-hq", "dapd-hq")


def methods(guidance: GuidanceParams) -> dict:
    """name -> fn(model, prompt [1, P], reward, text, generator) -> Decoded (all sampled at T = 0.7)."""
    out = {"Sequential (EntRGi)": lambda m, p, r, t, g, gen: sequential_guided(m, p, r, [t], gen_length=gen,
                                                                                guidance=guidance, generator=g),
           "Unguided sequential (BoN pool)": lambda m, p, r, t, g, gen: sequential_guided(
               m, p, r, [t], gen_length=gen, guidance=None, generator=g)}
    for name in BASELINES:
        out[f"{name} (cached guidance)"] = (lambda rule: lambda m, p, r, t, g, gen: parallel_guided(
            m, p, r, [t], rule, gen_length=gen, guidance=guidance, generator=g))(PRESETS[name])
    out["FastGuide exact (k 8)"] = lambda m, p, r, t, g, gen: fastguide_exact(
        m, p, r, [t], gen_length=gen, params=FastGuideParams(k=8), guidance=guidance, generator=g)
    for k in (8, 16):
        out[f"FastGuide (k {k})"] = (lambda k: lambda m, p, r, t, g, gen: fastguide_sparse(
            m, p, r, [t], gen_length=gen, params=FastGuideParams(k=k), guidance=guidance, generator=g))(k)
    return out


def evaluate_prompt(decode, model, reward, ids, text: str, index: int, gen: int, seed: int) -> dict:
    """TRAJECTORIES decodes of one prompt (generator seeds from the prompt's index): each one's reward score,
    validity and steps, and their seconds."""
    torch.manual_seed(seed * 1000 + index)
    scores, valid, steps, seconds = [], [], [], 0.0
    for t in range(TRAJECTORIES):
        start = time.perf_counter()
        out = decode(model, ids, reward, text, torch.Generator().manual_seed(seed * 1000 + index * 10 + t), gen)
        seconds += time.perf_counter() - start
        scores.append(reward.bind([text]).score_tokens(out.canvas[:, ids.shape[1]:]).item())
        valid.append(validity(model, out.canvas, ids, None, [text]))
        steps.append(len([s for s in out.trace.steps if s.positions[0]]))
    return {"scores": scores, "valid": valid, "steps": steps, "seconds": seconds}


def summarize(per_prompt: list[dict], gen: int) -> dict:
    """Top@1, Avg@4, validity, tokens/step and seconds per generation over every prompt's trajectories."""
    scores = [p["scores"] for p in per_prompt]
    n = len(per_prompt) * TRAJECTORIES
    return {"top1": round(sum(max(s) for s in scores) / len(scores), 4),
            "avg4": round(sum(sum(s) / len(s) for s in scores) / len(scores), 4),
            "validity": round(sum(sum(p["valid"]) for p in per_prompt) / n, 4),
            "tokens_per_step": round(gen * n / sum(sum(p["steps"]) for p in per_prompt), 3),
            "s_per_gen": round(sum(p["seconds"] for p in per_prompt) / n, 3), "scores": scores}


def time_breakdown(model, reward, prompt_ids, text: str, gen: int, guidance: GuidanceParams) -> dict:
    """Per-call wall times: one full forward, one sparse recomputation (w = 2), one guidance computation."""
    x = torch.cat([prompt_ids, torch.full((1, gen), model.special.mask_id, device=prompt_ids.device)], dim=1)
    bound = reward.bind([text])

    def timed(fn, repeats=5):
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats

    with torch.no_grad():
        full = timed(lambda: model(x))
        _, cache = model.prefill(x)
        start = prompt_ids.shape[1]
        window = torch.arange(start, min(start + 10, x.shape[1]), device=x.device)[None]  # [1, 2 (2w + 1)]
        sparse = timed(lambda: model.forward_cached(x.gather(1, window), window, cache))
        logits = model(x).logits[:, prompt_ids.shape[1]:]
    response = x[:, prompt_ids.shape[1]:]
    guide = timed(lambda: guidance_vector(bound, logits, response, response == model.special.mask_id, guidance))
    return {"full_forward_ms": round(1e3 * full, 3), "sparse_recomputation_ms": round(1e3 * sparse, 3),
            "guidance_ms": round(1e3 * guide, 3), "sparse_over_full": round(sparse / full, 4)}


def run(out: Path, quick: bool = False, seed: int = 0, sizes: tuple[int, int] | None = None, reward=None,
        quiet: bool = False, group: Group = Group(), fresh: bool = False) -> dict | None:
    """The report (rank 0; other ranks of a torchrun: None). ``sizes`` = (prompts, gen length) overrides the
    quick/full sizes; ``reward`` the shipped reward model. Each (method or sweep point, prompt), the time
    breakdown and each batch size is a unit recorded in ``out``/fastguide.records.jsonl as it finishes."""
    n_prompts, gen = sizes or ((2, 64) if quick else (6, 128))
    model = load_model("default", dtype=torch.float32)
    reward = reward or load_default_reward(model.tokenizer)
    guidance = GuidanceParams()
    prompts = [(torch.tensor([model.tokenizer(t)["input_ids"]], device=model.device), t)
               for t in corpus_texts(n_prompts, seed)]
    sweep_prompts = min(n_prompts, SWEEP_PROMPTS)
    meta = {"quick": quick, "seed": seed, "prompts": n_prompts, "sweep_prompts": sweep_prompts, "gen_length": gen,
            "trajectories": TRAJECTORIES}
    named = {"model": "default", "weights": weights_sha256(model), "reward": weights_sha256(reward.model)}
    evaluated = {("table", name): (fn, n_prompts) for name, fn in methods(guidance).items()}
    evaluated |= {key: (fn, sweep_prompts) for key, fn in sweep_decoders(guidance, quick).items()}
    units = [Unit({**named, "part": part, "point": point, "prompt": i},
                  partial(evaluate_prompt, fn, model, reward, *prompts[i], i, gen, seed))
             for (part, point), (fn, count) in evaluated.items() for i in range(count)]
    units.append(Unit({**named, "part": "time_breakdown"},
                      partial(time_breakdown, model, reward, *prompts[0], gen, guidance)))
    units += [Unit({**named, "part": "batch", "point": batch},
                   partial(batch_seconds, model, reward, *prompts[0], gen, guidance, batch, seed)) for batch in BATCHES]
    results = run_recorded(units, out, "fastguide", {"experiment": "fastguide", **meta}, group, fresh, quiet)
    if results is None:
        return None
    found = {tuple(u.key[part] for part in ("part", "point", "prompt") if part in u.key): result
             for u, result in zip(units, results)}  # (part[, point[, prompt]]) -> result
    report = build_report(meta, found, evaluated, gen)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "fastguide.json", json.dumps(report, indent=2))
    write_text_atomic(out / "fastguide.md", to_markdown(report))
    plot(report, out)
    return report


def build_report(meta: dict, found: dict, evaluated: dict, gen: int) -> dict:
    """The report from the units' results ``found`` ((part[, point[, prompt]]) -> result): the table with
    Best-of-N priced at its N trajectories, the gaps to sequential guidance, FastGuide's speedup and retention,
    the sweeps, the time breakdown and the seconds per trajectory by batch size."""
    summary = {key: summarize([found[(*key, i)] for i in range(count)], gen) for key, (_, count) in evaluated.items()}
    table = {point: row for (part, point), row in summary.items() if part == "table"}
    bon_pool = table["Unguided sequential (BoN pool)"]
    # Best-of-N is the unguided pool scored by the reward: the same trajectories, all N paid for per answer
    table["Best-of-N (4)"] = {**bon_pool, "s_per_gen": round(bon_pool["s_per_gen"] * TRAJECTORIES, 3)}
    seq = table["Sequential (EntRGi)"]
    for row in table.values():
        row["seq_gap"] = round(row["top1"] - seq["top1"], 4)
    fast = table["FastGuide (k 8)"]
    bon = table["Best-of-N (4)"]
    retention = (fast["top1"] - bon["top1"]) / (seq["top1"] - bon["top1"]) if seq["top1"] != bon["top1"] else None
    sweeps = {}
    for (part, point), row in summary.items():
        if part != "table":
            sweeps.setdefault(part, {})[point] = row
    sweeps["greedy"] = sweeps["greedy"]["k 8"]
    sweeps["seconds_per_trajectory_by_batch"] = {str(b): found[("batch", b)]["seconds"] for b in BATCHES}
    return {**meta, "table": table, "speedup": round(seq["s_per_gen"] / fast["s_per_gen"], 3),
            "retention": None if retention is None else round(retention, 4),
            "top1_gain_over_bon": {"sequential": paired_gain(seq, bon), "fastguide": paired_gain(fast, bon)},
            "time_breakdown": found[("time_breakdown",)], "sweeps": sweeps}


def paired_gain(row: dict, base: dict) -> dict:
    """Mean and standard error over prompts of the per-prompt Top@1 difference row - base (same prompts)."""
    gains = [max(a) - max(b) for a, b in zip(row["scores"], base["scores"])]
    mean = sum(gains) / len(gains)
    spread = (sum((g - mean) ** 2 for g in gains) / (len(gains) - 1)) ** 0.5 if len(gains) > 1 else None
    return {"mean": round(mean, 4), "stderr": None if spread is None else round(spread / len(gains) ** 0.5, 4)}


BATCHES = (1, 2, 4)  # the batch sizes of D.4's curve


def sweep_decoders(guidance: GuidanceParams, quick: bool) -> dict:
    """(sweep, point) -> decode: tau, window (with exact recomputation) and greedy, FastGuide k 8; verification
    order at k 4 without deferral (seed 000 Table 8's setting: every step commits exactly 4)."""
    taus = (0.0, 0.5, 0.9) if quick else (0.0, 0.3, 0.5, 0.7, 0.9)
    windows = (0, 1, 2, 4) if quick else (0, 1, 2, 4, 8)
    sparse = lambda params: lambda m, p, r, t, g, n: fastguide_sparse(  # noqa: E731
        m, p, r, [t], gen_length=n, params=params, guidance=guidance, generator=g)
    return {**{("tau", str(tau)): sparse(FastGuideParams(tau=tau)) for tau in taus},
            **{("window", str(w)): sparse(FastGuideParams(window=w)) for w in windows},
            ("window", "exact"): lambda m, p, r, t, g, n: fastguide_exact(m, p, r, [t], gen_length=n,
                                                                          guidance=guidance, generator=g),
            **{("order", order): sparse(FastGuideParams(k=4, tau=0.0, order=order)) for order in ORDERS},
            ("greedy", "k 8"): sparse(FastGuideParams(greedy=True))}


def batch_seconds(model, reward, ids, text: str, gen: int, guidance: GuidanceParams, batch: int, seed: int) -> dict:
    """Seconds per trajectory of one sparse FastGuide decode of ``batch`` copies of a prompt."""
    start = time.perf_counter()
    fastguide_sparse(model, ids.repeat(batch, 1), reward, [text] * batch, gen_length=gen, guidance=guidance,
                     generator=torch.Generator().manual_seed(seed))
    return {"seconds": round((time.perf_counter() - start) / batch, 3)}


def to_markdown(report: dict) -> str:
    columns = ("top1", "avg4", "seq_gap", "validity", "tokens_per_step", "s_per_gen")
    lines = [f"# FastGuide ({report['prompts']} prompts x {report['trajectories']} trajectories, gen "
             f"{report['gen_length']}, seed {report['seed']}{', quick' if report['quick'] else ''})", "",
             f"speedup (sequential guided / FastGuide k 8, s per generation): {report['speedup']}x; guidance "
             f"retention (Top@1_FG - Top@1_BoN) / (Top@1_seq - Top@1_BoN): {report['retention']}; Top@1 gain over "
             "Best-of-N, mean (standard error) over prompts: " + ", ".join(
                 f"{name} {g['mean']} ({g['stderr']})" for name, g in report["top1_gain_over_bon"].items()), "",
             "| method | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(str(row[c]) for c in columns) + " |" for name, row in report["table"].items()]
    lines += ["", "Time per call: " + ", ".join(f"{k} {v}" for k, v in report["time_breakdown"].items()), ""]
    for sweep, title in (("tau", "tau sweep (FastGuide k 8)"), ("window", "window sweep (FastGuide k 8)"),
                         ("order", "verification order (FastGuide k 4, tau 0)")):
        lines += [f"## {title}, first {report['sweep_prompts']} prompts", "",
                  f"| {sweep} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        lines += [f"| {key} | " + " | ".join(str(row.get(c, "-")) for c in columns) + " |"
                  for key, row in report["sweeps"][sweep].items()]
        lines.append("")
    greedy = report["sweeps"]["greedy"]
    lines += [f"Greedy variant: top1 {greedy['top1']}, tokens/step {greedy['tokens_per_step']}, s/gen "
              f"{greedy['s_per_gen']}", "",
              "Seconds per trajectory by batch size: " +
              ", ".join(f"{b}: {s}" for b, s in report["sweeps"]["seconds_per_trajectory_by_batch"].items())]
    return "\n".join(lines) + "\n"


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    tau = report["sweeps"]["tau"]
    axes[0].plot([float(t) for t in tau], [r["top1"] for r in tau.values()], "o-", label="Top@1")
    twin = axes[0].twinx()
    twin.plot([float(t) for t in tau], [r["tokens_per_step"] for r in tau.values()], "s--", color="gray")
    axes[0].set(xlabel="tau", ylabel="Top@1 reward", title="deferral threshold (tokens/step dashed)")
    window = {k: v for k, v in report["sweeps"]["window"].items() if k != "exact"}
    axes[1].plot([int(w) for w in window], [r["top1"] for r in window.values()], "o-", label="sparse")
    axes[1].axhline(report["sweeps"]["window"]["exact"]["top1"], color="k", ls=":", label="exact recomputation")
    axes[1].set(xlabel="window radius w", ylabel="Top@1 reward", title="window")
    axes[1].legend()
    order = report["sweeps"]["order"]
    axes[2].bar(range(len(order)), [r["top1"] for r in order.values()], tick_label=list(order))
    axes[2].set(ylabel="Top@1 reward", title="verification order (k 4, tau 0)")
    axes[2].tick_params(axis="x", labelsize=7)
    curve = report["sweeps"]["seconds_per_trajectory_by_batch"]
    axes[3].plot([int(b) for b in curve], list(curve.values()), "o-")
    axes[3].set(xlabel="batch size", ylabel="s per trajectory", title="batching")
    figure.tight_layout()
    figure.savefig(out / "fastguide.png", dpi=110)
    plt.close(figure)
