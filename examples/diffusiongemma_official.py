"""transformers' own ``DiffusionGemmaForBlockDiffusion.generate`` in the checker's calling convention: the
thinnest wrapper: the entropy bound goes in the official sampler config, a static cache runs uncompiled on a CPU,
and no ``attention_mask`` is passed when there is none (the official ``generate`` fails on an explicit None,
spec/diffusiongemma.md DG9.8).

    veridec check examples/diffusiongemma_official.py:generate --against diffusiongemma
"""

from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig


def generate(model, input_ids, attention_mask=None, entropy_bound=0.1, **settings):
    if settings.get("cache_implementation") == "static":
        settings["disable_compile"] = True
    if attention_mask is not None:
        settings["attention_mask"] = attention_mask
    sampler = EntropyBoundSamplerConfig(entropy_bound=float(entropy_bound))
    return model.generate(input_ids, sampler_config=sampler, **settings).sequences
