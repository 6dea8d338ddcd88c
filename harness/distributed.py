"""Many processes, one table: under ``torchrun`` each rank takes its share of the units, rank 0 merges.

``torchrun --nproc-per-node N -m veridec.harness.cli exactness ... --out DIR`` sets WORLD_SIZE, RANK and the
rendezvous variables; ``Group`` then joins torch.distributed (gloo on CPU, nccl when the device is CUDA).
Without torchrun it is a group of one and every call is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Group:
    rank: int = 0
    world: int = 1

    @classmethod
    def join(cls, device: torch.device) -> "Group":
        """The process group torchrun describes in the environment (a group of one without it)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world == 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
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
            dist.barrier()

    def all_ok(self, ok: bool) -> bool:
        """Whether every rank reports ``ok`` (a rank that failed must not leave the others waiting)."""
        if self.world == 1:
            return ok
        on_gpu = dist.get_backend() == "nccl"
        flag = torch.tensor([0 if ok else 1], device=torch.device("cuda") if on_gpu else torch.device("cpu"))
        dist.all_reduce(flag)
        return int(flag) == 0

    def leave(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()
