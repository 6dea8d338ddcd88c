"""Fast-dLLM v2's rule (spec/fastdllm_v2.md), shared by the reference and the optimized decoders: the settings and
their ranges (V2.2), the token shift of a block's logits (V2.1), the proposal at temperature 0 and with top-p above
it (V2.5), the commit rule {p > threshold} | {argmax} inside the current sub-block (V2.6), the boundary token
(V2.7) and the stop (V2.9)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import check_integer, check_range, is_integer
from .sdar import row_record

V2_DEFAULTS = dict(block_size=32, small_block_size=8, threshold=1.0, temperature=0.0, top_p=0.95)


@dataclass(frozen=True)
class V2Params:
    """The published ``generate``'s settings, with its names and defaults (V2.2); checked on construction."""

    max_new_tokens: int
    block_size: int = 32
    small_block_size: int = 8
    threshold: float = 1.0
    temperature: float = 0.0
    top_p: float = 0.95
    stop_token: int | None = None  # None: the model's EOS id

    def __post_init__(self):
        check_integer("max_new_tokens", self.max_new_tokens, 1)
        check_integer("block_size", self.block_size, 1)
        check_integer("small_block_size", self.small_block_size, 1)
        if self.max_new_tokens < self.block_size:
            raise ValueError(f"max_new_tokens {self.max_new_tokens} must be at least block_size {self.block_size}: "
                             "the published loops decode max_new_tokens // block_size blocks, so fewer tokens than a "
                             "block generate nothing (V2.3)")
        if self.block_size % self.small_block_size:
            raise ValueError(f"small_block_size {self.small_block_size} must divide block_size {self.block_size} "
                             f"(the block is decoded in block_size / small_block_size sub-blocks, V2.4)")
        check_range("threshold", self.threshold, 0.0, 1.0)
        check_range("temperature", self.temperature, 0.0)
        check_range("top_p", self.top_p, 0.0, 1.0, low_open=True)
        if self.stop_token is not None and not (is_integer(self.stop_token) and self.stop_token >= 0):
            raise ValueError(f"stop_token must be a token id >= 0 or None, got {self.stop_token!r}")

    def blocks_to(self, prompt_lengths: list[int]) -> int:
        """V2.3: the canvas ends with block ``max_new_tokens // block_size + max(P) // block_size`` (batch_sample's
        count; ``generate``'s for one row)."""
        return self.max_new_tokens // self.block_size + max(prompt_lengths) // self.block_size


def check_v2_model(model) -> None:
    """A model the v2 loop can run: one whose output at position i - 1 scores token i (logit shift 1, V2.1)."""
    if getattr(model, "logit_shift", None) != 1:
        raise ValueError(f"model: Fast-dLLM v2 needs a model whose output at position i - 1 scores token i (logit "
                         f"shift 1: the fastdllm_v2 or dream layout), got logit_shift "
                         f"{getattr(model, 'logit_shift', None)!r} (layout {getattr(model, 'layout', None)!r})")


def token_shift(raw: torch.Tensor) -> torch.Tensor:
    """V2.1, the published shift of one forward's outputs [B, W, V] (query j scores token j + 1): position i of
    the window is scored by output i - 1, its first position by its own output -> [B, W, V]."""
    return torch.cat([raw[:, :1], raw[:, :-1]], dim=1)


def propose(logits: torch.Tensor, temperature: float, top_p: float, generator=None):
    """V2.5: logits [B, W, V] -> (tokens [B, W], their probabilities [B, W], the law [B, W, V]). Temperature 0: the
    argmax of softmax(logits) (lowest id on ties); else a draw from softmax(logits / T) cut to its top-p nucleus and
    renormalised (``torch.multinomial`` row by row, on ``generator`` or the global stream)."""
    if temperature == 0:
        law = torch.softmax(logits, dim=-1)
        tokens = law.argmax(dim=-1)
    else:
        law = nucleus(torch.softmax(logits / temperature, dim=-1), top_p)
        tokens = torch.stack([torch.multinomial(row, 1, generator=generator)[:, 0] for row in law])  # [B, W]
    return tokens, law.gather(-1, tokens[..., None])[..., 0], law


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The published top-p cut of probs [..., V]: sorted decreasingly, a token goes when the cumulative mass before
    it already exceeds ``top_p`` (the first always stays); the rest renormalised."""
    ordered, order = torch.sort(probs, descending=True)
    cumulative = torch.cumsum(ordered, dim=-1)
    drop = cumulative > top_p
    drop[..., 1:] = drop[..., :-1].clone()
    drop[..., 0] = False
    kept = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0)
    return kept / kept.sum(dim=-1, keepdim=True)


def commits(confidence: torch.Tensor, masked: torch.Tensor, threshold: float) -> torch.Tensor:
    """V2.6: confidence, masked [B, W] (the current sub-block) -> the positions committed [B, W]: every mask whose
    confidence exceeds ``threshold`` strictly, and each row's most confident mask (lowest position on ties)."""
    scores = confidence.masked_fill(~masked, -torch.inf)  # [B, W]
    chosen = scores > threshold
    chosen[torch.arange(scores.shape[0], device=scores.device), scores.argmax(dim=-1)] = True
    return chosen & masked


def current_sub_block(masked: torch.Tensor, small_block_size: int) -> int | None:
    """V2.4: the first sub-block of a row's block that still has masks (masked [b]); None when none has."""
    left = masked.nonzero()
    return None if left.numel() == 0 else int(left[0, 0]) // small_block_size


def sub_block_step(logits, x, masked, params: V2Params, offset: int, mask_id: int, generator=None,
                   record_logits: bool = False):
    """One step on one row's sub-block: logits [W, V] (token-shifted, V2.1), tokens x [W], masked [W] -> the new
    tokens [W] and the row's step record (``veridec.trace.RowStep``, canvas positions from ``offset``)."""
    tokens, confidence, _ = propose(logits[None], params.temperature, params.top_p, generator)
    chosen = commits(confidence, masked[None], params.threshold)[0]  # [W]
    record = row_record(masked, chosen, tokens[0], confidence[0], logits, offset, mask_id, record_logits)
    return torch.where(chosen, tokens[0], x), record


def boundary_token(logits: torch.Tensor, position: int, record_logits: bool = False):
    """V2.7: the token at a block's first position from the logits [V] of the output before it: their argmax at
    every temperature (lowest id on ties) -> (the token, the row's step record with its probability)."""
    from ..trace import RowStep

    probs = torch.softmax(logits, dim=-1)
    token = int(probs.argmax())
    top2 = logits.double().topk(2).values
    return token, RowStep([position], [token], [float(probs[token])], [float(top2[0] - top2[1])], float("inf"),
                          [logits.float().tolist()] if record_logits else None)


def stop_reached(generated: torch.Tensor, stop_token: int, mask_id: int) -> bool:
    """V2.9: the generated tokens [n] of a row hold ``stop_token`` with no mask before its first occurrence."""
    found = (generated == stop_token).nonzero()
    return found.numel() > 0 and not bool((generated[:int(found[0, 0])] == mask_id).any())


def generated_tokens(row: torch.Tensor, prompt_length: int, stop_token: int) -> list[int]:
    """What the published loops return for a row (V2.9): the canvas [T] cut after the first stop token at or after
    the prompt, as a list."""
    tokens = row.tolist()
    for i in range(prompt_length, len(tokens)):
        if tokens[i] == stop_token:
            return tokens[:i + 1]
    return tokens


def v2_canvas(model, prompt: torch.Tensor, attention_mask, params: V2Params, mask_id: int):
    """V2.3: left-padded prompts [B, P] (``attention_mask`` 1 = real) laid out from position 0 each, then masks to
    the end of block ``params.blocks_to`` plus one slot for the last boundary token -> (canvas [B, T], the prompt
    lengths [B] as a list, the number of blocks). Refuses a prompt row holding the mask token and a canvas longer
    than the model's context."""
    from ..canvas import check_prompt

    check_prompt(model, prompt, attention_mask, mask_id)
    real = torch.ones_like(prompt, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    lengths = real.sum(dim=1).tolist()
    if bool((prompt[real] == mask_id).any()):
        raise ValueError("prompt: Fast-dLLM v2 takes no mask token in the prompt (a masked prompt position would be "
                         "decoded as generation, V2.3)")
    blocks = params.blocks_to(lengths)
    length = blocks * params.block_size + 1
    if length > model.max_length:
        raise ValueError(f"prompt {max(lengths)} + max_new_tokens {params.max_new_tokens} in whole blocks of "
                         f"{params.block_size}, plus the boundary slot, is {length} positions: more than the model's "
                         f"max_length {model.max_length}")
    x = torch.full((prompt.shape[0], length), mask_id, dtype=torch.long, device=prompt.device)  # [B, T]
    for row, n in enumerate(lengths):
        x[row, :n] = prompt[row][real[row]]
    return x, lengths, blocks
