"""A hidden Markov model as a mask predictor: exact conditionals for any mask pattern by forward-backward.

With hidden states z_t and emissions x_t, a masked position contributes likelihood 1 (it is marginalised), an
observed one E[z, x_t]. Then p(z_t | x_U) is proportional to alpha_t * beta_t and
p(x_t = v | x_U) = sum_z p(z_t = z | x_U) E[z, v] for masked t. A left-padded row starts its chain at its
first real position.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import Oracle
from .enumerated import EnumeratedJoint


def _stochastic(name: str, matrix: torch.Tensor) -> torch.Tensor:
    matrix = torch.as_tensor(matrix, dtype=torch.float64, device="cpu")  # oracles compute on the host
    if (matrix < 0).any() or not torch.allclose(matrix.sum(-1), torch.ones_like(matrix.sum(-1)), atol=1e-9):
        raise ValueError(f"{name} must be non-negative with rows summing to 1")
    return matrix


class HMMOracle(Oracle):
    def __init__(self, initial, transition, emission, max_length: int = 4096):
        self.initial = _stochastic("initial", initial)  # [S]
        self.transition = _stochastic("transition", transition)  # [S, S], row = from
        self.emission = _stochastic("emission", emission)  # [S, V]
        num_states = self.initial.shape[0]
        if self.transition.shape != (num_states, num_states) or self.emission.shape[0] != num_states:
            raise ValueError(f"shapes disagree: initial {tuple(self.initial.shape)}, transition "
                             f"{tuple(self.transition.shape)}, emission {tuple(self.emission.shape)}")
        super().__init__(self.emission.shape[1], max_length)
        self.num_states = num_states

    @classmethod
    def random(cls, num_states: int, num_symbols: int, seed: int = 0, concentration: float = 0.3,
               max_length: int = 4096) -> "HMMOracle":
        """Dirichlet(concentration) rows; small concentrations give near-deterministic stretches."""
        rng = np.random.default_rng(seed)
        draw = lambda rows, cols: torch.from_numpy(rng.dirichlet(np.full(cols, concentration), size=rows))  # noqa: E731
        return cls(draw(1, num_states)[0], draw(num_states, num_states), draw(num_states, num_symbols), max_length)

    def to_dict(self) -> dict[str, list]:
        """JSON-ready parameters (for shipping an HMM next to a model trained on its samples)."""
        return {"initial": self.initial.tolist(), "transition": self.transition.tolist(),
                "emission": self.emission.tolist()}

    @classmethod
    def from_dict(cls, params: dict, max_length: int = 4096) -> "HMMOracle":
        return cls(params["initial"], params["transition"], params["emission"], max_length)

    # ------------------------------------------------------------------ exact computations
    def conditional_marginals(self, x, attention_mask):
        like = self._likelihoods(x, attention_mask)  # [B, L, S]
        alpha, _ = self._forward(like, attention_mask)
        beta = self._backward(like)
        posterior = alpha * beta  # [B, L, S]
        posterior = posterior / posterior.sum(-1, keepdim=True)
        return posterior @ self.emission  # [B, L, V]

    def log_likelihood(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """log p(x) [B] of full sequences (only the real, unpadded positions count)."""
        mask = self._check_full(x, attention_mask)
        _, log_scale = self._forward(self._likelihoods(x, mask), mask)
        return log_scale.sum(dim=1)

    def sample(self, n: int, length: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """n exact samples [n, length]."""
        state = torch.multinomial(self.initial.expand(n, -1), 1, generator=generator)[:, 0]  # [n]
        symbols = []
        for t in range(length):
            if t:
                state = torch.multinomial(self.transition[state], 1, generator=generator)[:, 0]
            symbols.append(torch.multinomial(self.emission[state], 1, generator=generator)[:, 0])
        return torch.stack(symbols, dim=1)

    def to_enumerated(self, length: int) -> EnumeratedJoint:
        """The same distribution over V^length as an explicit joint (for tests on tiny sizes)."""
        outcomes = EnumeratedJoint.all_outcomes(self.num_symbols, length)  # [N, L]
        log_p = self.log_likelihood(outcomes)  # [N]
        return EnumeratedJoint(log_p.exp().reshape([self.num_symbols] * length))

    # ------------------------------------------------------------------ forward-backward
    def _likelihoods(self, x, mask):
        """[B, L, S]: E[z, x_t] at observed real positions, 1 at masked or padded ones."""
        observed = (x != self.special.mask_id) & mask  # [B, L]
        emitted = self.emission.T[x.clamp_max(self.num_symbols - 1)]  # [B, L, S]
        return torch.where(observed[..., None], emitted, torch.ones_like(emitted))

    def _forward(self, like, mask):
        """Scaled forward pass: alpha [B, L, S] (each row normalised) and log scale factors [B, L]."""
        first_real = mask.int().argmax(dim=1)  # [B]
        alphas, log_scales = [], []
        for t in range(like.shape[1]):
            starts = (t <= first_real)[:, None]  # [B, 1]: pad or first real position
            prior = self.initial.expand_as(like[:, t]) if t == 0 else alphas[-1] @ self.transition
            joint = torch.where(starts, self.initial.expand_as(prior), prior) * like[:, t]  # [B, S]
            scale = joint.sum(dim=1, keepdim=True)  # [B, 1]
            if (scale <= 0).any():
                raise ValueError("x: the observed tokens have probability 0 under this HMM")
            alphas.append(joint / scale)
            log_scales.append(scale[:, 0].log())
        return torch.stack(alphas, dim=1), torch.stack(log_scales, dim=1)

    def _backward(self, like):
        """Scaled backward pass: beta [B, L, S], each row normalised (scales cancel in posteriors)."""
        beta = torch.ones_like(like[:, -1])
        betas = [beta]
        for t in range(like.shape[1] - 2, -1, -1):
            beta = (like[:, t + 1] * beta) @ self.transition.T  # [B, S]
            beta = beta / beta.sum(dim=1, keepdim=True)
            betas.append(beta)
        return torch.stack(betas[::-1], dim=1)
