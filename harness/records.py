"""Records that survive a kill: one JSON line per finished unit of work, flushed and fsync'd as it finishes.

A table is derived from its records, so a run killed at any moment loses at most the unit in progress; a rerun
with the same file skips the finished units. Each line holds the unit's key, the run's settings (and their
hash) and the unit's result. A truncated last line (the kill came mid-write) is dropped and redone; a line from
other settings, or any other unreadable line, is a clear error: records from different runs are never mixed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def weights_sha256(model) -> str:
    """sha256 over a model's parameter names, dtypes, shapes and bytes (its identity in a unit key)."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class Records:
    """The records of a run with ``settings`` at ``path`` (``name.jsonl``): ``get(key)`` a finished unit's
    result or None, ``add(key, result)`` appends one durably. Process ``rank`` > 0 of a distributed run writes
    ``name.rank{rank}.jsonl`` beside it; every process reads all of them, and ``merge`` (rank 0, after the
    others finished) folds them into the main file."""

    def __init__(self, path: Path, settings: dict, rank: int = 0):
        self.main, self.settings, self.hash = Path(path), settings, settings_hash(settings)
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
        with open(path, "a") as handle:
            for key, result in items:
                handle.write(json.dumps({"key": key, "settings_hash": self.hash, "settings": self.settings,
                                         "result": result}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _read(self, path: Path) -> dict[str, dict]:
        data = path.read_bytes()
        complete, _, tail = data.rpartition(b"\n")
        if tail:  # the last write was cut short: drop it, it is redone
            with open(path, "r+b") as handle:
                handle.truncate(len(complete) + 1 if complete else 0)
        found = {}
        for number, raw in enumerate(complete.split(b"\n") if complete else [], start=1):
            try:
                record = json.loads(raw)
                key, result, recorded_hash = record["key"], record["result"], record["settings_hash"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{path}: line {number} is not a veridec record; give another --out or "
                                 "remove the file") from None
            if recorded_hash != self.hash:
                raise ValueError(f"{path}: its records come from other settings ({record.get('settings')}), "
                                 f"not this run's ({self.settings}); give another --out or pass --fresh")
            found[key] = result
        return found
