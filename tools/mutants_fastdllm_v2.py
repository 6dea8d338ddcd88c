"""A mutation catalogue for Fast-dLLM v2 (spec/fastdllm_v2.md V2.1-V2.12): the rule ``veridec.rules.fastdllm_v2``
(settings, token shift, top-p cut, proposal, commit rule, sub-block order, boundary token, stop, the canvas end),
the reference and prefix-cached decoders, the ``fastdllm-v2`` convention and the check's family (the defect
predictor, the target's trace). Each mutant is a one-line mistake placed where it would let a wrong decode or a
wrong verdict pass silently.

    python -m tools.mutation --catalogue tools/mutants_fastdllm_v2.py --related-only
"""

from __future__ import annotations

from tools.mutants import Mutant

UNIT = "tests/test_fastdllm_v2.py"
GOLDEN = "tests/test_fastdllm_v2_golden.py"
MODELS = "tests/test_fastdllm_v2_models.py"
CHECK = "tests/test_fastdllm_v2_check.py"
RULE = (UNIT, GOLDEN)
RULE_FILE = "veridec/rules/fastdllm_v2.py"

MUTANTS: list[Mutant] = [
    Mutant("v2-sub-block-not-dividing", RULE_FILE, "        if self.block_size % self.small_block_size:\n",
           "        if self.block_size % self.small_block_size and False:\n",
           "a sub-block size that does not divide the block is accepted", "spec/fastdllm_v2.md V2.2", RULE),
    Mutant("v2-threshold-strict-off", RULE_FILE, "    chosen = scores > threshold\n",
           "    chosen = scores >= threshold\n", "a confidence equal to the threshold commits",
           "spec/fastdllm_v2.md V2.6", RULE),
    Mutant("v2-no-argmax", RULE_FILE,
           "    chosen[torch.arange(scores.shape[0], device=scores.device), scores.argmax(dim=-1)] = True\n", "",
           "a step with no confidence above the threshold commits nothing", "spec/fastdllm_v2.md V2.6", RULE),
    Mutant("v2-commits-unmasked", RULE_FILE, "    return chosen & masked\n", "    return chosen\n",
           "an empty sub-block commits its first position", "spec/fastdllm_v2.md V2.6", RULE),
    Mutant("v2-no-token-shift", RULE_FILE, "    return torch.cat([raw[:, :1], raw[:, :-1]], dim=1)\n",
           "    return raw\n", "a block's position i is scored by output i", "spec/fastdllm_v2.md V2.1", RULE),
    Mutant("v2-top-p-drops-crossing", RULE_FILE, "    drop[..., 1:] = drop[..., :-1].clone()\n", "",
           "the token that crosses top_p is cut", "spec/fastdllm_v2.md V2.5", RULE),
    Mutant("v2-boundary-sampled", RULE_FILE, "    token = int(probs.argmax())\n",
           "    token = int(torch.multinomial(probs, 1))\n", "the boundary token is drawn, not the argmax",
           "spec/fastdllm_v2.md V2.7", RULE),
    Mutant("v2-last-sub-block-first", RULE_FILE,
           "    return None if left.numel() == 0 else int(left[0, 0]) // small_block_size\n",
           "    return None if left.numel() == 0 else int(left[-1, 0]) // small_block_size\n",
           "sub-blocks are decoded right to left", "spec/fastdllm_v2.md V2.4", RULE),
    Mutant("v2-stop-ignores-masks", RULE_FILE,
           "    return found.numel() > 0 and not bool((generated[:int(found[0, 0])] == mask_id).any())\n",
           "    return found.numel() > 0\n", "a row stops at a stop token with masks before it",
           "spec/fastdllm_v2.md V2.9", RULE),
    Mutant("v2-confidence-before-cut", RULE_FILE,
           "    return tokens, law.gather(-1, tokens[..., None])[..., 0], law\n",
           "    return tokens, torch.softmax(logits, -1).gather(-1, tokens[..., None])[..., 0], law\n",
           "the confidence is the unfiltered softmax's, not the nucleus law's", "spec/fastdllm_v2.md V2.5", RULE),
    Mutant("v2-blocks-from-shortest", RULE_FILE,
           "        return self.max_new_tokens // self.block_size + max(prompt_lengths) // self.block_size\n",
           "        return self.max_new_tokens // self.block_size + min(prompt_lengths) // self.block_size\n",
           "the canvas ends after the shortest prompt's block", "spec/fastdllm_v2.md V2.3", RULE),
    Mutant("v2-reference-sees-next-block", "reference/fastdllm_v2.py",
           "            logits = model(x[:, :end], block_size=b).logits[0, start:end]  # [b, V] token-aligned (V2.1)\n",
           "            logits = model(x[:, :end], block_size=2 * b).logits[0, start:end]  # [b, V]\n",
           "the reference's step attends with blocks twice as long", "spec/fastdllm_v2.md V2.5", RULE),
    Mutant("v2-optimized-no-prefill-boundary", "optimized/fastdllm_v2.py",
           "        if self.stopped[row] or self.x[row, position] != self.mask_id:\n",
           "        if self.stopped[row] or self.x[row, position] != self.mask_id or position < self.x.shape[1] - 1:\n",
           "only the last slot gets a boundary token", "spec/fastdllm_v2.md V2.7", RULE),
    Mutant("v2-block-cache-never-refreshes", "optimized/fastdllm_v2.py",
           "        if fresh is None or self.x[0, lo] == self.mask_id:\n", "        if fresh is None:\n",
           "the block cache is refreshed at the block's first step only", "spec/fastdllm_v2.md V2.8", RULE),
    Mutant("v2-convention-sees-later-blocks", "veridec/adapters.py",
           "        sees = (keys[None] // block_size <= positions[:, None] // block_size) & (keys[None] < stored)  "
           "# [Q, L]\n",
           "        sees = keys[None] < stored  # [Q, L]\n",
           "the convention lets a stored key of a later block be seen", "spec/fastdllm_v2.md V2.1", (CHECK,)),
    Mutant("v2-defect-top-p-never", "testing/families/fastdllm_v2.py",
           "    if rows > 1 and params.temperature > 0:\n", "    if rows > 1 and params.temperature > 1:\n",
           "#64's raise is predicted above temperature 1 only", "spec/fastdllm_v2.md V2.11.1", (GOLDEN, CHECK)),
    Mutant("v2-defect-mask-32-never", "testing/families/fastdllm_v2.py", "    if 32 % b:\n", "    if 64 % b:\n",
           "the mask of blocks of 32 is predicted for blocks not dividing 64 only", "spec/fastdllm_v2.md V2.11.6",
           (GOLDEN,)),
    Mutant("v2-target-keeps-boundaries", "testing/families/fastdllm_v2.py",
           "    keep = [[i for i, p in enumerate(positions) if p % block_size] for positions in step.positions]\n",
           "    keep = [list(range(len(positions))) for positions in step.positions]\n",
           "the target's trace keeps the boundary commits the recording never sees", "spec/fastdllm_v2.md V2.11a",
           (CHECK,)),
]
