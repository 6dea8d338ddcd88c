"""A model object of the user's own and a decoder that hooks its parts (spec/exactness.md EC9). ``MyLLaDA`` is
a ``torch.nn.Module`` with a Hugging Face-style forward (``model(input_ids=x, attention_mask=None)`` returning
``.logits``) around its layers; ``hooked_generate`` is LLaDA's sampler (``examples/llada_sampler.py``) that
installs a forward hook on the model's last layer while it decodes, as feature caches do. The check runs the
decoder on this object, records the calls at its top-level forward, and runs veridec's LLaDA sampler on
veridec's own load of the same weights:

    veridec check examples/own_model.py:hooked_generate --against llada --model tiny-llada \\
        --candidate-model examples/own_model.py:load

``load_scaled`` is the same model with its logits scaled by 1.001: the preflight refuses it (beyond rounding).
``prompt_feature_cache`` is an approximate cache in dLLM-Cache's manner: forward hooks on every layer keep the
prompt positions' layer outputs from a refresh every ``refresh`` forwards and hand them back in between, so the
prompt's features go stale as the response fills in; tier A measures what that changes (its calls' drift):

    veridec check examples/own_model.py:prompt_feature_cache --against llada --model tiny-llada \
        --candidate-model examples/own_model.py:load --tier A
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


def prompt_feature_cache(model, prompt, steps=128, gen_length=128, block_length=128, temperature=0.0,
                         remasking="low_confidence", mask_id=126336, refresh=4):
    """LLaDA's sampler with the prompt's layer outputs recomputed only every ``refresh`` forwards (1: exact)."""
    forwards, kept = [0], {}

    def count(module, args):
        forwards[0] += 1

    def stale_prompt(layer):
        def hook(module, args, output):
            hidden, weights = output  # [B, L, hidden]
            if (forwards[0] - 1) % refresh == 0 or layer not in kept:
                kept[layer] = hidden[:, : prompt.shape[1]].detach().clone()
                return output
            return torch.cat([kept[layer], hidden[:, prompt.shape[1]:]], dim=1), weights

        return hook

    handles = [model.register_forward_pre_hook(count)]
    handles += [block.register_forward_hook(stale_prompt(i)) for i, block in enumerate(model.layers)]
    try:
        return llada_generate(model, prompt, steps, gen_length, block_length, temperature, remasking, mask_id)
    finally:
        for handle in handles:
            handle.remove()
