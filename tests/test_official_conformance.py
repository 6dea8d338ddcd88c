"""The official samplers, checked with ``veridec check`` itself (spec SQ1.8, SQ2.6, FD4, FD8), on demand.

The official files are not part of this repository (their code is not ours to ship). Point these variables at
local copies to run them; otherwise each test is skipped with that reason. They import their own modelling
packages for real (Fast-dLLM's ``llada/model``, which needs einops; Dream's generation_utils needs
transformers 4.46), so run them in an environment that has those:

    VERIDEC_OFFICIAL_LLADA=.../ML-GSAI/LLaDA/generate.py
    VERIDEC_OFFICIAL_FASTDLLM=.../f6b35ec/llada/generate.py:.../24cc59e/llada/generate.py    (either or both)
    VERIDEC_OFFICIAL_DREAM=.../Fast-dLLM/dream/model/generation_utils.py
    pytest tests/test_official_conformance.py

Every test is one ``check_decoder`` call with its default options (200 cases) on the shipped default model or the
tiny check models: the official file passes, the cases where it fails as documented (spec EC6, FD9, SQ1.9, SQ1.10,
SQ2.8) counted apart. In CI the same official code is
held by the golden traces it recorded (tests/test_golden.py), which cover what these cannot: the official
modellings' own forwards, padding ignored upstream, and the documented upstream defects.
"""

import inspect
import os
import sys
from pathlib import Path

import pytest
import torch
from veridec.testing import check_decoder, load_candidate

TRIALS = int(os.environ.get("VERIDEC_CONFORMANCE_TRIALS", "200"))
FASTDLLM_FILES = [path for path in os.environ.get("VERIDEC_OFFICIAL_FASTDLLM", "").split(os.pathsep) if path]


def official(variable: str, function: str, path: str | None = None):
    path = path or os.environ.get(variable)
    if not path:
        pytest.skip(f"set {variable} to a local copy of the official file to run this comparison")
    return load_candidate(f"{path}:{function}")


def checked(candidate, against, **options):
    """check_decoder with its default options (batch, padding and prompt masks drawn wherever the candidate takes
    them): the official file passes, its own defects counted apart (spec EC6)."""
    result = check_decoder(candidate, against, model=options.pop("model", "tiny-llada"), max_examples=TRIALS,
                           **options)
    print(f"{result.candidate} against {result.against} on {result.model}: {result.trials} cases, "
          f"official defects reproduced {result.official_defects}, knobs {result.knobs}")
    assert result.passed, result.markdown()
    return result


@pytest.mark.parametrize("model", ["default", "tiny-llada"])
def test_llada_generate_passes_veridec_check(model):
    checked(official("VERIDEC_OFFICIAL_LLADA", "generate"), "llada", model=model)


@pytest.mark.parametrize("model", ["default", "tiny-llada"])
@pytest.mark.parametrize("cache, function", [("none", "generate"), ("prefix", "generate_with_prefix_cache"),
                                             ("dual", "generate_with_dual_cache")])
@pytest.mark.parametrize("path", FASTDLLM_FILES or [None], ids=lambda p: "unset" if p is None else Path(p).parent.name)
def test_fastdllm_passes_veridec_check(path, cache, function, model):
    """VERIDEC_OFFICIAL_FASTDLLM: one or more llada/generate.py files (f6b35ec, the June 2025 24cc59e), separated
    by the path separator; a file without ``factor`` is the June 2025 loop."""
    candidate = official("VERIDEC_OFFICIAL_FASTDLLM", function, path)
    june_2025 = "factor" not in inspect.signature(candidate).parameters
    checked(candidate, "fastdllm-2025-06" if june_2025 else "fastdllm", cache=cache, model=model)


def test_dream_diffusion_generate_passes_veridec_check():
    path = os.environ.get("VERIDEC_OFFICIAL_DREAM")
    if not path:
        pytest.skip("set VERIDEC_OFFICIAL_DREAM to a local copy of Dream's generation_utils.py to run this comparison")
    module = sys.modules[load_candidate(f"{path}:DreamGenerationMixin").__module__]

    def diffusion_generate(model, input_ids, attention_mask=None, max_new_tokens=None, steps=512, eps=1e-3,
                           alg="origin", alg_temp=None, temperature=0.0, top_p=None, top_k=None, mask_token_id=None,
                           generation_tokens_hook_func=lambda step, x, logits: x,
                           generation_logits_hook_func=lambda step, x, logits: logits):
        """The official mixin on a model in Dream's convention (veridec.adapters.DreamConvention)."""
        generator = type("Official", (module.DreamGenerationMixin,), {
            "__call__": lambda self, *args: model(*args), "device": model.device, "config": model.config,
            "generation_config": module.DreamGenerationConfig(mask_token_id=mask_token_id)})()
        config = module.DreamGenerationConfig(
            mask_token_id=mask_token_id, pad_token_id=model.config.pad_token_id, max_new_tokens=max_new_tokens,
            steps=steps, eps=eps, alg=alg, alg_temp=alg_temp, temperature=temperature, top_p=top_p, top_k=top_k)
        return generator.diffusion_generate(input_ids, generation_config=config, attention_mask=attention_mask,
                                            generation_tokens_hook_func=generation_tokens_hook_func,
                                            generation_logits_hook_func=generation_logits_hook_func)

    torch.set_num_threads(1)
    # rows have equal mask counts here (Dream cases draw no prompt masks): unequal ones are SQ2.4's row_clamp
    # ties="torch": at an exact tie on top-p's boundary (common with the check model's twin tokens) veridec's
    # sort is then the official unstable torch.sort (SQ2.5); with the lowest-id rule the 272nd case differs
    # Dream's two hooks are drawn and passed through (SQ2.7)
    checked(diffusion_generate, "dream", model="tiny-dream", max_batch=3, ties="torch")
