"""A Fast-dLLM style decoder written from scratch in Fast-dLLM's calling convention: dual K/V cache, parallel
commits above a confidence threshold (or LLaDA's quota without one). It knows nothing of veridec: it calls
``model(x, use_cache=True)`` and ``model(block, past_key_values=..., use_cache=True, replace_position=...)``
exactly as code written against the official LLaDA modelling does. ``veridec check`` holds it against
veridec's dual-cache decoder:

    veridec check examples/fastdllm_dual.py:generate --against fastdllm --cache dual --model tiny-llada

Semantics (spec/fastdllm.md FD1-FD3, FD5, FD6; spec/sequential.md SQ1.3, SQ1.4): blocks left to right; each
block starts with a full forward that refreshes the cache and decides one step over the masks before the
block's end; then cached steps over the block until it has no mask. A step proposes argmax of the logits
(Gumbel-perturbed at temperature > 0, noise in float64), scores each proposal by its float64 softmax
probability, and commits the highest-scoring candidate plus every other with a score >= threshold; with
``threshold=None`` it commits the quota ``k_i`` of the block's schedule. Ties go to the lowest index.
``examples/fastdllm_dual_broken.py`` holds six realistic one-line bugs of it.
"""

import torch


class DualCacheDecoder:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, threshold, temperature):
        self.model, self.mask_id, self.threshold, self.temperature = model, mask_id, threshold, temperature
        self.nfe = 0

    def run(self, prompt, steps, gen_length, block_length):
        batch, prompt_length = prompt.shape
        x = torch.full((batch, prompt_length + gen_length), self.mask_id, dtype=torch.long, device=prompt.device)
        x[:, :prompt_length] = prompt
        blocks = gen_length // block_length
        for block in range(blocks):
            start, end = self.block_bounds(prompt_length, block, block_length)
            quota = self.schedule((x[:, start:end] == self.mask_id).sum(dim=1), steps // blocks)  # [B, S]
            cache = self.refresh(x, end, quota[:, 0])
            replace = self.replace_position(x, start, end)
            step = 1
            while self.block_open(x, start, end):
                logits = self.forward_block(x, start, end, cache, replace)
                window = x[:, start:end]  # a view: commits land in x
                self.commit(window, logits, window == self.mask_id, quota[:, min(step, quota.shape[1] - 1)])
                step += 1
        return x, self.nfe

    def block_bounds(self, prompt_length, block, block_length):
        start = prompt_length + block * block_length
        return start, start + block_length

    def schedule(self, masks, steps):
        """SQ1.3: k_i = floor(M / S) + [i < M mod S], per row; [B, S]."""
        i = torch.arange(steps, device=masks.device)[None]  # [1, S]
        return masks[:, None] // steps + (i < masks[:, None] % steps).long()

    def refresh(self, x, end, quota):
        """A full forward: the new cache, and one step over the masks before the block's end."""
        out = self.model(x, use_cache=True)
        self.nfe += 1
        candidates = x == self.mask_id
        candidates[:, end:] = False
        self.commit(x, out.logits, candidates, quota)
        return out.past_key_values

    def replace_position(self, x, start, end):
        replace = torch.zeros_like(x, dtype=torch.bool)
        replace[:, start:end] = True
        return replace

    def block_open(self, x, start, end):
        return bool((x[:, start:end] == self.mask_id).any())

    def forward_block(self, x, start, end, cache, replace):
        self.nfe += 1
        return self.model(x[:, start:end], past_key_values=cache, use_cache=True, replace_position=replace).logits

    def propose(self, logits):
        """SQ1.4 step 2: argmax of exp(l) / (-log u)^T with u uniform in float64 (plain argmax at T = 0)."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        logits = logits.double()
        u = torch.rand_like(logits, dtype=torch.float64)
        return (logits.exp() / (-torch.log(u)) ** self.temperature).argmax(dim=-1)

    def score(self, logits, proposal):
        """FD2: the float64 softmax probability of each proposal."""
        return torch.softmax(logits.double(), dim=-1).gather(-1, proposal[..., None]).squeeze(-1)

    def commit(self, tokens, logits, candidates, quota):
        """Write the chosen proposals into ``tokens`` [B, W] (in place) where ``candidates`` [B, W] allows."""
        proposal = self.propose(logits)  # [B, W]
        confidence = self.score(logits, proposal).masked_fill(~candidates, -torch.inf)  # [B, W]
        for row in range(tokens.shape[0]):
            order = torch.sort(confidence[row], descending=True, stable=True).indices  # ties: lowest index
            chosen = self.choose(confidence[row, order], int(quota[row]))
            for position in order[chosen].tolist():
                if proposal[row, position] != self.mask_id:
                    tokens[row, position] = proposal[row, position]

    def choose(self, ranked, quota):
        """Which ranks commit, given the confidences in rank order (-inf: not a candidate)."""
        real = ranked > -torch.inf
        if self.threshold is None:
            return real & (torch.arange(ranked.numel(), device=ranked.device) < quota)
        chosen = real & (ranked >= self.threshold)
        chosen[0] = real[0]  # the best candidate always commits
        return chosen


@torch.no_grad()
def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0, mask_id=126336,
             threshold=None):
    """Fast-dLLM's ``generate_with_dual_cache`` calling convention; returns (canvas [B, P + G], nfe)."""
    return DualCacheDecoder(model, mask_id, threshold, temperature).run(prompt, steps, gen_length, block_length)
