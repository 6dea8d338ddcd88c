"""The June 2025 Fast-dLLM loops (NVlabs/Fast-dLLM commit 24cc59e) written from scratch, defects and all: what a
user's faithful port of the official file does. Fast-dLLM's calling convention; ``veridec check`` against
``fastdllm-2025-06`` passes it, counting apart the cases where it fails exactly as the official code does:

    veridec check examples/fastdllm_june2025.py:generate_with_dual_cache --against fastdllm-2025-06 \\
        --convention fastdllm --cache dual --max-batch 1 --no-padding --model tiny-llada

Semantics (spec/fastdllm.md FD1-FD3, FD5, FD6 with ``loop="june2025"``, FD9): one canvas row (a batch of two fails
when the prompt is copied in, FD9.5); blocks left to right, each with LLaDA's quota schedule of S = steps /
blocks entries; a step commits the best candidate and every other at or above ``threshold``, or, without one,
the schedule's entry for this step, indexed plainly (a block that outlives its schedule raises IndexError,
FD9.1). The cached loops refresh, then always make one cached call and test "block done?" after each (the June
2025 order); a step whose proposals are all the mask token commits nothing, and at temperature 0 the loop
repeats it forever (FD9.2).
"""

import torch


def add_noise(logits, temperature):
    """SQ1.4 step 2: exp(l) / (-log u)^T with u uniform in float64 (the logits themselves at T = 0)."""
    if temperature == 0:
        return logits
    logits = logits.double()
    return logits.exp() / (-torch.log(torch.rand_like(logits, dtype=torch.float64))) ** temperature


def schedule(block_masks, steps):
    """LLaDA's quota: floor(M / S) per step, the first M mod S steps one more; [B, S]."""
    base, extra = block_masks // steps, block_masks % steps
    quota = base[:, None].repeat(1, steps)
    for row in range(quota.shape[0]):
        quota[row, : int(extra[row])] += 1
    return quota


def step(logits, tokens, candidates, quota, threshold, temperature, remasking):
    """One step over ``tokens`` [1, W] in place: the proposals of the chosen candidates are written in."""
    proposal = add_noise(logits, temperature).argmax(dim=-1)  # [1, W]
    if remasking == "low_confidence":
        score = torch.softmax(logits.double(), dim=-1).gather(-1, proposal[..., None]).squeeze(-1)
    else:
        score = torch.rand(proposal.shape, device=proposal.device)
    score = torch.where(candidates, score, -torch.inf)
    count = int(candidates.sum()) if threshold is not None else int(quota[0])
    best = torch.topk(score[0], k=count).indices
    keep = [p for rank, p in enumerate(best.tolist()) if threshold is None or rank == 0 or score[0, p] >= threshold]
    proposal = torch.where(candidates, proposal, tokens)
    tokens[0, keep] = proposal[0, keep]


def canvas(prompt, gen_length, mask_id):
    x = torch.full((1, prompt.shape[1] + gen_length), mask_id, dtype=torch.long, device=prompt.device)
    x[:, : prompt.shape[1]] = prompt  # a second prompt row does not fit: RuntimeError
    return x


@torch.no_grad()
def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
             remasking="low_confidence", mask_id=126336, threshold=None):
    """No cache: a full forward per step; returns (canvas, forwards)."""
    x, nfe = canvas(prompt, gen_length, mask_id), 0
    per_block = steps // (gen_length // block_length)
    for start in range(prompt.shape[1], x.shape[1], block_length):
        end = start + block_length
        quota, i = schedule((x[:, start:end] == mask_id).sum(dim=1), per_block), 0
        while True:
            nfe += 1
            candidates = x == mask_id
            candidates[:, end:] = False
            logits = model(x).logits
            step(logits, x, candidates, quota[:, i] if threshold is None else None, threshold, temperature, remasking)
            i += 1
            if not (x[:, start:end] == mask_id).any():
                break
    return x, nfe


def cached(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id, threshold, dual):
    x, nfe = canvas(prompt, gen_length, mask_id), 0
    per_block = steps // (gen_length // block_length)
    for start in range(prompt.shape[1], x.shape[1], block_length):
        end = start + block_length
        quota = schedule((x[:, start:end] == mask_id).sum(dim=1), per_block)
        out = model(x, use_cache=True)
        nfe += 1
        candidates = x == mask_id
        candidates[:, end:] = False
        step(out.logits, x, candidates, quota[:, 0] if threshold is None else None, threshold, temperature,
             remasking)
        kv = out.past_key_values if dual else [tuple(t[:, :, :start] for t in layer) for layer in out.past_key_values]
        replace = torch.zeros_like(x, dtype=torch.bool)
        replace[:, start:end] = True
        i = 1
        while True:  # the June 2025 order: forward first, then "block done?"
            nfe += 1
            window = x[:, start:end] if dual else x[:, start:]
            logits = model(window, past_key_values=kv, use_cache=True, **({"replace_position": replace} if dual
                                                                        else {})).logits
            if not dual:
                add_noise(logits, temperature)  # drawn and discarded, as the official prefix loop does
            candidates = window == mask_id
            candidates[:, end - start:] = False
            step(logits, window, candidates, quota[:, i] if threshold is None else None, threshold, temperature,
                 remasking)
            if not (x[:, start:end] == mask_id).any():
                break
            i += 1
    return x, nfe


@torch.no_grad()
def generate_with_prefix_cache(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                               remasking="low_confidence", mask_id=126336, threshold=None):
    return cached(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id, threshold, False)


@torch.no_grad()
def generate_with_dual_cache(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                             remasking="low_confidence", mask_id=126336, threshold=None):
    return cached(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id, threshold, True)
