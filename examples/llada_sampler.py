"""LLaDA's ``generate`` written from scratch in LLaDA's calling convention (``model(x).logits``, no cache, no
classifier-free guidance, no padding). It knows nothing of veridec. ``veridec check`` holds it against veridec's
LLaDA sampler token for token (tier E) and, on an oracle model, against the exact law of its decodes (tier S):

    veridec check examples/llada_sampler.py:generate --against llada --model tiny-llada
    veridec check examples/llada_sampler.py:generate --against llada --model oracle-joint --tier S

Semantics (spec/sequential.md SQ1.1-SQ1.6): masks appended to the prompt; blocks of ``block_length`` decoded in
turn, ``steps // blocks`` steps each; a block's masks spread over its steps (the same count each, the first
steps one more for the remainder). Each step: the Gumbel-max in float64, argmax of exp(l) / (-log u)^T (the
logits at T = 0), proposes a token at every mask; its confidence is softmax(logits)[token] ("low_confidence") or
one float32 U(0, 1) draw ("random"); masks past the block score -inf; the step's count commits by confidence (ties to
the lower position). ``examples/llada_sampler_broken.py`` holds a variant that changes its output law.
"""

import torch


def generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
             remasking="low_confidence", mask_id=126336):
    return LLaDASampler(model, mask_id, temperature, remasking).run(prompt, steps, gen_length, block_length)


class LLaDASampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, temperature, remasking):
        self.model, self.mask_id, self.temperature, self.remasking = model, mask_id, temperature, remasking

    def run(self, prompt, steps, gen_length, block_length):
        x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), self.mask_id, dtype=prompt.dtype,
                                          device=prompt.device)], dim=1)
        blocks = gen_length // block_length
        for block in range(blocks):
            end = prompt.shape[1] + (block + 1) * block_length
            counts = self.counts(x[:, end - block_length:end] == self.mask_id, steps // blocks)  # [B, steps]
            for step in range(steps // blocks):
                x = self.step(x, end, counts[:, step])
        return x

    def counts(self, block_masks, steps):
        """Masks to commit per row and step [B, steps]: the block's masks // steps, the remainder first."""
        total = block_masks.sum(dim=1, keepdim=True)  # [B, 1]
        counts = (total // steps).repeat(1, steps)
        remainder = total % steps
        return counts + (torch.arange(steps, device=total.device)[None] < remainder).long()

    def step(self, x, end, counts):
        masked = x == self.mask_id
        logits = self.model(x).logits  # [B, L, V]
        tokens = self.propose(logits)
        confidence = self.confidence(logits, tokens)
        confidence = torch.where(masked, confidence, -torch.inf)
        confidence[:, end:] = -torch.inf
        order = torch.sort(confidence, dim=1, descending=True, stable=True).indices  # ties: the lower position
        for row in range(x.shape[0]):
            chosen = order[row, : int(counts[row])]
            x[row, chosen] = tokens[row, chosen]
        return x

    def propose(self, logits):
        """The Gumbel-max in float64 (argmax of the logits at T = 0)."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        logits = logits.to(torch.float64)
        noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device)
        return (logits.exp() / (-torch.log(noise)) ** self.temperature).argmax(dim=-1)

    def confidence(self, logits, tokens):
        if self.remasking == "random":
            return torch.rand(tokens.shape, device=tokens.device).double()  # float32 draws, as the official code
        probs = torch.softmax(logits.to(torch.float64), dim=-1)
        return probs.gather(-1, tokens[..., None])[..., 0]
