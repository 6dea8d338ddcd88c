"""Dream's ``diffusion_generate``, slow and plain: one full forward per step (spec/sequential.md SQ2).

    from veridec.reference.dream import diffusion_generate
    canvas, trace = diffusion_generate(model, input_ids, attention_mask, max_new_tokens=64, steps=64,
                                       alg="entropy", temperature=0.2, top_p=0.95)
"""

from __future__ import annotations

import torch

from veridec.checks import check_generator
from veridec.canvas import check_prompt, initial_canvas
from veridec.decoding import check_logits
from veridec.rules.dream import DreamParams, dream_step
from veridec.trace import Decoded, Trace, record_step

DEFAULT_NEW_TOKENS = 20  # transformers' default max_length of 20, counted after the prompt as Dream does


@torch.no_grad()
def diffusion_generate(model, inputs: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                       max_length: int | None = None, max_new_tokens: int | None = None, steps: int = 512,
                       eps: float = 1e-3, alg: str = "origin", alg_temp: float | None = None,
                       temperature: float = 0.0, top_p: float | None = None, top_k: int | None = None,
                       mask_token_id: int | None = None, tokens_per_step: int | None = None, ties: str = "lowest",
                       generator: torch.Generator | None = None, generation_tokens_hook_func=None,
                       generation_logits_hook_func=None, record_logits: bool = False) -> Decoded:
    """Decode ``inputs`` [B, P] (left-padded) -> Decoded(canvas [B, total], trace).

    Total length: ``max_new_tokens`` + P if given, else ``max_length``, else P + 20. Masks inside the prompt
    are filled too (infilling). Hooks have Dream's signatures: tokens hook (step, x, logits) -> x, logits hook
    (step, x, logits) -> logits.
    """
    check_generator(generator)
    params = DreamParams(steps, eps, alg, alg_temp, temperature, top_p, top_k, tokens_per_step, ties)
    mask_id = model.special.mask_id if mask_token_id is None else mask_token_id
    check_prompt(model, inputs, attention_mask, mask_id)
    batch, prompt_len = inputs.shape
    total = _total_length(prompt_len, max_length, max_new_tokens)
    x, attention_mask = initial_canvas(model, inputs, attention_mask, total - prompt_len, mask_id)
    tokens_hook = generation_tokens_hook_func or (lambda step, x, logits: x)
    logits_hook = generation_logits_hook_func or (lambda step, x, logits: logits)
    timesteps = torch.linspace(1, eps, steps + 1, device=x.device)
    trace = Trace("dream", {**params.__dict__, "mask_id": mask_id, "total_length": total}, prompt_len, batch)
    x = tokens_hook(None, x, None)
    step = 0
    while _continues(step, x, mask_id, params):
        logits = logits_hook(step, x, model(x, attention_mask=attention_mask).logits)
        trace.counters.add_forward(rows=batch, queries=total)
        check_logits(logits, trace.progress)
        result = dream_step(logits, x, step=step, timesteps=timesteps, params=params, mask_id=mask_id,
                            generator=generator)
        new_x = tokens_hook(step, result.x, logits)
        order = _with_hook_commits(result.order, result.x, new_x, mask_id)
        record_step(trace, 0, x, new_x, mask_id, result.confidence, result.choice_logits, order, record_logits)
        x, step = new_x, step + 1
    return Decoded(x, trace)


def _with_hook_commits(order: list[list[int]], sampled: torch.Tensor, hooked: torch.Tensor,
                       mask_id: int) -> list[list[int]]:
    """The rule's commit order per row, then the masks the tokens hook filled (ascending): they are this step's
    commits too (spec SQ2.7). sampled / hooked [B, L]: the canvas before and after the hook."""
    filled = (sampled == mask_id) & (hooked != mask_id)  # [B, L]
    return [ranked + [p for p in row.nonzero().flatten().tolist() if p not in ranked]
            for ranked, row in zip(order, filled)]


def _total_length(prompt_len: int, max_length: int | None, max_new_tokens: int | None) -> int:
    if max_new_tokens is not None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        total = prompt_len + max_new_tokens
    elif max_length is not None:
        total = max_length
    else:
        total = prompt_len + DEFAULT_NEW_TOKENS
    if total <= prompt_len:
        raise ValueError(f"max_length ({total}) must exceed the prompt length ({prompt_len})")
    return total


def _continues(step: int, x: torch.Tensor, mask_id: int, params: DreamParams) -> bool:
    """Scheduled runs take exactly ``steps`` steps; tokens_per_step runs go until no mask is left."""
    if params.tokens_per_step is None:
        return step < params.steps
    if step > x.shape[1]:  # every step commits >= 1 token unless the model keeps predicting the mask itself
        raise RuntimeError(f"tokens_per_step decoding stalled after {step} steps: the model predicts the mask token")
    return bool((x == mask_id).any())
