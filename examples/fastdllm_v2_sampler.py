"""Fast-dLLM v2's ``generate`` written from spec/fastdllm_v2.md alone, in the published modelling's calling
convention (``model.forward(input_ids=..., use_cache=True, past_key_values=..., update_past_key_values=...,
block_size=...)``, raw logits: position j scores token j + 1). Rows of one prompt length; returns the whole canvas,
a row that stopped cut after its stop token (masks past it). ``veridec check`` holds it against veridec's decoder:

    veridec check examples/fastdllm_v2_sampler.py:generate --against fastdllm-v2 --model tiny-fastdllm-v2
"""

import torch


class V2Sampler:
    """One decode; each method one decision of the spec, so that a variant overrides exactly one."""

    def __init__(self, model, mask_id, max_new_tokens, block_size, small_block_size, threshold, stop_token, top_p,
                 temperature):
        self.model, self.mask_id, self.new = model, mask_id, max_new_tokens
        self.b, self.s = block_size, small_block_size
        self.threshold, self.stop, self.top_p, self.temperature = threshold, stop_token, top_p, temperature

    def run(self, input_ids):
        rows, length = input_ids.shape
        blocks = self.new // self.b + length // self.b  # V2.3
        x = torch.full((rows, blocks * self.b + 1), self.mask_id, dtype=torch.long, device=input_ids.device)
        x[:, :length] = input_ids
        self.length, self.stopped, cache = length, [False] * rows, None
        first = length // self.b
        if self.prefills(length):  # the prompt's whole blocks, stored at once; the boundary token after them (V2.7)
            cache = self.store(x, 0, first * self.b, cache)
        for block in range(first, blocks):
            start, end = block * self.b, (block + 1) * self.b
            while not all(self.stopped) and self.decode_step(x, start, end, cache):
                pass
            if all(self.stopped):
                break
            cache = self.store(x, start, end, cache)
        return self.cut(x)

    def cut(self, x):
        """As the published generate returns it: a row cut after its first generated stop token (V2.9), the
        positions past it masks, so that every row keeps the canvas's width."""
        for row in range(x.shape[0]):
            found = (x[row, self.length:] == self.stop).nonzero()
            if self.stopped[row] and len(found):
                x[row, self.length + int(found[0, 0]) + 1:] = self.mask_id
        return x

    def prefills(self, length):
        return length >= self.b  # a prompt of one whole block or more (V2.3)

    def forward(self, x, start, end, cache, store):
        return self.model.forward(input_ids=x[:, start:end], use_cache=True, past_key_values=cache,
                                  update_past_key_values=store, block_size=self.b)

    def store(self, x, start, end, cache):
        out = self.forward(x, start, end, cache, True)
        for row in range(x.shape[0]):
            if not self.stopped[row] and x[row, end] == self.mask_id:
                x[row, end] = self.boundary_token(out.logits[row, -1])
                self.check_stop(x, row)
        return out.past_key_values

    def boundary_token(self, logits):
        return int(logits.argmax())  # greedy at every temperature (V2.7)

    def decode_step(self, x, start, end, cache):
        """One forward of the block; each live row commits in its first sub-block with masks (V2.4-V2.6). False
        when no row has a mask left in the block."""
        subs = [None if self.stopped[row] else self.sub_block(x[row, start:end] == self.mask_id)
                for row in range(x.shape[0])]
        if all(sub is None for sub in subs):
            return False
        logits = self.shift(self.forward(x, start, end, cache, False).logits)  # [B, b, V]
        for row, sub in enumerate(subs):
            if sub is not None:
                lo, hi = self.window(start, sub)
                tokens, confidence = self.propose(logits[row:row + 1, lo - start:hi - start])  # [1, s] each
                chosen = self.commits(confidence[0], x[row, lo:hi] == self.mask_id)
                x[row, lo:hi] = torch.where(chosen, tokens[0], x[row, lo:hi])
                self.check_stop(x, row)
        return True

    def window(self, start, sub):
        return start + sub * self.s, start + (sub + 1) * self.s  # the current sub-block only (V2.4)

    def sub_block(self, masked):
        left = masked.nonzero()
        return None if len(left) == 0 else int(left[0, 0]) // self.s

    def shift(self, logits):
        return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)  # position i from output i - 1 (V2.1)

    def propose(self, logits):
        """Tokens and their probabilities [B, W]: the argmax at temperature 0, else a top-p draw row by row."""
        if self.temperature == 0:
            law = torch.softmax(logits, dim=-1)
            tokens = law.argmax(dim=-1)
        else:
            law = self.nucleus(torch.softmax(logits / self.temperature, dim=-1))
            tokens = torch.stack(self.draws(law))
        return tokens, law.gather(-1, tokens[..., None])[..., 0]

    def draws(self, law):
        return [torch.multinomial(row, 1)[:, 0] for row in law]

    def nucleus(self, probs):
        ordered, order = torch.sort(probs, descending=True)
        before = torch.cumsum(ordered, dim=-1) - ordered  # the mass ranked before each token
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before > self.top_p)
        kept = probs.masked_fill(drop, 0)
        return kept / kept.sum(dim=-1, keepdim=True)

    def commits(self, confidence, candidates):
        scores = confidence.masked_fill(~candidates, -torch.inf)
        chosen = self.above(scores)
        chosen[scores.argmax()] = True
        return chosen & candidates

    def above(self, scores):
        return scores > self.threshold  # strictly (V2.6)

    def check_stop(self, x, row):
        generated = x[row, self.length:]
        found = (generated == self.stop).nonzero()
        if len(found) and not (generated[:int(found[0, 0])] == self.mask_id).any():
            self.stopped[row] = True


def generate(model, input_ids, max_new_tokens, mask_id=151665, threshold=1, small_block_size=8, block_size=32,
             stop_token=151645, top_p=0.95, temperature=0):
    """The published generate's signature and defaults."""
    return V2Sampler(model, mask_id, max_new_tokens, block_size, small_block_size, threshold, stop_token, top_p,
                     temperature).run(input_ids)
