"""Records that survive a kill: one JSON line per finished unit of work, flushed and fsync'd as it finishes.

A table is derived from its records, so a run killed at any moment loses at most the unit in progress; a rerun
with the same file skips the finished units. Each line holds the unit's key (which names the model's weights by
their digest), the run's settings (and their hash), the unit's result, the veridec version that computed it and
a digest of the line's own content. A truncated last line (the kill came mid-write: the start of a record
without its newline) is dropped and redone. Every other line is checked field by field: a line whose content no
longer matches its digest (edited by hand), from another version, whose settings (not only their hash) are not
this run's, whose key is not a string or whose result is not an object, that fails the run's own check of a
result (``check_result``: with it, a key must also be a unit key, a JSON object), any other unreadable line, and
a records path that is a link, a file with more than one hard link (another name may lie outside the output
folder) or not a regular file are clear errors naming the file and line: records from different runs are never
mixed, and a table never holds a line the run cannot vouch for. The digest catches edits and corruption, not
forgery (it is no signature): a forged line is held to the same checks, so it cannot crash a run or slip in a
result of the wrong shape.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import torch

from veridec import __version__

from .arguments import UsageError

RECORD_START = b'{"key": '  # how every record line begins (json.dumps keeps the order written)


class RecordsError(UsageError):
    """A records file the run cannot vouch for (exit code 2, one line): it names the file and the line."""


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def weights_sha256(model) -> str:
    """sha256 over a model's parameter names, dtypes, shapes and bytes (its identity in a unit key)."""
    digest = hashlib.sha256()
    for name, tensor in getattr(model, "hf", model).state_dict().items():  # hf: DiffusionGemma's wrapped model
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class Records:
    """The records of a run with ``settings`` at ``path`` (``name.jsonl``): ``get(key)`` a finished unit's
    result or None, ``add(key, result)`` appends one durably. Process ``rank`` > 0 of a distributed run writes
    ``name.rank{rank}.jsonl`` beside it; every process reads all of them, and ``merge`` (rank 0, after the
    others finished) folds them into the main file. ``check_result(result)``: what is wrong with a recorded
    result (None: nothing); a line it faults is refused, and so is a key that is no unit key (``key``: a JSON
    object)."""

    def __init__(self, path: Path, settings: dict, rank: int = 0,
                 check_result: Callable[[dict], str | None] | None = None):
        self.main, self.settings, self.hash = Path(path), settings, settings_hash(settings)
        self.check_result = check_result
        self.path = self.main if rank == 0 else self.main.with_name(f"{self.main.stem}.rank{rank}.jsonl")
        self.done: dict[str, dict] = {}
        self._read_all()
        self.resumed = len(self.done)

    @staticmethod
    def key(**parts) -> str:
        return json.dumps(parts, sort_keys=True)

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def add(self, key: str, result: dict) -> None:
        self._append(self.path, [(key, result)])
        self.done[key] = result

    def merge(self) -> None:
        """Read every process's records again and fold the other files into the main one (rank 0)."""
        self._read_all()
        recorded = set(self._read(self.main)) if self.main.exists() else set()
        self._append(self.main, [(k, v) for k, v in self.done.items() if k not in recorded])
        for other in self._rank_files():
            other.unlink()

    def _rank_files(self) -> list[Path]:
        return sorted(self.main.parent.glob(f"{self.main.stem}.rank*.jsonl"))

    def _read_all(self) -> None:
        for path in [self.main, *self._rank_files()]:
            if path.exists():
                self.done.update(self._read(path))

    def _append(self, path: Path, items: list[tuple[str, dict]]) -> None:
        if not items:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        _check_regular(path)
        with open(path, "a") as handle:
            for key, result in items:
                record = {"key": key, "settings_hash": self.hash, "settings": self.settings, "result": result,
                          "veridec": __version__}
                handle.write(json.dumps({**record, "digest": record_digest(record)}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _read(self, path: Path) -> dict[str, dict]:
        _check_regular(path)
        data = path.read_bytes()
        complete, _, tail = data.rpartition(b"\n")
        if tail and not (tail.startswith(RECORD_START) or RECORD_START.startswith(tail)):
            last = len(complete.split(b"\n")) + 1 if complete else 1
            raise RecordsError(f"{path}: line {last} is not a veridec record "
                               "(nor the start of one cut short); give another --out or remove the file")
        found = {}
        for number, raw in enumerate(complete.split(b"\n") if complete else [], start=1):
            key, result = self._parse(path, number, raw)
            found[key] = result
        if tail:  # the last write was cut short: drop it, it is redone
            with open(path, "r+b") as handle:
                handle.truncate(len(complete) + 1 if complete else 0)
        return found

    def _parse(self, path: Path, number: int, raw: bytes) -> tuple[str, dict]:
        """One record line -> (key, result), every field checked; a clear error naming the file and line."""
        try:
            record = json.loads(raw)
            key, result, recorded_hash, digest = record["key"], record["result"], record["settings_hash"], \
                record.pop("digest")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RecordsError(f"{path}: line {number} is not a veridec record; give another --out or "
                               "remove the file") from None
        if digest != record_digest(record):
            raise RecordsError(f"{path}: line {number} does not match its digest (edited by hand, or corrupt): "
                               "a run never reports a result it did not compute; pass --fresh to start over")
        if record.get("veridec") != __version__:
            raise RecordsError(f"{path}: line {number} was written by veridec {record.get('veridec')}, this is "
                               f"{__version__}; pass --fresh to recompute")
        if recorded_hash != self.hash or settings_hash(record.get("settings")) != self.hash:
            raise RecordsError(f"{path}: line {number} comes from other settings ({record.get('settings')}), "
                               f"not this run's ({self.settings}); give another --out or pass --fresh")
        problem = self._problem(key, result)
        if problem:
            raise RecordsError(f"{path}: line {number}: {problem}; pass --fresh to recompute")
        return key, result

    def _problem(self, key, result) -> str | None:
        """What is wrong with a record's key or result (None: nothing)."""
        if not isinstance(key, str):
            return f"its key is {type(key).__name__} {_short(key)}, not a string"
        if not isinstance(result, dict):
            return f"its result is {type(result).__name__} {_short(result)}, not an object"
        if self.check_result is None:
            return None
        if not isinstance(_json_or_none(key), dict):
            return f"its key {_short(key)} is not a JSON object naming a unit"
        problem = self.check_result(result)
        return f"its result {problem}" if problem else None


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _short(value, limit: int = 60) -> str:
    """``value`` as JSON, cut to ``limit`` characters (an error message stays one short line)."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def record_digest(record: dict) -> str:
    """sha256 of a record's fields (all but its digest), in canonical JSON."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _check_regular(path: Path) -> None:
    """A records path is a regular file of its folder or does not exist yet: a link (it could lead outside the
    output folder) or a folder, device or pipe is refused."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a link" if path.is_symlink() else "not a regular file"
        raise RecordsError(f"{path}: the records file is {kind}; veridec reads and appends only regular files "
                             "inside the output folder (remove it, or give another --out)")
    links = path.stat().st_nlink if path.exists() else 1
    if links > 1:
        raise RecordsError(f"{path}: the records file has {links} hard links (another name may lie outside the "
                           "output folder); veridec appends only to a file of its own (remove it, or give "
                           "another --out)")
