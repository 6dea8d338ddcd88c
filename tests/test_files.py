"""veridec.files.write_text_atomic: a report is written whole or not at all, and what is not a regular file at its
path (a folder, a device, a pipe) is refused, never replaced."""

import os

import pytest

from veridec.files import write_text_atomic


def test_writes_replaces_a_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "report.json"
    write_text_atomic(path, "one")
    write_text_atomic(path, "two")
    assert path.read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_what_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "report.json"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    with pytest.raises(ValueError, match="exists and is not a regular file"):
        write_text_atomic(path, "text")
    assert path.exists() and not path.is_file()  # untouched
