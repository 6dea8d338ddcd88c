"""A port of Fast-dLLM's threshold decoder (no cache: ``model(x).logits`` every step, LLaDA's calling convention,
greedy) meant to run on its own model in a lower precision, and the model factories that load it so. Tier A's
decision-flip budget (spec/exactness.md EC13) holds it against veridec's ``fastdllm`` decoder on veridec's model
at full precision: a decision may differ only where rounding could have flipped it.

    veridec check examples/fastdllm_port.py:generate --against fastdllm --model tiny-llada --tier A \\
        --candidate-model examples/fastdllm_port.py:load_bfloat16 --flip-budget

Semantics (spec/fastdllm.md FD1-FD3; spec/sequential.md SQ1.3): blocks left to right, each decoded until it has
no mask (without a threshold: its share of the steps); a step proposes the argmax at every mask before the
block's end, scores it by its float64 softmax
probability, and commits the best candidate plus every other scoring >= ``threshold`` (without one, the block's
quota k_i of step i); ties to the lowest position. ``threshold_raised`` reads the threshold 0.15 higher and
``weakest_first`` commits the least confident candidates: real bugs the budget must not excuse.
"""

import torch

from own_model import MyLLaDA


def generate(model, prompt, steps=128, gen_length=128, block_length=128, threshold=None, mask_id=126336,
             raise_threshold=0.0, descending=True):
    x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id, dtype=prompt.dtype,
                                      device=prompt.device)], dim=1)
    blocks = gen_length // block_length
    per_block = steps // blocks
    limit = None if threshold is None else threshold + raise_threshold
    for block in range(blocks):
        end = prompt.shape[1] + (block + 1) * block_length
        masks = (x[:, end - block_length:end] == mask_id).sum(dim=1)  # [B] the block's masks at its start
        step = 0
        while bool((x[:, end - block_length:end] == mask_id).any()):  # each row until its block has no mask
            i = min(step, per_block - 1)  # the last quota repeats (FD3)
            quota = masks // per_block + (i < masks % per_block).long()  # [B] SQ1.3
            x = commit(x, model(x).logits, end - block_length, end, quota, limit, mask_id, descending)
            step += 1
    return x


def commit(x, logits, start, end, quota, threshold, mask_id, descending=True):
    """One step: the argmax at every mask before ``end`` of x [B, L], scored by its float64 probability; a row
    whose block [start, end) is done takes no step."""
    tokens = logits.argmax(dim=-1)  # [B, L]
    confidence = torch.softmax(logits.double(), dim=-1).gather(-1, tokens[..., None])[..., 0]  # [B, L]
    candidates = x == mask_id
    candidates[:, end:] = False
    confidence = confidence.masked_fill(~candidates, -torch.inf if descending else torch.inf)
    for row in range(x.shape[0]):
        if not bool(candidates[row, start:end].any()) or int(quota[row]) == 0 and threshold is None:
            continue
        order = torch.sort(confidence[row], descending=descending, stable=True).indices  # ties: lowest position
        ranked = confidence[row, order]
        real = candidates[row, order]
        chosen = real & (ranked >= threshold) if threshold is not None else \
            real & (torch.arange(ranked.numel(), device=x.device) < int(quota[row]))
        chosen[0] = real[0]  # the best candidate always commits
        x[row, order[chosen]] = tokens[row, order[chosen]]
    return x


def threshold_raised(model, prompt, steps=128, gen_length=128, block_length=128, threshold=None, mask_id=126336):
    """The threshold read 0.15 higher than given: fewer parallel commits, a bug beyond bf16's rounding."""
    return generate(model, prompt, steps, gen_length, block_length, threshold, mask_id, raise_threshold=0.15)


def weakest_first(model, prompt, steps=128, gen_length=128, block_length=128, threshold=None, mask_id=126336):
    """Candidates ranked ascending: the least confident commits first."""
    return generate(model, prompt, steps, gen_length, block_length, threshold, mask_id, descending=False)


def _load(source, dtype):
    from veridec.testing import load_check_model

    return MyLLaDA(load_check_model(source).to(dtype))


def load_bfloat16(source="tiny-llada"):
    """The port's model: veridec's checkpoint in bfloat16 (its reference runs in float32)."""
    return _load(source, torch.bfloat16)


def load_float32(source="tiny-llada"):
    """The port's model in float32, for a reference run in float64."""
    return _load(source, torch.float32)
