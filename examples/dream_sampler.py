"""Dream's ``diffusion_generate`` written from scratch in Dream's calling convention: ``model(x, attention_mask,
tok_idx).logits`` are raw (position j scores token j + 1), so the sampler shifts them itself. It knows nothing of
veridec. ``veridec check`` holds it against veridec's Dream sampler token for token (tier E) and by its output
law (tier S):

    veridec check examples/dream_sampler.py:diffusion_generate --against dream --model tiny-dream
    veridec check examples/dream_sampler.py:diffusion_generate --against dream --model tiny-dream --tier S

Semantics (spec/sequential.md SQ2.1-SQ2.5): masks appended to the prompt; left padding becomes a [B, 1, L, L]
mask and RoPE positions counted from each row's first real token; time grid ``linspace(1, eps, steps + 1)``.
Each step: ``origin`` reveals each mask with probability 1 - s/t (every mask on the last step) with a sampled
token; the other algorithms sample a token and a confidence for every mask (its probability, the top-2 margin,
or the negative entropy) and commit the ``int(mean masks x (1 - s/t))`` most confident per row (all on the last
step). Sampling: logits / T, then top-p (the crossing token kept), then top-k, softmax, one categorical draw
(argmax at T = 0). ``examples/dream_sampler_variants.py`` holds variants that change its output law or keep it.
"""

import torch
import torch.nn.functional as F


class DreamSampler:
    """One decode; each method is one decision, so a variant can change exactly one."""

    def __init__(self, model, mask_id, steps, eps, alg, temperature, top_p, top_k):
        self.model, self.mask_id, self.steps, self.eps, self.alg = model, mask_id, steps, eps, alg
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k

    def run(self, input_ids, attention_mask, max_new_tokens):
        x = F.pad(input_ids, (0, max_new_tokens), value=self.mask_id)
        keys, positions = self.padding(attention_mask, x.shape[1])
        timesteps = torch.linspace(1, self.eps, self.steps + 1, device=x.device)
        for i in range(self.steps):
            masked = x == self.mask_id
            raw = self.model(x, keys, positions).logits
            logits = torch.cat([raw[:, :1], raw[:, :-1]], dim=1)  # token i scored at position i
            last = i == self.steps - 1
            share = 1.0 if last else 1 - timesteps[i + 1] / timesteps[i]
            x = self.reveal(x, masked, logits[masked], share, last)
        return x

    def padding(self, attention_mask, length):
        """(the official [B, 1, L, L] mask or "full", RoPE positions or None)."""
        if attention_mask is None or bool((attention_mask == 1).all()):
            return "full", None
        mask = F.pad(attention_mask, (0, length - attention_mask.shape[1]), value=1)
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)
        return mask[:, None, None, :].bool() & mask[:, None, :, None].bool(), positions

    def reveal(self, x, masked, logits, share, last):
        if self.alg == "origin":
            chosen = torch.rand(logits.shape[0], device=x.device) < share
            proposals = torch.full((logits.shape[0],), self.mask_id, dtype=torch.long, device=x.device)
            if chosen.any():
                proposals[chosen] = self.sample(logits[chosen])[1]
            x[masked] = proposals
            return x
        confidence, tokens = self.sample(logits)
        scores = torch.full(x.shape, -torch.inf, dtype=logits.dtype, device=x.device)
        scores[masked] = confidence.to(scores.dtype)
        mean_masks = masked.sum() / masked.shape[0]
        count = int(mean_masks) if last else int(mean_masks * share)
        if count > 0:
            proposals = torch.full_like(x, self.mask_id)
            proposals[masked] = tokens
            chosen = torch.sort(scores, descending=True, stable=True).indices[:, :count]  # [B, count] ties: lowest
            x.scatter_(1, chosen, proposals.gather(1, chosen))
        return x

    def sample(self, logits):
        """(confidence, token) per row of logits [N, V]."""
        probs = torch.softmax(self.filtered(logits), dim=-1)
        if self.temperature > 0:
            tokens = self.draw(probs)
            confidence = probs.gather(-1, tokens[:, None])[:, 0]
        else:
            confidence, tokens = probs.max(dim=-1)
        if self.alg == "topk_margin":
            top2 = probs.topk(2, dim=-1).values
            confidence = top2[:, 0] - top2[:, 1]
        elif self.alg == "entropy":
            confidence = (probs * torch.log(probs + 1e-10)).sum(-1)
        return confidence, tokens

    def filtered(self, logits):
        if self.temperature > 0:
            logits = logits / self.temperature
        if self.top_p is not None and self.top_p < 1:
            ranked, order = torch.sort(logits, descending=True, stable=True)
            beyond = self.beyond_nucleus(torch.softmax(ranked, dim=-1).cumsum(-1))
            logits = logits.masked_fill(beyond.scatter(1, order, beyond), torch.finfo(logits.dtype).min)
        if self.top_k is not None:
            kth = logits.topk(min(self.top_k, logits.shape[-1])).values[:, -1:]
            logits = logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)
        return logits

    def beyond_nucleus(self, cumulative):
        """Which ranked tokens top-p removes, from the cumulative probabilities [N, V]: those after the one that
        crosses p (it is kept)."""
        beyond = cumulative > self.top_p
        return torch.cat([torch.zeros_like(beyond[:, :1]), beyond[:, :-1]], dim=1)

    def draw(self, probs):
        """One categorical draw per row (torch.distributions.Categorical's)."""
        return torch.multinomial(probs, 1, True)[:, 0]


@torch.no_grad()
def diffusion_generate(model, input_ids, attention_mask=None, max_new_tokens=16, steps=16, eps=1e-3,
                       alg="origin", temperature=0.0, top_p=None, top_k=None, mask_token_id=None):
    """Dream's calling convention (``generation_config`` fields as keywords); returns the canvas [B, P + new]."""
    sampler = DreamSampler(model, mask_token_id, steps, eps, alg, temperature, top_p, top_k)
    return sampler.run(input_ids, attention_mask, max_new_tokens)
