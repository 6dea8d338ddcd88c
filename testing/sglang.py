"""SGLang's dLLM algorithm contract, as the replay (``testing.engines``) drives it (sglang 0.5.23,
``sglang/srt/dllm/algorithm/base.py``): a class built from a ``DllmConfig`` whose ``step(forward_batch,
full_logits, states) -> List[bool]`` advances every row's block in place and says which rows may emit.

SGLang's own files are never part of veridec: ``load_sglang_algorithm`` reads them from an installed ``sglang``
or from a folder holding ``sglang/srt/dllm/`` (an unzipped wheel), importing ``dllm/config.py``,
``dllm/algorithm/base.py`` and the algorithm's file as they are, with stand-ins for the modules they import
beyond those (``STAND_INS``; only their names are looked up at import, and ``step`` never touches them).
What the replay hands ``step`` is real where the contract reads it: ``ReplayBatch`` carries the three fields
the algorithms read (``batch_size``, ``input_ids`` [B*b] written in place, ``dllm_prompt_mask`` [B, b]); any
other field is refused by name. ``full_logits`` is the model's [B*b, V] tensor itself (the
``LogitsProcessorOutput.full_logits`` the base loop passes).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import torch

ALGORITHMS = {"LowConfidence": "low_confidence", "JointThreshold": "joint_threshold",
              "JointThresholdInDel": "joint_threshold_indel",
              "Gemma4Renoise": "gemma4_renoise"}  # built-in name -> file in dllm/algorithm/
LOADED = ("sglang.srt.dllm.config", "sglang.srt.dllm.algorithm.base")  # imported as they are, before the algorithm
STAND_INS = ("sglang.srt.layers.logits_processor", "sglang.srt.model_executor.forward_batch_info",
             "sglang.srt.model_executor.model_runner", "sglang.srt.server_args", "sglang.srt.utils",
             "sglang.srt.arg_groups.overrides", "sglang.srt.configs.model_config",
             "sglang.srt.arg_groups.model_override_base", "sglang.srt.distributed",
             "sglang.srt.layers.vocab_parallel_embedding", "sglang.srt.model_executor.cuda_graph_config")
READ_FIELDS = ("batch_size", "input_ids", "dllm_prompt_mask")


class ContractError(ValueError):
    """A class or a step that does not keep SGLang's algorithm contract (said with the step where it broke)."""


class ReplayBatch:
    """The ``ForwardBatch`` fields a dLLM step reads: ``batch_size``, ``input_ids`` [B*b] (long, written in
    place by the step), ``dllm_prompt_mask`` [B, b] (bool: prompt positions of each row's block). Reading any
    other field raises ``ContractError`` naming it."""

    def __init__(self, input_ids: torch.Tensor, prompt_mask: torch.Tensor):
        self.batch_size = prompt_mask.shape[0]
        self.input_ids = input_ids
        self.dllm_prompt_mask = prompt_mask

    def __getattr__(self, name):
        raise ContractError(f"the step read forward_batch.{name}: the replay's ForwardBatch carries only "
                            f"{', '.join(READ_FIELDS)} (what SGLang's dLLM algorithms read)")


class EngineConfig:
    """SGLang's ``DllmConfig`` fields (used where sglang's own class is not loaded: a user's algorithm)."""

    def __init__(self, algorithm: str, algorithm_config: dict, block_size: int, mask_id: int,
                 max_running_requests: int = 1, first_done_first_out_mode: bool = False,
                 requires_separate_context_encoding: bool = False, capture_input_preparation: bool = False,
                 delete_token_id: int | None = None, split_token_id: int | None = None):
        self.algorithm, self.algorithm_config, self.block_size, self.mask_id = (algorithm, algorithm_config,
                                                                                block_size, mask_id)
        self.max_running_requests, self.first_done_first_out_mode = max_running_requests, first_done_first_out_mode
        self.requires_separate_context_encoding = requires_separate_context_encoding
        self.capture_input_preparation = capture_input_preparation
        self.delete_token_id, self.split_token_id = delete_token_id, split_token_id


def sglang_root(root: str | Path | None = None) -> Path:
    """The folder holding ``sglang/``: ``root`` when given, else where an installed sglang lives (found
    without importing it)."""
    if root is None:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise ContractError("sglang is not installed: pass the folder of an unzipped sglang wheel "
                                "(--sglang-root) or `pip install --no-deps sglang==0.5.23`")
        return Path(list(spec.submodule_search_locations)[0]).parent
    folder = Path(root)
    if not (folder / "sglang" / "srt" / "dllm" / "algorithm" / "base.py").is_file():
        raise ContractError(f"sglang root: {folder} holds no sglang/srt/dllm/algorithm/base.py")
    return folder


def load_sglang_algorithm(name: str, root: str | Path | None = None):
    """SGLang's algorithm class ``name`` (LowConfidence, JointThreshold, JointThresholdInDel) and its
    ``DllmConfig`` class, imported from ``root`` (module docstring)."""
    if name not in ALGORITHMS:
        raise ContractError(f"algorithm must be one of {', '.join(ALGORITHMS)} (SGLang's built-in dLLM "
                            f"algorithms the replay checks) or FILE.py:CLASS, got {name!r}")
    folder = sglang_root(root) / "sglang" / "srt" / "dllm"
    with _stand_ins():
        config = _import(LOADED[0], folder / "config.py")
        _import(LOADED[1], folder / "algorithm" / "base.py")
        module = _import(f"sglang.srt.dllm.algorithm.{ALGORITHMS[name]}", folder / "algorithm" /
                         f"{ALGORITHMS[name]}.py")
    return module.Algorithm, config.DllmConfig


def _import(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def _stand_ins():
    """sys.modules with the packages and ``STAND_INS`` the loaded files import; restored after (an installed
    sglang's own modules are left as they were)."""
    names = ("sglang", "sglang.srt", "sglang.srt.dllm", "sglang.srt.dllm.algorithm", *STAND_INS, *LOADED,
             *(f"sglang.srt.dllm.algorithm.{file}" for file in ALGORITHMS.values()))
    saved = {name: sys.modules.get(name) for name in names}
    for name in names[:4]:
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = []
    for name, fields in _stand_in_fields().items():
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__dict__.update(fields)
    try:
        yield
    finally:
        for name, module in saved.items():
            sys.modules.pop(name, None) if module is None else sys.modules.__setitem__(name, module)


def _stand_in_fields() -> dict:
    def unavailable(*args, **kwargs):
        raise ContractError("the replay builds no SGLang server, model runner or scheduler")

    placeholder = type("StandIn", (), {"__init__": unavailable})
    fields = {"sglang.srt.dllm.algorithm": {"get_algorithm": unavailable, "get_algorithm_cls": unavailable},
              "sglang.srt.layers.logits_processor": {"LogitsProcessorOutput": placeholder},
              "sglang.srt.model_executor.forward_batch_info": {"ForwardBatch": ReplayBatch},
              "sglang.srt.model_executor.model_runner": {"ModelRunner": placeholder},
              "sglang.srt.server_args": {"ServerArgs": placeholder},
              "sglang.srt.utils": {"is_npu": lambda: False},
              "sglang.srt.arg_groups.overrides": {"resolving_view": unavailable, "declare_resolution": unavailable},
              "sglang.srt.arg_groups.model_override_base": {"attention_backends_of": unavailable,
                                                            "model_config_of": unavailable},
              "sglang.srt.distributed": {"tensor_model_parallel_all_reduce": unavailable},
              "sglang.srt.layers.vocab_parallel_embedding": {"VocabParallelEmbedding": placeholder},
              "sglang.srt.model_executor.cuda_graph_config": {"Backend": placeholder, "Phase": placeholder,
                                                              "with_phase": unavailable},
              "sglang.srt.configs.model_config": {"ModelConfig": placeholder}}
    return fields
