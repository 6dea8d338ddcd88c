"""A check's result as a picture and a self-contained HTML file (spec/exactness.md EC12): the commit timeline of a
tier E failure, the drift per call of tier A on the candidate's own model, the tests of a tier S failure; a file
that loads nothing from elsewhere, and clear errors for paths that cannot take it."""

import base64
import re
import sys
from pathlib import Path

import pytest

from veridec.testing import check_decoder, load_candidate
from veridec.testing.figures import cells, png

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def examples_importable():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


@pytest.fixture(scope="module")
def tier_e_failure():
    sys.path.insert(0, str(EXAMPLES))
    try:
        broken = load_candidate(f"{EXAMPLES / 'fastdllm_dual_broken.py'}:one_too_many")
        return check_decoder(broken, "fastdllm", cache="dual", model="tiny-llada", max_examples=40, knobs=False)
    finally:
        sys.path.remove(str(EXAMPLES))


def _self_contained(text: str) -> bytes:
    """The page's one image, decoded; the page loads nothing (no URL, script, stylesheet link or frame)."""
    assert not re.search(r"https?://|<script|<link|<iframe|src=\"(?!data:)", text)
    (image,) = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', text)
    return base64.b64decode(image)


def test_the_timeline_marks_each_side_and_the_first_divergence(tier_e_failure):
    failure = tier_e_failure.failure
    ours = cells(failure.target.trace, failure.divergence.row, 1, failure.divergence.step + 4)
    theirs = cells(failure.candidate.trace, failure.divergence.row, 1, failure.divergence.step + 4)
    where = (failure.divergence.step, failure.divergence.position)
    assert ours.get(where) != theirs.get(where)  # the outlined cell is where they differ
    (ax,) = tier_e_failure.figure().axes
    outlined = [p for p in ax.patches if p.get_linewidth() == 2]
    assert len(outlined) == 1 and any(t.get_text().count("\n") == 1 for t in ax.texts)


def test_the_html_report_holds_the_timeline_and_loads_nothing(tier_e_failure, tmp_path):
    written = tier_e_failure.save_html(tmp_path / "check.html")
    text = written.read_text()
    assert _self_contained(text).startswith(PNG_MAGIC) and "veridec check: FAIL" in text
    assert "## Why they differ" in text


def test_tier_a_on_the_users_model_draws_the_drift_per_call(tmp_path):
    result = check_decoder(load_candidate(f"{EXAMPLES / 'own_model.py'}:prompt_feature_cache"), "llada",
                           model="tiny-llada", tier="A", max_examples=4, knobs=False,
                           candidate_model=f"{EXAMPLES / 'own_model.py'}:load")
    (ax,) = result.figure().axes
    (line,) = ax.get_lines()
    assert len(line.get_xdata()) == len(result.metrics["drift_by_call"]) > 0
    assert _self_contained(result.save_html(tmp_path / "a.html").read_text()).startswith(PNG_MAGIC)


def test_a_tier_s_failure_draws_each_test_and_the_outputs(tmp_path):
    twice = load_candidate(f"{EXAMPLES / 'llada_sampler_broken.py'}:temperature_applied_twice")
    result = check_decoder(twice, "llada", model="oracle-joint", tier="S", samples=300, max_examples=3)
    assert not result.passed
    tests, outputs = result.figure().axes
    assert len(tests.patches) == len(result.failure.comparison.tests) and outputs.patches
    assert _self_contained(result.save_html(tmp_path / "s.html").read_text()).startswith(PNG_MAGIC)


@pytest.mark.parametrize("where", ["folder", "device", "missing folder"])
def test_a_path_that_cannot_take_the_page_is_refused_by_name(tier_e_failure, tmp_path, where):
    path = {"folder": tmp_path, "device": Path("/dev/null"), "missing folder": tmp_path / "no" / "c.html"}[where]
    with pytest.raises(ValueError, match=r"^html: "):
        tier_e_failure.save_html(path)


def test_a_read_only_folder_is_refused(tier_e_failure, tmp_path):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):  # root writes anywhere: the refusal cannot be shown here
            pytest.skip("the tests run as a user who can write to a read-only folder (root)")
        with pytest.raises(ValueError, match="cannot be written"):
            tier_e_failure.save_html(folder / "c.html")
    finally:
        folder.chmod(0o700)


def test_png_bytes_are_a_png(tier_e_failure):
    assert png(tier_e_failure.figure()).startswith(PNG_MAGIC)


def test_the_command_writes_the_page_and_refuses_a_folder_after_its_verdict(tmp_path, capsys):
    """``veridec check --html FILE``: the page written (exit 1 for the failing candidate); a folder or a device is
    refused in one line after the verdict is printed (exit 2)."""
    from veridec.harness.cli import main

    words = ["check", f"{EXAMPLES / 'fastdllm_dual_broken.py'}:one_too_many", "--against", "fastdllm", "--cache",
             "dual", "--model", "tiny-llada", "--trials", "40", "--no-knobs", "--quiet"]
    assert main([*words, "--html", str(tmp_path / "check.html")]) == 1
    assert _self_contained((tmp_path / "check.html").read_text()).startswith(PNG_MAGIC)
    capsys.readouterr()
    for where in (tmp_path, Path("/dev/null")):
        assert main([*words, "--html", str(where)]) == 2
        out, err = capsys.readouterr()
        assert "# veridec check: FAIL" in out and err.strip().startswith("veridec: --html: ")


def test_cells_label_each_event_kind_by_hand():
    """EC12's timeline cells: a commit shows its token, a revocation "old->M", an edit "old->new" (the mask id 9
    written by a revocation never shows as a token); rows, later steps and no-op events stay out."""
    from veridec.trace import Event, Trace

    trace = Trace("t", {}, 2, 2, events=[
        Event("commit", 0, 0, 2, 9, 5, 0.9), Event("revoke", 1, 0, 2, 5, 9, 0.4),
        Event("edit", 1, 0, 3, 6, 7, 0.8), Event("commit", 0, 1, 2, 9, 4, 0.7),
        Event("edit", 1, 0, 4, 3, 3, 0.5), Event("commit", 2, 0, 3, 9, 1, 0.6)])
    assert cells(trace, 0, 2, 2) == {(0, 2): "5", (1, 2): "5->M", (1, 3): "6->7"}
