"""Block diffusion samplers with JetAstra/SDAR's published signature: ``block_diffusion_generate(model, prompt,
mask_id, ...)`` where ``prompt`` is a tokenizer's output, a dict (BatchEncoding) holding ``input_ids`` [B, P], read as
``prompt["input_ids"]``. The decoding is ``examples/sdar_sampler.py``'s. The check calls them as the published code
is called, unwrapped (spec/block_diffusion.md BD9):

    veridec check examples/sdar_official_signature.py:block_diffusion_generate --against sdar --prompt-form dict
    veridec check examples/sdar_official_signature.py:annotated_block_diffusion_generate --against sdar

the first as published (no annotation: ``--prompt-form dict`` says how it takes the prompt), the second with its
prompt annotated ``dict``, which the check reads from the signature.
"""

from sdar_sampler import generate


def block_diffusion_generate(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8,
                             temperature=1.0, top_k=0, top_p=1.0, remasking_strategy="low_confidence_dynamic",
                             confidence_threshold=0.85, eb_threshold=None, stopping_criteria_idx=None):
    return generate(model, prompt["input_ids"], mask_id, gen_length, block_length, denoising_steps, temperature,
                    top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold, stopping_criteria_idx)


def annotated_block_diffusion_generate(model, prompt: dict, mask_id, gen_length=128, block_length=8,
                                       denoising_steps=8, temperature=1.0, top_k=0, top_p=1.0,
                                       remasking_strategy="low_confidence_dynamic", confidence_threshold=0.85,
                                       eb_threshold=None, stopping_criteria_idx=None):
    return block_diffusion_generate(model, prompt, mask_id, gen_length, block_length, denoising_steps, temperature,
                                    top_k, top_p, remasking_strategy, confidence_threshold, eb_threshold,
                                    stopping_criteria_idx)
