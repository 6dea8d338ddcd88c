"""LLaDA2.0's block-diffusion decoding loop (``LLaDA2MoeModelLM.generate`` / ``LLaDA2Sampler.sample``, ZHZisZZ/dllm)
written from scratch in LLaDA2.0's calling convention: no cache, one call per denoising step of the canvas up to the
end of the block being decoded, ``model(x[:, :W], attention_mask=m, position_ids=p).logits`` with ``W = (block + 1)
* b``, ``m`` the ``[1, 1, W, W]`` block-causal mask built LLaDA2's way (the bfloat16 ``.log()`` of a 0/1 block
lower-triangular matrix: 0 where a query attends, -inf where not) and ``p`` the positions ``0 .. W - 1``. It knows
nothing of veridec. ``veridec check`` holds it against BD12's loop call for call (tier E); the fallback ranks with
``torch.topk`` as the loops do, so ties are checked in torch's order:

    veridec check examples/llada2_sampler.py:generate --against llada2 --ties torch

Semantics (spec/block_diffusion.md BD2-BD5, BD12, BD12.1): one row. The canvas is the prompt then masks, ``T =
ceil((P + gen_length) / b) * b`` long (BD2). Blocks ``P // b .. T / b - 1`` are decoded in order (the prompt's whole
blocks get no call: no prefill, no store), the first holding the prompt's last ``P mod b`` tokens. The step budget is
``S = min(steps, gen_length // minimal_topk)`` and every block has the schedule ``n_s = b // S + [s < b % S]``
(BD3). A block takes at most ``S`` steps and stops early once it holds no mask. Each step calls the model once and
samples every position of the block (BD4): at temperature 0 the argmax of the unfiltered softmax, its probability
the confidence (BD6.1); otherwise ``l / temperature`` (skipped at 1), top-k keeping the logits ``>=`` the k-th
largest (None or ``<= 0``: off), top-p keeping the token that crosses it (None or ``>= 1``: off), softmax, one
``torch.multinomial`` over the block's ``[b, V]`` rows, the drawn token's probability the confidence. Only masked
positions compete (the others' confidence is -inf): when at least ``n_s`` of them are over ``threshold`` (strict)
exactly those take their draw, else ``torch.topk(confidence, min(n_s, masks left))``'s positions (BD5.2
``low_confidence_dynamic``, BD6.3). A drawn mask token leaves its position masked; a block whose ``S`` steps are spent
with masks left keeps them and the next block is decoded (BD12, veridec's ``after_schedule="leave"``). With ``S = 0``
no call runs. After a block, the decode stops when ``eos_id`` (not None) occurs in ``x[0, P:block end]`` (BD5.5).
The whole canvas ``[1, T]`` is returned, not cut at EOS (BD12.1); blocks never decoded stay masked.
``examples/llada2_sampler_broken.py`` holds four variants that each change one decision.
"""

import math
import numbers

import torch


def generate(model, prompt, mask_id, gen_length=2048, block_length=32, steps=32, temperature=0.0, top_k=None,
             top_p=None, threshold=0.95, minimal_topk=1, eos_id=None):
    return Llada2Sampler(model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                         minimal_topk, eos_id).run(prompt)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Llada2Sampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, gen_length, block_length, steps, temperature, top_k, top_p, threshold,
                 minimal_topk, eos_id):
        for name, value in (("gen_length", gen_length), ("block_length", block_length), ("steps", steps),
                            ("minimal_topk", minimal_topk)):
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not _is_int(mask_id) or mask_id < 0:
            raise ValueError(f"mask_id must be a token id (an integer >= 0), got {mask_id!r}")
        if eos_id is not None and (not _is_int(eos_id) or eos_id < 0):
            raise ValueError(f"eos_id must be None or a token id (an integer >= 0), got {eos_id!r}")
        if not (_is_number(temperature) and 0 <= temperature < math.inf):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        if top_k is not None and not _is_int(top_k):
            raise ValueError(f"top_k must be None or an integer (<= 0: off), got {top_k!r}")
        if top_p is not None and not (_is_number(top_p) and top_p > 0):
            raise ValueError(f"top_p must be None or a number > 0 (>= 1: off), got {top_p!r}")
        if not (_is_number(threshold) and math.isfinite(threshold)):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        self.model, self.mask_id, self.eos_id = model, int(mask_id), None if eos_id is None else int(eos_id)
        self.gen_length, self.b, self.steps = int(gen_length), int(block_length), int(steps)
        self.minimal_topk, self.temperature, self.threshold = int(minimal_topk), float(temperature), float(threshold)
        self.top_k = None if top_k is None else int(top_k)
        self.top_p = None if top_p is None else float(top_p)

    def run(self, prompt):
        if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.dtype.is_floating_point:
            raise ValueError(f"prompt must be an integer tensor [1, P], got {getattr(prompt, 'shape', prompt)!r}")
        if prompt.shape[0] != 1:
            raise ValueError(f"prompt must hold one row ([1, P]), got {prompt.shape[0]} rows")
        device, b = self.model.device, self.b
        P = prompt.shape[1]
        num_blocks = -(-(P + self.gen_length) // b)
        T = num_blocks * b
        x = torch.full((1, T), self.mask_id, dtype=torch.long, device=device)  # [1, T]
        x[:, :P] = prompt.to(device)
        self.prompt_length = P
        self.mask = self.attention_mask(num_blocks, device)  # [1, 1, T, T]
        self.positions = torch.arange(T, device=device)[None]  # [1, T]
        S = self.step_budget()
        schedule = self.schedule(S)
        for block in range(P // b, num_blocks):
            start, end = block * b, (block + 1) * b
            for s in range(S):
                if not self.block_continues(x, start, end):
                    break
                self.step(x, start, end, schedule[s])
            self.after_schedule(x, start, end)
            if self.stops(x, end):
                break
        return x

    # --- the loop's decisions (BD2, BD3, BD5.5, BD12) ---

    def attention_mask(self, num_blocks, device):
        """BD1 as LLaDA2 builds it: additive, 0 where block i sees block j <= i, -inf elsewhere, bfloat16."""
        ones = torch.tril(torch.ones(num_blocks, num_blocks, device=device))  # [nb, nb]
        full = ones.repeat_interleave(self.b, dim=0).repeat_interleave(self.b, dim=1)  # [T, T]
        return full[None, None].log().to(torch.bfloat16)  # [1, 1, T, T]

    def step_budget(self):
        """BD12: S = min(steps, gen_length // minimal_topk) (0 when minimal_topk > gen_length: no call runs)."""
        return min(self.steps, self.gen_length // self.minimal_topk)

    def schedule(self, S):
        """BD3: n_s = b // S + [s < b mod S] for s = 0 .. S - 1."""
        return [self.b // S + (1 if s < self.b % S else 0) for s in range(S)]

    def block_continues(self, x, start, end):
        """BD5 / BD12: a block takes another step (within its S) only while it holds a mask."""
        return bool((x[0, start:end] == self.mask_id).any())

    def after_schedule(self, x, start, end):
        """BD12: a block whose S steps are spent keeps the masks it has left (veridec's ``after_schedule="leave"``)."""

    def stops(self, x, end):
        """BD5.5 with the EOS id: after a block, stop when EOS occurs in the generation so far, x[0, P:end]."""
        if self.eos_id is None:
            return False
        return bool((x[0, self.prompt_length:end] == self.eos_id).any())

    # --- one denoising step (BD4, BD5.1-3, BD6.1, BD6.3) ---

    def forward(self, x, end):
        """One model call on the canvas up to the block's end; the block's logits ``[b, V]``."""
        logits = self.model(x[:, :end], attention_mask=self.mask[:, :, :end, :end],
                            position_ids=self.positions[:, :end]).logits  # [1, W, V]
        return logits[0, -self.b:]  # [b, V]

    def step(self, x, start, end, n_s):
        logits = self.forward(x, end)  # [b, V]
        tokens, confidence = self.sample(logits)  # [b], [b]
        masked = x[0, start:end] == self.mask_id  # [b]
        confidence = torch.where(masked, confidence, -torch.inf)  # [b]  only masks compete
        chosen = self.select(masked, confidence, n_s)  # [n] positions in the block
        x[0, start + chosen] = tokens[chosen]  # a drawn mask token leaves its position masked

    def sample(self, logits):
        """BD4 on ``logits [b, V]``: the drawn tokens ``[b]`` and each one's probability ``[b]``."""
        if self.temperature == 0:  # BD6.1: argmax of the unfiltered softmax, its probability the confidence
            probs = torch.softmax(logits, dim=-1)  # [b, V]
            tokens = probs.argmax(dim=-1)  # [b]
        else:
            probs = torch.softmax(self.filtered(logits), dim=-1)  # [b, V]
            tokens = torch.multinomial(probs, 1)[:, 0]  # [b]  one call over the block's rows
        return tokens, probs.gather(-1, tokens[:, None])[:, 0]

    def filtered(self, logits):
        """BD4: ``l / T`` (skipped at T = 1), top-k (ties at the k-th value kept), top-p (the crossing token kept)."""
        if self.temperature != 1:
            logits = logits / self.temperature
        if self.top_k is not None and self.top_k > 0:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # [b, 1]
            logits = logits.masked_fill(logits < kth, -torch.inf)
        if self.top_p is not None and self.top_p < 1:
            ordered, order = torch.sort(logits, dim=-1, descending=True)  # [b, V]
            over = torch.softmax(ordered, dim=-1).cumsum(dim=-1) > self.top_p  # [b, V]
            drop = torch.zeros_like(over)
            drop[:, 1:] = over[:, :-1]  # shifted right by one: the token that crosses top_p stays
            logits = logits.masked_fill(drop.scatter(-1, order, drop), -torch.inf)
        return logits

    def select(self, masked, confidence, n_s):
        """BD5.2 ``low_confidence_dynamic``: every mask over the threshold (strict) if at least n_s, else fallback."""
        high = confidence > self.threshold  # [b]  masks only: the others' confidence is -inf
        if int(high.sum()) >= n_s:
            return high.nonzero()[:, 0]
        return self.fallback(masked, confidence, min(n_s, int(masked.sum())))

    def fallback(self, masked, confidence, n):
        """BD5.2, BD6.3: the n most confident masks, in ``torch.topk``'s order (``--ties torch``)."""
        return torch.topk(confidence, n).indices
