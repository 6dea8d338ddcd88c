"""Writing reports so that an interrupted write never leaves a truncated file where a complete one is expected."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place (atomic on POSIX). An existing
    ``path`` that is not a regular file (a folder, a device such as /dev/full, a pipe) is refused, never
    replaced."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path}: exists and is not a regular file (a folder, device or pipe); veridec writes "
                         "regular files only and never replaces it")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
