"""A check's result as pictures and as one self-contained HTML file (spec/exactness.md EC12): the commit timeline of
both sides around the first divergence (tier E), the drift of each call (tier A on the candidate's own model),
the tests' p-values and each side's most frequent outputs (tier S). Drawn with matplotlib's Agg canvas (no
display, no pyplot state); the HTML holds the report's text and the picture as an inline PNG, and loads nothing.
"""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .tiers import TIERS

AGREE, DIFFER, EMPTY = "#b7e1b5", "#f4a6a0", "#f4f4f4"  # cell colours: both sides alike, they differ, nothing
STEPS_AFTER = 3  # timeline steps shown past the first divergence


def figure(result) -> Figure:
    """The picture of ``result``: its tier's view of the failure (a passing check: its metrics, where drawn)."""
    tier = TIERS[result.tier]
    failure = result.failure
    if tier.sampled:
        return law_figure(failure, result.alpha) if failure is not None and failure.comparison else _note(result)
    if failure is not None and failure.target.trace is not None and failure.divergence is not None:
        return timeline_figure(failure)
    if result.metrics.get("drift_by_call"):
        return drift_figure(result.metrics["drift_by_call"])
    return _note(result)


def cells(trace, row: int, prompt_length: int, steps: int) -> dict[tuple[int, int], str]:
    """What ``trace`` did in ``row`` per (step, position): the token committed ("12"), a revocation ("12 -> M") or
    an edit ("12 -> 7"); steps before ``steps`` only."""
    found = {}
    if trace.events is not None:
        for e in trace.events:
            if e.row == row and e.step < steps and e.old != e.new:
                label = str(e.new) if e.kind == "commit" else f"{e.old}->{'M' if e.kind == 'revoke' else e.new}"
                found[(e.step, e.position)] = label
        return found
    for step, record in enumerate(trace.steps[:steps]):
        for position, token in zip(record.positions[row], record.tokens[row]):
            found[(step, position)] = str(token)
    return found


def timeline_figure(failure) -> Figure:
    """Steps by positions for the failing row: each cell the token each side committed there (target above,
    candidate below), green where both did the same, red where they differ; revocations and edits as "old->M" and
    "old->new"."""
    divergence = failure.divergence
    row, prompt_length = divergence.row, len(failure.case["prompt"][0])
    steps = divergence.step + STEPS_AFTER + 1
    ours = cells(failure.target.trace, row, prompt_length, steps)
    theirs = cells(failure.candidate.trace, row, prompt_length, steps) if failure.candidate.trace is not None else {}
    shown = sorted({s for s, _ in (*ours, *theirs)} | {divergence.step})
    positions = sorted({p for _, p in (*ours, *theirs)} | {divergence.position})
    fig = Figure(figsize=(max(4.0, 0.7 * len(positions) + 1.5), max(2.5, 0.55 * len(shown) + 1.2)))
    ax = fig.add_subplot()
    for y, step in enumerate(shown):
        for x, position in enumerate(positions):
            a, b = ours.get((step, position)), theirs.get((step, position))
            colour = EMPTY if a is None and b is None else AGREE if a == b else DIFFER
            ax.add_patch(_cell(x, y, colour, edge=(step, position) == (divergence.step, divergence.position)))
            if a is not None or b is not None:
                ax.text(x, y, f"{a or '-'}\n{b or '-'}", ha="center", va="center", fontsize=7)
    _axes(ax, positions, shown, row)
    ax.set_title("commit timeline: target above, candidate below\n(green: alike, red: they differ; the first "
                 "divergence outlined)", fontsize=8)
    fig.tight_layout()
    return fig


def _cell(x: int, y: int, colour: str, edge: bool):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="black" if edge else "white",
                     linewidth=2 if edge else 0.5)


def _axes(ax, positions: list[int], steps: list[int], row: int) -> None:
    ax.set_xlim(-0.5, len(positions) - 0.5)
    ax.set_ylim(len(steps) - 0.5, -0.5)
    ax.set_xticks(range(len(positions)), [str(p) for p in positions], fontsize=7)
    ax.set_yticks(range(len(steps)), [str(s) for s in steps], fontsize=7)
    ax.set_xlabel(f"canvas position (row {row})", fontsize=8)
    ax.set_ylabel("step", fontsize=8)


def drift_figure(drift_by_call: list[float]) -> Figure:
    """Tier A on the candidate's own model: the largest logit drift at each call index over the cases."""
    fig = Figure(figsize=(6, 3))
    ax = fig.add_subplot()
    finite = [d if math.isfinite(d) else float("nan") for d in drift_by_call]
    ax.plot(range(len(finite)), finite, marker="o", markersize=3)
    ax.set_xlabel("call index", fontsize=8)
    ax.set_ylabel("largest logit drift", fontsize=8)
    ax.set_title("drift per call (spec EC9)", fontsize=8)
    fig.tight_layout()
    return fig


def law_figure(failure, alpha: float) -> Figure:
    """Tier S: each view's p-value (the Bonferroni level drawn) and each side's most frequent outputs."""
    tests = failure.comparison.tests
    fig = Figure(figsize=(8, 3.5))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    scores = [-math.log10(max(p, 1e-300)) for *_, p in tests]
    left.bar(range(len(tests)), scores, color=[DIFFER if p * len(tests) < alpha else AGREE for *_, p in tests])
    left.axhline(-math.log10(alpha / max(1, len(tests))), color="black", linewidth=0.8)
    left.set_xticks(range(len(tests)), [name for name, *_ in tests], rotation=90, fontsize=6)
    left.set_ylabel("-log10 p", fontsize=8)
    left.set_title("chi-square tests per view (line: the corrected level)", fontsize=8)
    for offset, (side, top) in enumerate(failure.top.items()):
        right.barh([f"{side}: {list(o)}" for o, _ in top], [c for _, c in top], color=(AGREE, DIFFER)[offset % 2])
    right.tick_params(labelsize=6)
    right.set_title("most frequent outputs", fontsize=8)
    fig.tight_layout()
    return fig


def _note(result) -> Figure:
    fig = Figure(figsize=(4, 1))
    fig.text(0.5, 0.5, f"veridec check: {'PASS' if result.passed else 'FAIL'} ({result.trials} cases)", ha="center",
             va="center")
    return fig


def png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    return buffer.getvalue()


def html_report(result) -> str:
    """One HTML page: the verdict, the picture (inline PNG) and the markdown report as text; nothing to load."""
    image = base64.b64encode(png(figure(result))).decode("ascii")
    verdict = "PASS" if result.passed else "FAIL"
    return "\n".join([
        "<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">", f"<title>veridec check: {verdict}</title>",
        "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow:auto}</style>",
        "</head><body>", f"<h1>veridec check: {verdict}</h1>",
        f"<img alt=\"{html.escape(result.against)}\" src=\"data:image/png;base64,{image}\">",
        f"<pre>{html.escape(result.markdown())}</pre>", "</body></html>", ""])


def save_html(result, path) -> Path:
    """Write ``html_report(result)`` to ``path`` (a file; its folder must exist): the path written."""
    from veridec.files import write_text_atomic

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"html: {path} is a folder; give a file name (e.g. {path / 'check.html'})")
    if path.exists() and not path.is_file():
        raise ValueError(f"html: {path} is not a regular file (a device or a pipe); give a file name")
    if not path.parent.is_dir():
        raise ValueError(f"html: the folder {path.parent} does not exist")
    try:
        write_text_atomic(path, html_report(result))
    except OSError as err:
        raise ValueError(f"html: {path} cannot be written ({err.strerror or err})") from err
    return path
