"""``check_engine`` for a uniform-state algorithm (spec/engines.md EN8): SGLang's ``Gemma4Renoise`` (or a class
written to its contract) against DiffusionGemma's rule by logit replay (``testing.engine_renoise``) on drawn
cases of a DiffusionGemma model, the first divergence shrunk as for the other engine targets."""

from __future__ import annotations

import torch

from .engine_check import EngineResult, _search
from .engine_compare import explained
from .engine_renoise import replay_renoise_case
from .families.sglang_renoise import renoise_cases, sglang_config
from .models import load_check_model
from .sglang import ContractError

STAND_INS = ("ForwardBatch: veridec's RenoiseBatch with the real batch_size, input_ids (each row's canvas, written "
             "in place), rids (the requests' seeds), a DLLM-extend forward_mode and the input-preparation slots the "
             "algorithm writes; any other field refused by name",
             "ModelRunner: veridec's ReplayRunner: model_config.hf_config is the model's own config; "
             "model.get_input_embeddings() the model's real embedding (weight and scale); "
             "model.prepare_dllm_input_embeds keeps the self-conditioning signal; forward runs veridec's "
             "DiffusionGemma (transformers' modelling) on the engine's canvases",
             "LogitsProcessorOutput: an object whose full_logits is the model's [B*L, V] float32 tensor itself",
             "ServerArgs / ModelConfig / resolving_view / declare_resolution / VocabParallelEmbedding / cuda graph "
             "config / tensor_model_parallel_all_reduce: import-time stand-ins that refuse any call")

LOGITS = "the model's float32 logits, as SGLang's step reads them; tier E up to the stated differences"


def renoise_model(model):
    """A DiffusionGemma model for the replay: a name or folder (load_check_model) or a loaded one, in float64
    (its logits come back float32, as the official forward casts them)."""
    loaded = load_check_model(model) if isinstance(model, str) else model
    if getattr(type(loaded), "uniform_state", False) is not True:
        raise ValueError(f"model: a uniform-state algorithm is replayed on a DiffusionGemma model, got "
                         f"{type(loaded).__name__}")
    return loaded.to(torch.float64)


def check_renoise_engine(cls, config_class, label: str, against: str, model, config: dict | None,
                         max_examples: int, seed: int, max_rows: int, step_seconds: float,
                         differences: tuple = ()) -> EngineResult:
    """The search and shrink of ``check_engine`` for a uniform-state rule (its arguments, checked there)."""
    if not callable(getattr(cls, "run", None)):
        raise ContractError(f"{label} does not implement the uniform-state contract: a uniform-state algorithm runs "
                            "its own loop, run(model_runner, forward_batch, states) (SGLang's DllmAlgorithm.run: "
                            "subclass it), spec/engines.md EN8")
    name = model if isinstance(model, str) else type(model).__name__
    loaded = renoise_model(model)
    build = renoise_builder(cls, config_class, label, loaded)
    result = EngineResult(label, against, name, seed, stand_ins=STAND_INS, logits=LOGITS)
    run = lambda case, record=False: run_renoise_case(build, differences, loaded, case, step_seconds, record)
    _search(run, renoise_cases(loaded, max_rows, config or {}), result, max_examples)
    if result.failure is not None:
        verdict, replay = run(result.failure_case, True)
        result.reproducer = {"algorithm": label, "against": against, "case": replay.case,
                             "divergence": replay.divergence.message if replay.divergence else None,
                             "steps": replay.transcript}
    return result


def renoise_builder(cls, config_class, label: str, model):
    """case -> the algorithm built from a ``DllmConfig`` of the case's knobs (SGLang's nested sections), the
    model's canvas as its block, a separate context encoding."""
    def build(case: dict):
        config = config_class(algorithm=cls.__name__, algorithm_config=sglang_config(case["config"]),
                              block_size=model.canvas_length, mask_id=-1, max_running_requests=len(case["prompts"]),
                              first_done_first_out_mode=False, requires_separate_context_encoding=True,
                              capture_input_preparation=False, delete_token_id=None, split_token_id=None)
        try:
            return cls(config)
        except Exception as err:  # the class's own refusal: the contract's constructor failed
            raise ContractError(f"{label}({type(config).__name__}) raised {type(err).__name__}: {err}") from err
    return build


def run_renoise_case(build, differences, model, case: dict, step_seconds: float, record: bool = False):
    """One case: (verdict, replay); verdict "pass", "fail", or a stated difference's name."""
    from .engine_check import _Refused

    try:
        algorithm = build(case)
    except ContractError as err:
        raise _Refused(str(err)) from err
    with torch.no_grad():
        replay = replay_renoise_case(algorithm, model, case, record=record, step_seconds=step_seconds)
    if replay.divergence is None:
        return "pass", replay
    return explained(replay.divergence, differences) or "fail", replay
