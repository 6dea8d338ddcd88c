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
    """The records file at ``path`` for a run with ``settings``: ``get(key)`` a finished unit's result or None,
    ``add(key, result)`` appends one durably."""

    def __init__(self, path: Path, settings: dict):
        self.path, self.settings, self.hash = Path(path), settings, settings_hash(settings)
        self.done: dict[str, dict] = {}
        self.resumed = 0
        if self.path.exists():
            self._load()
            self.resumed = len(self.done)

    @staticmethod
    def key(**parts) -> str:
        return json.dumps(parts, sort_keys=True)

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def add(self, key: str, result: dict) -> None:
        line = json.dumps({"key": key, "settings_hash": self.hash, "settings": self.settings, "result": result})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.done[key] = result

    def _load(self) -> None:
        data = self.path.read_bytes()
        complete, _, tail = data.rpartition(b"\n")
        if tail:  # the last write was cut short: drop it, it is redone
            with open(self.path, "r+b") as handle:
                handle.truncate(len(complete) + 1 if complete else 0)
        for number, raw in enumerate(complete.split(b"\n") if complete else [], start=1):
            try:
                record = json.loads(raw)
                key, result, found = record["key"], record["result"], record["settings_hash"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{self.path}: line {number} is not a veridec record; give another --out or "
                                 "remove the file") from None
            if found != self.hash:
                raise ValueError(f"{self.path}: its records come from other settings ({record.get('settings')}), "
                                 f"not this run's ({self.settings}); give another --out or pass --fresh")
            self.done[key] = result
