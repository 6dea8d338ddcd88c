"""SDAR / TraDo's ``block_diffusion_generate`` written from scratch in the calling convention of the published code
(``model(x, attention_mask=m, position_ids=p, past_key_values=cache, use_cache=True, store_kv=s).logits`` with one
``transformers.DynamicCache()`` per run; dLLM-RL's 4-D ``[1, 1, Q, K]`` 0/1 block-causal mask). It knows nothing of
veridec. ``veridec check`` holds it against veridec's cached block-diffusion decoder call for call (tier E):

    veridec check examples/sdar_sampler.py:generate --against sdar --model tiny-sdar

Semantics (spec/block_diffusion.md BD2-BD6, BD8.2, BD9): the canvas is the prompt then masks, ``T = ceil((P +
gen_length) / b) * b`` long (BD2). The prompt's ``P // b`` whole blocks are prefilled in one block-causal forward that
stores them; the later blocks are decoded in order (BD5.6). While a block holds a mask, a denoising forward of the
block (``store_kv=False``, every earlier block and the block itself visible) samples every position of the block
with one ``torch.multinomial`` over its ``[b, V]`` rows (BD4: temperature, top-k with ties kept, top-p keeping the
token that crosses it; greedy at temperature 0, lowest id on ties, confidence ``softmax(l)[x]``, BD6.1). The
step's quota is ``min(n_s, masks left)`` with ``n_s = b // S + [s < b % S]`` (BD3, BD6.3); the strategy picks
masked positions only: ``sequential`` the first n masks, ``low_confidence_static`` the n most confident (ties to
the lower position), ``low_confidence_dynamic`` every mask over ``confidence_threshold`` (strict) when there are at
least n, else as static, ``entropy_bounded`` the masks by increasing entropy of their filtered law, the first
``max(1, #{j : cumulative entropy < eb_threshold})`` (BD6.4). A drawn mask token leaves its position masked; past
the schedule (``s >= S``) the mask token is banned and every mask left is taken (BD6.2). A finished block is stored
by one more forward (``store_kv=True``); a row stops after a store that leaves a stop id in its ``x[P:]`` (BD5.5).
Batch (BD8.2): rows of equal prompt length share the model calls; row by row (row 0 first) a row draws only while
its block holds a mask, and a stopped row decodes no more. The whole canvas ``[B, T]`` is returned.
``examples/sdar_sampler_broken.py`` holds four variants that each change one decision.
"""

import math

import torch
from transformers import DynamicCache

STRATEGIES = ("sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded")


def generate(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8, temperature=1.0, top_k=0,
             top_p=1.0, remasking_strategy="low_confidence_dynamic", confidence_threshold=0.85, eb_threshold=None,
             stopping_criteria_idx=None):
    return SdarSampler(model, mask_id, gen_length, block_length, denoising_steps, temperature, top_k, top_p,
                       remasking_strategy, confidence_threshold, eb_threshold, stopping_criteria_idx).run(prompt)


class SdarSampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, gen_length, block_length, denoising_steps, temperature, top_k, top_p,
                 remasking_strategy, confidence_threshold, eb_threshold, stopping_criteria_idx):
        for name, value in (("gen_length", gen_length), ("block_length", block_length),
                            ("denoising_steps", denoising_steps)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        if int(top_k) != top_k or top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0: off), got {top_k!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if remasking_strategy not in STRATEGIES:
            raise ValueError(f"remasking_strategy must be one of {STRATEGIES}, got {remasking_strategy!r}")
        if not math.isfinite(confidence_threshold):
            raise ValueError(f"confidence_threshold must be finite, got {confidence_threshold!r}")
        if remasking_strategy == "entropy_bounded" and (eb_threshold is None or not eb_threshold > 0):
            raise ValueError(f"eb_threshold must be > 0 with entropy_bounded, got {eb_threshold!r}")
        if stopping_criteria_idx is not None and (
                not isinstance(stopping_criteria_idx, (list, tuple))
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in stopping_criteria_idx)):
            raise ValueError(f"stopping_criteria_idx must be None or a list of token ids, got "
                             f"{stopping_criteria_idx!r}")
        self.model, self.mask_id = model, mask_id
        self.gen_length, self.b, self.steps = int(gen_length), int(block_length), int(denoising_steps)
        self.temperature, self.top_k, self.top_p = temperature, int(top_k), top_p
        self.strategy, self.threshold, self.eb_threshold = remasking_strategy, confidence_threshold, eb_threshold
        self.stop_ids = list(stopping_criteria_idx or [])

    def run(self, prompt):
        if prompt.dim() != 2 or prompt.shape[1] < 1:
            raise ValueError(f"prompt must be [B, P] with P >= 1, got shape {tuple(prompt.shape)}")
        B, P, b = prompt.shape[0], prompt.shape[1], self.b
        T = -(-(P + self.gen_length) // b) * b
        self.prompt_length, self.cache, self.stored = P, DynamicCache(), 0  # stored: positions in the cache
        x = torch.full((B, T), self.mask_id, dtype=torch.long, device=prompt.device)  # [B, T]
        x[:, :P] = prompt
        live = [True] * B  # rows not stopped
        if P >= b:
            self.prefill(x[:, :(P // b) * b])
        for block in range(P // b, T // b):
            self.decode_block(x, block * b, live)
            for row in range(B):
                live[row] = live[row] and not self.stops(x[row])
            if not any(live):
                break
        return x

    # --- model calls (BD5.6, BD9) ---

    def call(self, tokens, start, mask, store):
        """One model call on the canvas ``tokens [B, Q]`` at ``start ..``; ``mask [1, 1, Q, stored + Q]``."""
        B, Q = tokens.shape
        positions = torch.arange(start, start + Q, device=tokens.device).expand(B, Q)  # [B, Q]
        logits = self.model(tokens, attention_mask=mask, position_ids=positions, past_key_values=self.cache,
                            use_cache=True, store_kv=store).logits  # [B, Q, V]
        if store:
            self.stored += Q
        return logits

    def prefill(self, tokens):
        """BD2: the prompt's whole blocks in one forward that stores them."""
        self.call(tokens, 0, self.prefill_mask(tokens.shape[1]), store=True)

    def prefill_mask(self, length):
        """BD1: block-causal, a query in block i // b sees the keys of blocks <= its own."""
        blocks = torch.arange(length) // self.b  # [L]
        return (blocks[None, :] <= blocks[:, None]).float()[None, None]  # [1, 1, L, L]

    def block_mask(self):
        """A block's call sees everything stored and the whole block."""
        return torch.ones(1, 1, self.b, self.stored + self.b)  # [1, 1, b, K]

    def denoise_stores(self, s):
        """BD5.1: a denoising forward never stores (the block is stored once final, BD5.4)."""
        return False

    def decode_block(self, x, start, live):
        """BD5: denoising steps while a live row's block holds a mask, then one store."""
        end, stored_block = start + self.b, False
        steps = [0] * x.shape[0]  # s per row
        while True:
            active = [row for row in range(x.shape[0]) if live[row] and bool((x[row, start:end] == self.mask_id).any())]
            if not active:
                break
            store = self.denoise_stores(min(steps[row] for row in active))
            logits = self.call(x[:, start:end], start, self.block_mask(), store=store)  # [B, b, V]
            stored_block = stored_block or store
            self.step(x, start, logits, active, steps)
        if not stored_block:
            self.call(x[:, start:end], start, self.block_mask(), store=True)

    def stops(self, row):
        """BD5.5: a stop id in the row's generation, checked after each store."""
        generated = row[self.prompt_length:]
        return any(bool((generated == i).any()) for i in self.stop_ids)

    # --- one denoising step (BD4, BD5.2-3, BD6) ---

    def step(self, x, start, logits, active, steps):
        block = x[:, start:start + self.b]  # [B, b] a view: writes land in x
        tokens, laws = self.sample_rows(logits, active, steps)  # [B, b], [B, b, V]
        for row in active:
            masked = block[row] == self.mask_id  # [b]  A
            confidence = laws[row].gather(-1, tokens[row][:, None])[:, 0]  # [b]  q
            past = steps[row] >= self.steps  # BD6.2: past the schedule every mask left, whatever the strategy
            chosen = masked.nonzero()[:, 0] if past else \
                self.select(masked, confidence, laws[row], self.quota(steps[row], masked))
            block[row, chosen] = tokens[row, chosen]  # a drawn mask token leaves its position masked
            steps[row] += 1

    def sample_rows(self, logits, active, steps):
        """Row by row, row 0 first: a row draws only while its block holds a mask (BD8.2)."""
        B, b, V = logits.shape
        tokens = torch.full((B, b), self.mask_id, dtype=torch.long, device=logits.device)  # [B, b]
        laws = torch.zeros(B, b, V, dtype=logits.dtype, device=logits.device)  # [B, b, V]
        for row in active:
            tokens[row], laws[row] = self.sample(logits[row], steps[row] >= self.steps)
        return tokens, laws

    def sample(self, logits, past):
        """BD4 on ``logits [b, V]``: the drawn tokens ``[b]`` and the law ``[b, V]`` each was drawn from."""
        if past:  # BD6.2: the mask token banned before the filters
            logits = logits.clone()
            logits[:, self.mask_id] = -torch.inf
            if not bool(torch.isfinite(logits).any(dim=-1).all()):
                raise ValueError("past the schedule a position has no finite logit but the mask token's")
        if self.temperature == 0:  # BD6.1: greedy, lowest id on ties; the law unscaled and unfiltered
            return logits.argmax(dim=-1), torch.softmax(logits, dim=-1)
        law = torch.softmax(self.filtered(logits), dim=-1)  # [b, V]
        return torch.multinomial(law, 1)[:, 0], law

    def filtered(self, logits):
        """BD4: ``l / T`` (skipped at T = 1), top-k keeping ties at the k-th value, top-p keeping the crossing token."""
        if self.temperature != 1:
            logits = logits / self.temperature
        if self.top_k > 0:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # [b, 1]
            logits = logits.masked_fill(logits < kth, -torch.inf)
        if self.top_p < 1:
            ordered, order = torch.sort(logits, dim=-1, descending=True)  # [b, V]
            cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)  # [b, V]
            drop = torch.zeros_like(cumulative, dtype=torch.bool)
            drop[:, 1:] = cumulative[:, :-1] > self.top_p  # the mass before the token already exceeds top_p
            logits = logits.masked_fill(drop.scatter(-1, order, drop), -torch.inf)
        return logits

    def quota(self, s, masked):
        """BD3, BD6.3: n_s capped at the masks left; past the schedule every mask left (BD6.2)."""
        left = int(masked.sum())
        if s >= self.steps:
            return left
        n_s = self.b // self.steps + (1 if s < self.b % self.steps else 0)
        return min(n_s, left)

    def select(self, masked, confidence, law, n):
        """BD5.2: the positions that take their draw (masked positions only; every mask when n is all of them)."""
        if self.strategy == "sequential":
            return masked.nonzero()[:n, 0]
        if self.strategy == "low_confidence_static":
            return self.most_confident(masked, confidence, n)
        if self.strategy == "low_confidence_dynamic":
            return self.dynamic(masked, confidence, n)
        return self.entropy_bounded(masked, law)

    def most_confident(self, masked, confidence, n):
        """The n largest confidences on the masks, ties to the lower position (BD6.5, stable sort)."""
        ranked = torch.where(masked, confidence, -torch.inf)  # [b]
        return torch.sort(ranked, descending=True, stable=True).indices[:n]

    def dynamic(self, masked, confidence, n):
        """low_confidence_dynamic: every mask over the threshold (strict) if there are at least n, else static."""
        high = masked & (confidence > self.threshold)  # [b]  H
        if int(high.sum()) >= n:
            return high.nonzero()[:, 0]
        return self.most_confident(masked, confidence, n)

    def entropy_bounded(self, masked, law):
        """BD6.4: masks by increasing entropy (ties to the lower position), the first max(1, #{cumsum < eb})."""
        entropy = torch.special.entr(law).sum(dim=-1)  # [b]
        positions = masked.nonzero()[:, 0]  # [m]
        order = positions[torch.sort(entropy[positions], stable=True).indices]  # [m]
        k = max(1, int((entropy[order].cumsum(dim=0) < self.eb_threshold).sum()))
        return order[:k]
