"""Command-line argument checks for ``veridec``: each refuses a bad value with a message naming the flag and what it
accepts (exit code 2), before any computation, so a long run never fails at its end on an argument."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import warnings
from pathlib import Path

import torch

from veridec.models.shipped import SHIPPED, load_model
from veridec.testing.models import MODEL_NAMES

SEED_LIMIT = 2**63  # torch.manual_seed takes seeds in [0, 2**63)
MODEL_TABLES = {  # a model loader -> the names it takes besides a model folder: the tables the loaders read
    "shipped": tuple(SHIPPED),  # veridec.models.shipped.load_model: generate, verify, exactness
    "check": MODEL_NAMES,  # veridec.testing.load_check_model: check (the shipped, tiny and oracle models)
}


class UsageError(ValueError):
    """A bad command-line argument (exit code 2)."""


def integer(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from err
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must lie in [{low}, {'inf)' if high is None else f'{high}]'}, "
                                             f"got {value}")
        return value

    return parse


def number(low: float = 0.0, high: float | None = None):
    """An argparse type: a finite number in [low, high] (NaN and infinities refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from err
        if not math.isfinite(value) or value < low or (high is not None and value > high):
            top = "inf)" if high is None else f"{high:g}]"
            raise argparse.ArgumentTypeError(f"must be a finite number in [{low}, {top}, got {text}")
        return value

    return parse


def probability(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from err
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text}")
    return value


seed = integer(0, SEED_LIMIT - 1)


def check_device(name: str) -> torch.device:
    """The device ``--device`` names, refused when it cannot run a decode here: not a device name, a CUDA index
    or MPS that is not there, the meta device (shapes only: no value can be read back), or another backend
    this torch build cannot allocate on."""
    try:
        with warnings.catch_warnings():  # a deprecated name (mkldnn) warns: the answer stays one line
            warnings.simplefilter("ignore")
            device = torch.device(name)
    except RuntimeError as err:
        raise UsageError(f"--device {name!r} is not a device name ({err})") from err
    if device.type == "meta":
        raise UsageError(f"--device {name}: the meta device holds shapes but no values, so nothing can be decoded; "
                         "use cpu, cuda or mps")
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise UsageError(f"--device {name}: no such CUDA device (available: {torch.cuda.device_count()})")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError("--device mps: MPS is not available")
    if device.type not in ("cpu", "cuda", "mps"):  # xpu, xla, hpu...: one empty tensor says whether it works
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.empty(0, device=device)
        except Exception as err:  # backends fail with many types (AssertionError, NotImplementedError, ...)
            reason = (str(err).splitlines() or [type(err).__name__])[0].split(". ")[0]
            raise UsageError(f"--device {name}: this torch build cannot run on it ({reason})") from err
    return device


def model_help(loader: str, default: str) -> str:
    """``--model``'s help: the names ``loader`` takes (``MODEL_TABLES``), a model folder, and the default."""
    return " | ".join(MODEL_TABLES[loader]) + f" | a LLaDA, Dream or SDAR model folder (default: {default})"


def load_model_arg(name: str, device, dtype=None):
    """The model ``--model`` names; a folder that is missing or malformed is a usage error naming the file."""
    try:
        return load_model(name, device=device, dtype=dtype)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"--model {name}: {err}") from err


def check_output_file(path: Path | None, flag: str) -> None:
    """A file the command will write: not a directory, its folder created now (like --out), writable."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory (give a file name)")
    _regular_or_absent(path, flag, path)
    _writable_folder(path.parent, flag, path)
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path}: the file is read-only")


def check_output_dir(path: Path | None, flag: str, files: tuple[str, ...] = ()) -> None:
    """A folder the command will write into: not a file, created now, writable; each of the ``files`` it will
    write there absent or a regular file."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: is a file, not a folder")
    for name in files:
        _regular_or_absent(path / name, flag, path)
    _writable_folder(path, flag, path)


def _regular_or_absent(file: Path, flag: str, path: Path) -> None:
    """An output file that exists must be a regular file: a folder, a device (/dev/full) or a pipe is never
    replaced."""
    if file.exists() and not file.is_file():
        kind = "a folder" if file.is_dir() else "not a regular file (a device, pipe or socket)"
        where = "" if file == path else f" {file}"
        raise UsageError(f"{flag} {path}:{where} is {kind}; veridec writes regular files only and never replaces it")


def _writable_folder(folder: Path, flag: str, path: Path) -> None:
    """Create ``folder`` and prove it takes a file (a probe written and removed): permission bits alone miss a
    read-only file system, and root passes every ``os.access`` test."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        raise UsageError(f"{flag} {path}: a parent is a file ({err})") from err
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot create {folder} ({err.strerror or err})") from err
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".veridec-write-probe-"):
            pass
    except OSError as err:
        raise UsageError(f"{flag} {path}: {folder} is not writable ({err.strerror or err})") from err
