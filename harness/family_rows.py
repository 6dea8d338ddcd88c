"""The exactness table's models of the decoder families whose decoders are not the mask decoders' presets: each
table model name -> its row module (``load``, ``prompts``, ``kinds``, ``DECODER``). The default table brings them
along (``workloads.table_models``), as it brings ``hmm``."""

from __future__ import annotations

from . import diffusiongemma_rows, fastdllm_v2_rows
from veridec.models.shipped import load_model

from .workloads import FAMILY_TABLE_MODELS, prompts_for

FAMILY_MODELS = {"diffusiongemma": diffusiongemma_rows, "diffusiongemma-random": diffusiongemma_rows,
                 fastdllm_v2_rows.MODEL: fastdllm_v2_rows}
FAMILY_DECODERS = (diffusiongemma_rows.DECODER, fastdllm_v2_rows.DECODER)
assert tuple(FAMILY_MODELS) == FAMILY_TABLE_MODELS  # the names table_models lists are the ones loaded here


def family_of(model):
    """The row module of a table model (a uniform-state model: DiffusionGemma; the v2 layout: Fast-dLLM v2), or
    None for the mask decoders' models."""
    if getattr(type(model), "uniform_state", False):
        return diffusiongemma_rows
    if getattr(model, "layout", None) == "fastdllm_v2":
        return fastdllm_v2_rows
    return None


def load_table_model(name: str, device, dtype):
    """A family's table model (``FAMILY_MODELS``), else the shipped model or folder ``name`` names."""
    if name in FAMILY_MODELS:
        return FAMILY_MODELS[name].load(name, dtype, device)
    return load_model(name, device=device, dtype=dtype)


def table_prompts(model_name: str, model, n: int, seed: int):
    """The table's left-padded prompts [n, P] and mask: a family's own, else ``workloads.prompts_for``'s."""
    family = family_of(model)
    return family.prompts(model, n, seed) if family else prompts_for(model_name, model, n, seed)
