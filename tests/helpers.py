"""Small helpers shared by tests."""

import torch


def never_predicts_mask(model):
    """Random tiny models give the mask token real probability (trained ones do not), and a decoder whose
    model proposes the mask keeps the position masked. This patches the model's core forward so the mask
    token's logit is -inf everywhere (full, prefill and cached forwards alike). Returns the model."""
    raw_forward = model.raw_forward

    def patched(*args, **kwargs):
        out = raw_forward(*args, **kwargs)
        out.logits[..., model.special.mask_id] = -torch.inf
        return out

    model.raw_forward = patched
    return model
