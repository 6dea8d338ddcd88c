"""An explicit joint distribution over V^L with conditionals by enumeration (tiny V and L only)."""

from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F

from .base import Oracle

MAX_OUTCOMES = 2_000_000


class EnumeratedJoint(Oracle):
    """p(x) given as a float64 tensor of shape [V] * L; every conditional is a ratio of sums over V^L."""

    def __init__(self, joint: torch.Tensor):
        joint = torch.as_tensor(joint, dtype=torch.float64, device="cpu")  # oracles compute on the host
        num_symbols, length = joint.shape[0], joint.dim()
        if any(size != num_symbols for size in joint.shape):
            raise ValueError(f"joint must have shape [V] * L, got {tuple(joint.shape)}")
        if joint.numel() > MAX_OUTCOMES:
            raise ValueError(f"joint has {joint.numel()} outcomes, more than {MAX_OUTCOMES}: use HMMOracle")
        if not torch.isfinite(joint).all():
            raise ValueError("joint must hold finite probabilities (it has NaN or infinite entries)")
        if (joint < 0).any() or abs(joint.sum().item() - 1) > 1e-9:
            raise ValueError("joint must be non-negative and sum to 1")
        super().__init__(num_symbols, length)
        self.length = length
        self.joint = joint
        self.flat = joint.reshape(-1)  # [N]
        self.outcomes = self.all_outcomes(num_symbols, length)  # [N, L], row n is flat index n
        self._onehot = F.one_hot(self.outcomes, num_symbols).double()  # [N, L, V]

    @staticmethod
    def all_outcomes(num_symbols: int, length: int) -> torch.Tensor:
        """Every sequence in V^L [V**L, L], in row-major (flat index) order."""
        return torch.tensor(list(itertools.product(range(num_symbols), repeat=length)), dtype=torch.long, device="cpu")

    @classmethod
    def random(cls, num_symbols: int, length: int, seed: int = 0, concentration: float = 0.5) -> "EnumeratedJoint":
        """A Dirichlet(concentration) draw over V^L: small concentrations give peaked joints."""
        draw = np.random.default_rng(seed).dirichlet(np.full(num_symbols**length, concentration))
        return cls(torch.from_numpy(draw).reshape([num_symbols] * length))

    def conditional_marginals(self, x, attention_mask):
        if x.shape[1] != self.length:
            raise ValueError(f"x: canvas length must be {self.length} for this joint, got {x.shape[1]}")
        if not attention_mask.all():
            raise ValueError("attention_mask: an EnumeratedJoint has a fixed length and takes no padding")
        weights = self.flat * self._consistent(x)  # [B, N]
        total = weights.sum(dim=1)  # [B]
        if (total <= 0).any():
            raise ValueError("x: the observed tokens have probability 0 under this joint")
        return torch.einsum("bn,nlv->blv", weights, self._onehot) / total[:, None, None]

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """log p(x) for full sequences x [B, L]."""
        self._check_full(x)
        if x.shape[1] != self.length:
            raise ValueError(f"x: sequence length must be {self.length} for this joint, got {x.shape[1]}")
        index = (x * self.num_symbols ** torch.arange(self.length - 1, -1, -1, device=x.device)).sum(dim=1)  # [B]
        return self.flat[index].log()

    def _consistent(self, x: torch.Tensor) -> torch.Tensor:
        """[B, N]: outcome n agrees with row b at every observed position."""
        observed = x != self.special.mask_id  # [B, L]
        agree = (self.outcomes[None] == x[:, None]) | ~observed[:, None]  # [B, N, L]
        return agree.all(dim=2)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """n exact samples [n, L]."""
        return self.outcomes[torch.multinomial(self.flat, n, replacement=True, generator=generator)]
