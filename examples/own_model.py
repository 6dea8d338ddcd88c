"""A model object of the user's own and a decoder that hooks its parts (spec/exactness.md EC9). ``MyLLaDA`` is
a ``torch.nn.Module`` with a Hugging Face-style forward (``model(input_ids=x, attention_mask=None)`` returning
``.logits``) around its layers; ``hooked_generate`` is LLaDA's sampler (``examples/llada_sampler.py``) that
installs a forward hook on the model's last layer while it decodes, as feature caches do. The check runs the
decoder on this object, records the calls at its top-level forward, and runs veridec's LLaDA sampler on
veridec's own load of the same weights:

    veridec check examples/own_model.py:hooked_generate --against llada --model tiny-llada \\
        --candidate-model examples/own_model.py:load

``load_scaled`` is the same model with its logits scaled by 1.001: the preflight refuses it (beyond rounding).
"""

from types import SimpleNamespace

import torch

from llada_sampler import generate as llada_generate


class MyLLaDA(torch.nn.Module):
    """The user's model: embeddings, layers and head of a loaded checkpoint, called as Hugging Face models are."""

    def __init__(self, inner, scale: float = 1.0):
        super().__init__()
        self.inner, self.scale = inner, scale
        self.layers = inner.layers  # what a hook-based cache reaches into

    def forward(self, input_ids, attention_mask=None, **unused):
        return SimpleNamespace(logits=self.scale * self.inner(input_ids, attention_mask=attention_mask).logits)


def load(source="tiny-llada"):
    """The factory ``--candidate-model`` calls with ``--model``'s name or folder."""
    from veridec.testing import load_check_model

    return MyLLaDA(load_check_model(source))


def load_scaled(source="tiny-llada"):
    from veridec.testing import load_check_model

    return MyLLaDA(load_check_model(source), scale=1.001)


def hooked_generate(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                    remasking="low_confidence", mask_id=126336):
    """LLaDA's sampler with a forward hook on the last layer that counts the layer's calls (one per forward)."""
    seen = []
    handle = model.layers[-1].register_forward_hook(lambda module, args, output: seen.append(1))
    try:
        out = llada_generate(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id)
    finally:
        handle.remove()
    assert len(seen) == steps, f"the hook saw {len(seen)} layer calls for {steps} steps"
    return out
