"""WINO's ``decoding_wino`` written from scratch in LLaDA's calling convention (``model(x, attention_mask=...,
position_ids=...).logits``, one row, no padding, no cache). It knows nothing of veridec. ``veridec check`` holds
it against veridec's WINO decoder event for event (tier E; the cases are one row, as the official function's):

    veridec check examples/wino_sampler.py:generate --against wino --model tiny-llada

Semantics (spec/wino.md WN1-WN6): the canvas is the prompt, ``gen_length`` masks and a verification block of
``block_length`` masks that no step writes (WN1). Blocks are decoded left to right; each forward sees the whole
canvas, the verification slot j at the RoPE position of block position s_k + j and blind to that one key, the
prompt and generation blind to the verification block (WN2). Per block, the candidates are the masks before the
block's end, nothing is verified and last = 30 (WN3). Each step (WN4): the Gumbel-max in float64 proposes a token
everywhere (the logits at T = 0); confidences are softmax(float64 logits)[token]; every candidate over
``threshold`` (strict) is drafted, at most min(max(floor(0.7 n), 5), 20) of them by confidence, else the single
best (ties to the lower position); unless only one was drafted, every token committed in an earlier step of the
block whose verification slot scores it under ``threshold_back`` (strict) goes back to the mask, only the
last - 1 least confident when last or more fail; last := the drafts' count. The loop ends: each step removes at
least one candidate, net (WN6). ``examples/wino_sampler_broken.py`` holds four variants that change decisions.
"""

import torch


def generate(model, prompt, gen_length=128, block_length=128, temperature=0.0, mask_id=126336, threshold=0.6,
             threshold_back=0.9):
    return WinoSampler(model, mask_id, temperature, threshold, threshold_back).run(prompt, gen_length, block_length)


class WinoSampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, temperature, threshold, threshold_back):
        self.model, self.mask_id, self.temperature = model, mask_id, temperature
        self.threshold, self.threshold_back = threshold, threshold_back

    def run(self, prompt, gen_length, block_length):
        if prompt.dim() != 2 or prompt.shape[0] != 1:
            raise ValueError(f"prompt must be one row [1, P], got shape {tuple(prompt.shape)}")
        if block_length <= 0 or gen_length <= 0 or gen_length % block_length:
            raise ValueError(f"gen_length ({gen_length}) must be a positive multiple of block_length ({block_length})")
        self.prompt_length, self.gen_length, self.block_length = prompt.shape[1], gen_length, block_length
        x = torch.cat([prompt, torch.full((1, gen_length), self.mask_id, dtype=prompt.dtype,
                                          device=prompt.device)], dim=1)  # [1, P + G]
        positions = torch.arange(x.shape[1], device=x.device)  # [P + G]
        for block in range(gen_length // block_length):
            end = self.prompt_length + (block + 1) * block_length
            candidates = (x[0] == self.mask_id) & (positions < end)  # [P + G]  M (WN3)
            verified = torch.zeros_like(candidates)  # [P + G]  U, by canvas position
            last = 30
            while candidates.any():
                candidates, verified, last = self.step(x, block, candidates, verified, last)
        return x

    def layout(self, x, block):
        """WN2: the model's input, attention and positions, and the output row that verifies each canvas position."""
        P, G, B = self.prompt_length, self.gen_length, self.block_length
        start = P + block * B
        inputs = torch.cat([x, torch.full((1, B), self.mask_id, dtype=x.dtype, device=x.device)], dim=1)  # [1, N]
        slots = torch.arange(B, device=x.device)  # [B]
        attention = torch.ones(P + G + B, P + G + B, dtype=torch.bool, device=x.device)  # [N, N] query, key
        attention[:P + G, P + G:] = False  # the canvas never sees the verification block
        attention[P + G + slots, start + slots] = False  # slot j is blind to the token it verifies
        position_ids = torch.cat([torch.arange(P + G, device=x.device), start + slots])  # [N]
        verifier = torch.arange(P + G, device=x.device)  # [P + G]
        verifier[start:start + B] = P + G + slots  # block position s_k + j is scored by slot j
        return inputs, attention[None, None], position_ids, verifier

    def step(self, x, block, candidates, verified, last):
        """WN4: one forward, the drafts committed, the failed verifications revoked (x changes in place)."""
        n = int(candidates.sum())
        inputs, attention_mask, position_ids, verifier = self.layout(x, block)
        logits = self.model(inputs, attention_mask=attention_mask, position_ids=position_ids).logits  # [1, N, V]
        tokens = self.propose(logits)[0]  # [N]
        probs = torch.softmax(logits[0].to(torch.float64), dim=-1)  # [N, V]
        canvas = torch.arange(x.shape[1], device=x.device)  # [P + G]
        start = self.prompt_length + block * self.block_length
        in_block = (canvas >= start) & (canvas < start + self.block_length)  # [P + G]
        confidence = torch.where(candidates, probs[canvas, tokens[canvas]], -torch.inf)  # [P + G]  c
        accepted = self.draft(confidence, n)  # [a] positions, by decreasing c
        drafted = torch.zeros_like(candidates)  # [P + G]  T
        drafted[accepted] = True
        revocable = self.revocable(x, verified, drafted & in_block)  # [P + G]  before this step's commits
        x[0, accepted] = tokens[accepted]
        back = torch.where(revocable, probs[verifier, x[0]], torch.inf)  # [P + G]  b, of the committed token
        revoked = self.revoke(back, len(accepted), last)  # [r] positions, by increasing b
        x[0, revoked] = self.mask_id
        undone = torch.zeros_like(candidates)  # [P + G]  R
        undone[revoked] = True
        candidates = (candidates & ~drafted) | undone
        verified = (verified | (drafted & in_block)) & ~undone
        return candidates, verified, len(accepted)

    def propose(self, logits):
        """The Gumbel-max in float64 (argmax of the logits at T = 0), over the whole canvas."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        logits = logits.to(torch.float64)
        noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device)
        return (logits.exp() / (-torch.log(noise)) ** self.temperature).argmax(dim=-1)

    def draft(self, confidence, n):
        """WN4.1, WN4.4: the candidates over threshold (strict), at most max_accept of them, else the best one."""
        max_accept = min(max(7 * n // 10, 5), 20)  # floor(0.7 n), exactly
        order = torch.sort(confidence, descending=True, stable=True).indices  # [P + G] ties: the lower position
        passed = int((confidence > self.threshold).sum())
        return order[:min(max(passed, 1), max_accept)]

    def revocable(self, x, verified, new):
        """WN4.5: only tokens committed in earlier steps of this block (U), not this step's ``new`` block drafts,
        never the prompt."""
        return verified

    def revoke(self, back, accepted, last):
        """WN4.5: every b under threshold_back (strict); the last - 1 smallest if last or more; none after a = 1."""
        if accepted == 1:
            return back.new_zeros(0, dtype=torch.long)
        failed = int((back < self.threshold_back).sum())
        order = torch.sort(back, stable=True).indices  # [P + G] ties: the lower position (slot)
        return order[:last - 1 if failed >= last else failed]
