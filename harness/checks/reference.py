"""Verify checks for the reference samplers (spec/sequential.md). Margins are decision margins: how close the
closest decision was to a tie (confidence units for position choices, logits for token choices)."""

from __future__ import annotations

import torch

from veridec.canvas import initial_canvas
from veridec.compare import compare_traces
from veridec.numerics import tolerance
from veridec.reference.dream import diffusion_generate
from veridec.reference.fastdllm import generate as fastdllm_generate
from veridec.reference.llada import generate

from .registry import VerifyContext, check


def greedy_sequential_brute_force(model, prompt: torch.Tensor, gen_length: int, block_length: int) -> torch.Tensor:
    """One token per step at temperature 0, written as plainly as possible: in the current block, the masked
    position whose argmax token is most probable (lowest position on ties) takes that token."""
    mask_id, start = model.special.mask_id, prompt.shape[1]
    x = torch.cat([prompt, torch.full((1, gen_length), mask_id, dtype=torch.long, device=prompt.device)], dim=1)
    for begin in range(start, start + gen_length, block_length):
        for _ in range(block_length):
            probs = model(x).logits[0].double().softmax(-1)  # [L, V]
            candidates = [i for i in range(begin, begin + block_length) if x[0, i] == mask_id]
            best = max(candidates, key=lambda i: (probs[i].max().item(), -i))
            x[0, best] = probs[best].argmax()
    return x


def _prompts(ctx: VerifyContext, salt: int, count: int):
    """Random prompts drawn on the host (the same cases on every device), on the model's device."""
    g = ctx.generator(salt)
    for _ in range(count):
        length = int(torch.randint(2, 12, (1,), generator=g, device="cpu"))
        yield torch.randint(0, ctx.model.special.mask_id, (1, length), generator=g, device="cpu").to(ctx.model.device)


def _min_gap(trace) -> float:
    return min(gap for step in trace.steps for gap in step.selection_gaps)


@check("reference/llada-greedy-sequential", "SQ1.4: generate with one token per step = the brute-force greedy loop")
def llada_sequential(ctx: VerifyContext):
    gaps, ok = [], True
    for prompt in _prompts(ctx, 10, 2 if ctx.quick else 6):
        with torch.no_grad():
            canvas, trace = generate(ctx.model, prompt, steps=8, gen_length=8, block_length=4)
            ok &= torch.equal(canvas, greedy_sequential_brute_force(ctx.model, prompt, 8, 4))
        gaps.append(_min_gap(trace))
    return len(gaps), ok, min(gaps), "confidence gap", ""


@check("reference/dream-greedy-sequential", "SQ2.4: diffusion_generate, one token per step = the brute-force loop")
def dream_sequential(ctx: VerifyContext):
    gaps, ok = [], True
    for prompt in _prompts(ctx, 11, 2 if ctx.quick else 6):
        with torch.no_grad():
            canvas, trace = diffusion_generate(ctx.model, prompt, max_new_tokens=8, alg="maskgit_plus",
                                               tokens_per_step=1)
            ok &= torch.equal(canvas, greedy_sequential_brute_force(ctx.model, prompt, 8, 8))
        gaps.append(_min_gap(trace))
    return len(gaps), ok, min(gaps), "confidence gap", ""


@check("reference/batch-equals-single", "SQ0.3: a left-padded batch decodes as its rows alone (float64)")
def batch_equals_single(ctx: VerifyContext):
    if not ctx.exact:
        return 0, True, None, "", "not run: bit-for-bit only in float64 (--dtype float32); model/padding holds " \
                                  "padding at the forward level"
    prompts = list(_prompts(ctx, 12, 3))
    width = max(p.shape[1] for p in prompts)
    x = torch.zeros(len(prompts), width, dtype=torch.long, device=ctx.model.device)
    mask = torch.zeros(len(prompts), width, dtype=torch.long, device=ctx.model.device)
    for i, p in enumerate(prompts):
        x[i, width - p.shape[1]:], mask[i, width - p.shape[1]:] = p[0], 1
    ok, cases = True, 0
    for sampler in ("llada", "dream"):
        run = (lambda p, m: generate(ctx.higher, p, m, steps=4, gen_length=8, block_length=4)) if sampler == "llada" \
            else (lambda p, m: diffusion_generate(ctx.higher, p, m, max_new_tokens=8, steps=4, alg="entropy"))
        batch, trace = run(x, mask)
        for i, p in enumerate(prompts):
            ok &= torch.equal(batch[i, width - p.shape[1]:], run(p, None).canvas[0])
            cases += 1
    return cases, ok, None, "", "llada steps=4 and dream entropy steps=4 on 3 prompts"


@check("reference/precision-pair",
       "SQ0.4/N5: decodes in the model's dtype and one precision up agree up to ties within the logit error")
def precision_pair(ctx: VerifyContext):
    margins, ok = [], True
    for prompt in _prompts(ctx, 13, 2 if ctx.quick else 5):
        a = generate(ctx.higher, prompt, steps=16, gen_length=16, block_length=8, record_logits=True)
        b = generate(ctx.model, prompt, steps=16, gen_length=16, block_length=8, record_logits=True)
        error = max(compare_traces(a.trace, b.trace).max_logit_error or 0.0, _measured_error(ctx, prompt, 16))
        result = compare_traces(a.trace, b.trace, a.canvas, b.canvas, numeric_error=error)
        ok &= result.equivalent
        decisions = [m for step in a.trace.steps for m in step.margins[0] + step.selection_gaps]
        margins.append(min(decisions) - error)
    return len(margins), ok, min(margins), "decision margin - logit error", ""


@torch.no_grad()
def _measured_error(ctx: VerifyContext, prompt: torch.Tensor, gen_length: int) -> float:
    """The tolerance (numerics.tolerance) of the model's logits against one precision up on the prompt's initial
    canvas: the logit error before any common commit, where the traces measure none (a divergence at step 0)."""
    canvas, _ = initial_canvas(ctx.model, prompt, None, gen_length, ctx.model.special.mask_id)
    return tolerance(ctx.model(canvas).logits, ctx.higher(canvas).logits)


@check("reference/fastdllm-top1-is-sequential",
       "FD3: Fast-dLLM with a threshold nothing passes (c > 1) = LLaDA one token per step")
def fastdllm_top1(ctx: VerifyContext):
    gaps, ok = [], True
    for prompt in _prompts(ctx, 14, 2 if ctx.quick else 5):
        fast = fastdllm_generate(ctx.higher, prompt, steps=2, gen_length=16, block_length=8, threshold=1.0,
                                 inclusive=False)
        slow = generate(ctx.higher, prompt, steps=16, gen_length=16, block_length=8)
        ok &= torch.equal(fast.canvas, slow.canvas) and fast.trace.counters.full_forwards == 16
        gaps.append(_min_gap(slow.trace))
    dtype = str(next(ctx.higher.parameters()).dtype).removeprefix("torch.")
    return len(gaps), ok, min(gaps), "confidence gap", f"{dtype} model"
