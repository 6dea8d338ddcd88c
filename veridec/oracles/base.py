"""Oracle mask predictors: models whose conditionals p(x_i | x_U) are exact, in float64.

Symbols are ids 0..V-1 and the mask id is V, so logits are [B, L, V + 1]. At a masked position the logits are
the log of the exact conditional marginal; at an observed position they are the point mass on the observed
token. Probability 0 (the mask column, impossible tokens) is the finite logit IMPOSSIBLE = -1e30, whose
softmax weight is exactly 0 in float64 but which keeps arithmetic on logits (classifier-free guidance
subtracts them) free of inf - inf (spec/models.md, M8).
"""

from __future__ import annotations

import torch

from ..models.interface import PredictorOutput, SpecialTokens, check_canvas


IMPOSSIBLE = -1e30


class Oracle:
    """Shared MaskPredictor plumbing; subclasses implement ``conditional_marginals``."""

    logit_shift = 0

    def __init__(self, num_symbols: int, max_length: int):
        if num_symbols < 2:
            raise ValueError(f"num_symbols must be >= 2, got {num_symbols}")
        self.num_symbols = num_symbols
        self.max_length = max_length
        self.special = SpecialTokens(mask_id=num_symbols)
        self.tokenizer = None

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + 1

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def conditional_marginals(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """x [B, L], attention_mask [B, L] bool -> p(x_i = v | observed) [B, L, V] (float64)."""
        raise NotImplementedError

    def __call__(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> PredictorOutput:
        mask = check_canvas(x, attention_mask, self.max_length)
        x = x.cpu()
        observed = x != self.special.mask_id  # [B, L]
        if (x[observed] >= self.num_symbols).any() or (x < 0).any():
            raise ValueError(f"x: token ids must lie in [0, {self.num_symbols}] (the last is the mask)")
        probs = self.conditional_marginals(x, mask.cpu())  # [B, L, V]
        point = torch.nn.functional.one_hot(x.clamp_max(self.num_symbols - 1), self.num_symbols).double()
        probs = torch.where(observed[..., None], point, probs)
        mask_column = torch.zeros(*x.shape, 1, dtype=torch.float64, device=probs.device)  # p(mask) = 0
        return PredictorOutput(torch.cat([probs, mask_column], dim=-1).log().clamp_min(IMPOSSIBLE))

    def _check_full(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Validate full sequences ``x`` [B, L] (symbol ids in [0, V) at every real position, no mask) and return
        their real positions [B, L] bool."""
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"x must be a LongTensor [B, L], got {type(x).__name__}")
        real = check_canvas(x, attention_mask, self.max_length)
        ids = x[real]
        if (ids == self.special.mask_id).any():
            raise ValueError("x: a full sequence is needed (no mask tokens)")
        outside = (ids < 0) | (ids >= self.num_symbols)
        if outside.any():
            raise ValueError(f"x: symbol ids must lie in [0, {self.num_symbols}), got {ids[outside][0].item()}")
        return real
