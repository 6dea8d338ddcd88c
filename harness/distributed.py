"""Many processes, one table: under ``torchrun`` each rank takes its share of the units, rank 0 merges.

``torchrun --nproc-per-node N -m veridec.harness.cli exactness ... --out DIR`` sets WORLD_SIZE, RANK and the
rendezvous variables; ``Group`` then joins torch.distributed (gloo on CPU, nccl when the device is CUDA).
Without torchrun it is a group of one and every call is a no-op.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .arguments import UsageError

# How long a rank waits for the others, to join and at each collective (torch's own default for gloo);
# VERIDEC_COLLECTIVE_TIMEOUT overrides it. A wait at a collective lasts as long as another rank's share of units.
COLLECTIVE_SECONDS = 1800.0


class GroupError(RuntimeError):
    """The other ranks did not join, or stopped answering, within the collective timeout (a rank that never
    started, WORLD_SIZE set by hand without its peers, a rank killed or frozen)."""


def world_size() -> int:
    """WORLD_SIZE (1 when unset), an integer >= 1; above 1, RANK must be an integer in [0, WORLD_SIZE) too. A bad
    value is a usage error naming the variable (exit 2), before any rendezvous."""
    world = _environment_integer("WORLD_SIZE", "1", 1, None)
    if world > 1:
        _environment_integer("RANK", None, 0, world - 1)
    return world


def _environment_integer(name: str, default: str | None, low: int, high: int | None) -> int:
    text = os.environ.get(name, default)
    where = f"[{low}, {high}]" if high is not None else f">= {low}"
    why = f" (WORLD_SIZE={os.environ.get('WORLD_SIZE')})" if name == "RANK" else ""
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = None
    if value is None or value < low or (high is not None and value > high):
        raise UsageError(f"environment variable {name} must be an integer {'in ' if high is not None else ''}"
                         f"{where}{why}, got {text!r} (torchrun sets it; unset WORLD_SIZE for one process)")
    return value


def collective_seconds() -> float:
    text = os.environ.get("VERIDEC_COLLECTIVE_TIMEOUT", str(COLLECTIVE_SECONDS))
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise UsageError(f"environment variable VERIDEC_COLLECTIVE_TIMEOUT must be a finite number of seconds > 0, "
                         f"got {text!r}")
    return seconds


@dataclass
class Group:
    rank: int = 0
    world: int = 1

    @classmethod
    def join(cls, device: torch.device) -> "Group":
        """The process group torchrun describes in the environment (a group of one without it)."""
        world = world_size()
        if world == 1:
            return cls()
        if not dist.is_initialized():
            _init(world, "nccl" if device.type == "cuda" else "gloo")
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        return cls(dist.get_rank(), dist.get_world_size())

    def device(self, device: torch.device) -> torch.device:
        """Each rank's own GPU ("cuda" means cuda:LOCAL_RANK under torchrun); other devices unchanged."""
        if device.type == "cuda" and device.index is None and self.world > 1:
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return device

    def mine(self, index: int) -> bool:
        """Whether unit ``index`` (in a fixed order every rank shares) is this rank's: round robin."""
        return index % self.world == self.rank

    def barrier(self) -> None:
        if self.world > 1:
            with _named_wait(self.rank, "a barrier"):
                dist.barrier()

    def all_ok(self, ok: bool) -> bool:
        """Whether every rank reports ``ok`` (a rank that failed must not leave the others waiting)."""
        if self.world == 1:
            return ok
        on_gpu = dist.get_backend() == "nccl"
        flag = torch.tensor([0 if ok else 1], device=torch.device("cuda") if on_gpu else torch.device("cpu"))
        with _named_wait(self.rank, "the end of every rank's share"):
            dist.all_reduce(flag)
        return int(flag) == 0

    def leave(self, together: bool = False) -> None:
        """Leave the group; ``together``: after a barrier, so that no rank tears its connections down while a
        peer still works (rank 0 writes the results after the others are done). A rank leaving on an error
        does not wait: its peers may be gone."""
        if self.world > 1 and dist.is_initialized():
            if together:
                self.barrier()
            dist.destroy_process_group()

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.leave(together=kind is None)


def _init(world: int, backend: str) -> None:
    """Join the group, saying where and for how long it waits; a rendezvous that does not complete in time is a
    GroupError naming the address, the world size and this rank."""
    seconds, rank = collective_seconds(), os.environ.get("RANK", "?")
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    print(f"veridec: rank {rank} joining a group of {world} processes at {where} (waiting up to {seconds:.0f} s; "
          "VERIDEC_COLLECTIVE_TIMEOUT sets it)", file=sys.stderr)
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=seconds))
    except (RuntimeError, ValueError) as err:  # torch raises DistStoreError / DistNetworkError (RuntimeErrors)
        raise GroupError(f"rank {rank} of WORLD_SIZE={world} could not join the group at {where} within "
                         f"{seconds:.0f} s: {_first_line(err)} (did every rank start? WORLD_SIZE set by hand "
                         "needs its peers; torchrun starts them)") from err


@contextmanager
def _named_wait(rank: int, what: str):
    """A collective that fails (a peer killed, or silent past the timeout) is one GroupError naming this rank."""
    try:
        yield
    except RuntimeError as err:
        raise GroupError(f"rank {rank} stopped waiting for {what}: another rank was killed or stopped answering "
                         f"within {collective_seconds():.0f} s ({_first_line(err)})") from err


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
