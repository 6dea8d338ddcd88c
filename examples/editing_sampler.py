"""LLaDA2.1's block sampler with token edits (the standalone ``LLaDA21Sampler.sample`` of ZHZisZZ/dllm) written
from scratch in its calling convention (``model(x, attention_mask=..., position_ids=...).logits`` with an additive
block-causal mask, one row, no cache). It knows nothing of veridec. ``veridec check`` holds it against veridec's
editing decoder event for event (tier E):

    veridec check examples/editing_sampler.py:generate --against editing --model tiny-llada

Semantics (spec/editing.md ED1-ED5): the canvas is the prompt then masks up to a whole number of blocks, L =
ceil((P + max_new_tokens) / b) b, all of it returned (ED1). Blocks floor(P / b) .. L / b - 1 are decoded in turn,
each forward on the window x[:, :(k + 1) b] with positions 0 .. (k + 1) b - 1 and block-causal attention (ED2).
A step proposes at the block's b positions: at T = 0 the argmax of softmax(logits) in the logits' dtype, q its
probability; at T > 0 l / T, top-k (ties kept), top-p (drop when the mass before exceeds top_p), one
``torch.multinomial``, q under the filtered law (ED3). It transfers the masks with q > threshold, or, when fewer
than num_to_transfer pass, the min(num_to_transfer, |A|) most confident masks (ties to the lower position); it
edits every non-mask, non-prompt position with q > editing_threshold whose proposal differs from its token (ED4).
A block stops before the forward once it has counted more than max_post_steps maskless passes, or after a maskless
step that edits nothing; with eos_early_stop the decode stops after a block that leaves x[P:(k + 1) b] maskless
and holding the EOS (ED5). ``examples/editing_sampler_broken.py`` holds four variants that change decisions.
"""

import torch


def generate(model, prompt, max_new_tokens=128, block_size=32, temperature=0.0, top_p=None, top_k=None,
             threshold=0.95, editing_threshold=0.9, max_post_steps=16, num_to_transfer=1, eos_early_stop=False,
             mask_id=126336):
    return EditingSampler(model, mask_id, temperature, top_p, top_k, threshold, editing_threshold, max_post_steps,
                          num_to_transfer).run(prompt, max_new_tokens, block_size, eos_early_stop)


def _require(ok, name, value, what):
    if not ok:
        raise ValueError(f"{name} must be {what}, got {value!r}")


class EditingSampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, temperature, top_p, top_k, threshold, editing_threshold, max_post_steps,
                 num_to_transfer):
        self.model, self.mask_id, self.temperature, self.top_p, self.top_k = model, mask_id, temperature, top_p, top_k
        self.threshold, self.editing_threshold = threshold, editing_threshold
        self.max_post_steps, self.num_to_transfer = max_post_steps, num_to_transfer
        self.eos_id = model.config.eos_token_id

    def run(self, prompt, max_new_tokens, block_size, eos_early_stop):
        """ED1, ED5: the canvas, the blocks in turn, the early stop on EOS."""
        _require(torch.is_tensor(prompt) and prompt.dim() == 2 and prompt.shape[0] == 1, "prompt",
                 getattr(prompt, "shape", prompt), "one row [1, P]")
        _require(max_new_tokens >= 1, "max_new_tokens", max_new_tokens, ">= 1")
        _require(block_size >= 1, "block_size", block_size, ">= 1")
        _require(self.num_to_transfer >= 1, "num_to_transfer", self.num_to_transfer, ">= 1")
        _require(self.max_post_steps >= 0, "max_post_steps", self.max_post_steps, ">= 0")
        _require(0 <= self.threshold <= 1, "threshold", self.threshold, "in [0, 1]")
        _require(0 <= self.editing_threshold <= 1, "editing_threshold", self.editing_threshold, "in [0, 1]")
        _require(self.temperature >= 0, "temperature", self.temperature, ">= 0")
        _require(self.top_k is None or self.top_k >= 1, "top_k", self.top_k, ">= 1 or None")
        _require(self.top_p is None or 0 < self.top_p <= 1, "top_p", self.top_p, "in (0, 1] or None")
        self.block_size, self.prompt_length = block_size, prompt.shape[1]
        num_blocks = -(-(self.prompt_length + max_new_tokens) // block_size)
        total_len = num_blocks * block_size
        x = torch.full((1, total_len), self.mask_id, dtype=torch.long, device=prompt.device)  # [1, L]
        x[:, :self.prompt_length] = prompt
        attention = self.attention(num_blocks).to(prompt.device)  # [1, 1, L, L] additive, bfloat16
        position_ids = torch.arange(total_len, device=prompt.device).unsqueeze(0)  # [1, L]
        for k in range(self.prompt_length // block_size, num_blocks):
            end = (k + 1) * block_size
            self.block(x, end, attention[:, :, :end, :end], position_ids[:, :end])
            if eos_early_stop and self.finished(x[0, self.prompt_length:end]):
                break
        return x

    def attention(self, num_blocks):
        """ED2: 0 where a query's block is at or after the key's block, -inf elsewhere [1, 1, L, L]."""
        b = self.block_size
        blocks = torch.tril(torch.ones(num_blocks, num_blocks))  # [N, N]
        full = blocks.repeat_interleave(b, dim=0).repeat_interleave(b, dim=1)  # [L, L]
        return full.unsqueeze(0).unsqueeze(0).log().to(torch.bfloat16)  # [1, 1, L, L]

    def block(self, x, end, attention_mask, position_ids):
        """ED5: the post-step count, checked before any forward; a maskless step without edits ends the block."""
        start = end - self.block_size
        prompt_in_block = torch.arange(start, end, device=x.device) < self.prompt_length  # [b]
        post = 0
        while True:
            old = x[0, start:end].clone()  # [b]
            active = old == self.mask_id  # [b]  A
            if not active.any():
                post += 1
            if post > self.max_post_steps:
                return
            edited = self.step(x, end, attention_mask, position_ids, old, active, prompt_in_block)
            if not active.any() and not edited.any():
                return

    def step(self, x, end, attention_mask, position_ids, old, active, prompt_in_block):
        """ED2-ED4: one forward on the window, the transfer and the edits written (x changes in place)."""
        logits = self.model(x[:, :end], attention_mask=attention_mask, position_ids=position_ids).logits  # [1, W, V]
        tokens, q = self.propose(logits[0, -self.block_size:])  # [b], [b]
        transfer = self.transfer(q, active) if active.any() else torch.zeros_like(active)  # [b]
        edits = self.edits(tokens, q, old, active, prompt_in_block)  # [b]  E
        x[0, end - self.block_size:end] = torch.where(transfer | edits, tokens, old)  # [b]
        return edits

    def propose(self, logits):
        """ED3: the proposal x̂ and its probability q at each of the block's rows; logits [b, V]."""
        if self.temperature == 0:
            probs = torch.softmax(logits, dim=-1)  # [b, V] in the logits' dtype
            tokens = probs.argmax(dim=-1)  # [b] first maximum
            return tokens, probs.gather(-1, tokens[:, None])[:, 0]
        logits = logits / self.temperature  # [b, V]
        if self.top_k is not None:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # [b, 1]
            logits = logits.masked_fill(logits < kth, -torch.inf)  # ties at the k-th value kept
        if self.top_p is not None:
            ordered, order = torch.sort(logits, dim=-1, descending=True)  # [b, V]
            cumulative = torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1)  # [b, V]
            drop = torch.zeros_like(cumulative, dtype=torch.bool)  # [b, V] by rank
            drop[:, 1:] = cumulative[:, :-1] > self.top_p  # the mass before it exceeds top_p; the first stays
            logits = logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), -torch.inf)
        probs = torch.softmax(logits, dim=-1)  # [b, V] the filtered law
        tokens = torch.multinomial(probs, num_samples=1)[:, 0]  # [b]
        return tokens, probs.gather(-1, tokens[:, None])[:, 0]

    def transfer(self, q, active):
        """ED4.1: the masks over threshold (strict), else the num_to_transfer most confident (ties: lower position)."""
        high = active & (q > self.threshold)  # [b]  H
        if int(high.sum()) >= self.num_to_transfer:
            return high
        confidence = torch.where(active, q, -torch.inf)  # [b]
        count = min(self.num_to_transfer, int(active.sum()))
        chosen = torch.sort(confidence, descending=True, stable=True).indices[:count]
        return torch.zeros_like(active).index_fill(0, chosen, True)  # [b]

    def edits(self, tokens, q, old, active, prompt_in_block):
        """ED4.2: placed, non-prompt positions where q > editing_threshold (strict) and the proposal differs."""
        return ~active & ~prompt_in_block & (q > self.editing_threshold) & (tokens != old)  # [b]  E

    def finished(self, generated):
        """ED5: no mask left in x[P:(k + 1) b] and the EOS token there."""
        return not (generated == self.mask_id).any() and bool((generated == self.eos_id).any())
