"""``check_engine``: hold an engine's dLLM algorithm (SGLang's contract) against a veridec rule by logit replay on
drawn cases, and shrink a failure (spec/engines.md). Each case runs ``testing.engines.replay_case``; its first
divergence fails the check unless a difference the engine states accounts for it (a typed outcome, counted)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from .engine_compare import explained
from .engines import STEP_SECONDS, block_logits, float64_model, replay_case
from .families.common import ordinary_tokens
from .families.sglang import BUILT_IN, RULES
from .models import load_check_model
from .sglang import ContractError, EngineConfig, load_sglang_algorithm

STAND_INS = ("ForwardBatch: veridec's ReplayBatch with the real batch_size, input_ids (the canvas block, written in "
             "place) and dllm_prompt_mask; any other field refused by name",
             "LogitsProcessorOutput: none (step takes full_logits, the model's [B*b, V] float64 tensor itself)",
             "ModelRunner / ServerArgs / ModelConfig / resolving_view / get_algorithm: import-time stand-ins that "
             "refuse any call (step never calls them)", "is_npu: False (the CPU path)")


@dataclass
class EngineResult:
    """The outcome of ``check_engine``: ``passed``, the cases run, the stated differences met (name -> cases),
    and the shrunk failure (``failure``: its Divergence; ``reproducer``: its steps, logits in, decisions out)."""

    algorithm: str
    against: str
    model: str
    seed: int
    cases: int = 0
    steps: int = 0
    passed: bool = True
    differences: dict = field(default_factory=dict)
    failure: object = None
    first_failing_case: dict | None = None
    failure_case: dict | None = None  # the shrunk failing case (resolved)
    trials_to_detection: int | None = None
    reproducer: dict | None = None
    stand_ins: tuple = STAND_INS
    logits: str = "float64 logits, tier E"  # what both sides read

    def to_dict(self) -> dict:
        out = asdict(self)
        out["failure"] = None if self.failure is None else {k: v for k, v in asdict(self.failure).items()
                                                             if k != "record"}
        return out

    def markdown(self) -> str:
        from .engine_report import engine_markdown

        return engine_markdown(self)


def check_engine(algorithm, against: str | None = None, *, model=None, config: dict | None = None,
                 max_examples: int = 200, seed: int = 0, max_rows: int = 3, sglang_root=None,
                 indel_ids: tuple | None = None, step_seconds: float = STEP_SECONDS,
                 fdfo: bool = False) -> EngineResult:
    """Hold ``algorithm`` (a built-in SGLang name: LowConfidence, JointThreshold, JointThresholdInDel, loaded
    from an installed sglang or ``sglang_root``; or a class written to SGLang's ``DllmAlgorithm`` contract)
    against the veridec rule ``against`` (threshold, threshold-strict, editing; a built-in's
    default: its counterpart; diffusiongemma for Gemma4Renoise, spec/engines.md EN8) on ``max_examples`` drawn
    cases of up to ``max_rows`` rows on ``model`` (a name or a model; default: the rule's, blocks or
    diffusiongemma). ``config``: algorithm_config entries held fixed. ``indel_ids``: InDel's (DELETE, SPLIT) ids
    (default: the model's two highest ordinary ids). ``fdfo``: SGLang's first-done-first-out mode (one step per
    round, rows at their own blocks, states carried)."""
    cls, config_class, label = _algorithm(algorithm, sglang_root)
    against = _against(algorithm, against)
    differences = BUILT_IN[algorithm][1] if isinstance(algorithm, str) and algorithm in BUILT_IN else ()
    rule, model = RULES[against], RULES[against].model if model is None else model
    _check_arguments(max_examples, max_rows, config, step_seconds)
    if rule.uniform_state:
        if fdfo:
            raise ValueError("fdfo: the uniform-state replay runs SGLang's sync loop only (spec/engines.md EN8)")
        from .engine_renoise_check import check_renoise_engine

        return check_renoise_engine(cls, config_class, label, against, model, config, max_examples, seed, max_rows,
                                    step_seconds, differences)
    name = model if isinstance(model, str) else type(model).__name__
    loaded = float64_model(load_check_model(model) if isinstance(model, str) else model)
    indel = tuple(indel_ids) if indel_ids is not None else tuple(ordinary_tokens(loaded)[-2:][::-1])
    build = _builder(cls, config_class, label, loaded.special.mask_id, indel, fdfo)
    result = EngineResult(label, against, name, seed)
    run = lambda case: _run_case(build, rule, differences, loaded, case, indel, step_seconds)
    _search(run, engine_cases(loaded, rule, config or {}, max_rows, fdfo), result, max_examples)
    if result.failure is not None:
        result.reproducer = _reproducer(build, rule, differences, loaded, result, indel, step_seconds)
    return result


def _algorithm(algorithm, root):
    if isinstance(algorithm, str):
        if ":" in algorithm:
            from .candidates import load_candidate  # FILE.py:CLASS, imported as a candidate's file is

            loaded = load_candidate(algorithm)
            return _contract_class(loaded, algorithm), EngineConfig, algorithm
        cls, config_class = load_sglang_algorithm(algorithm, root)
        return cls, config_class, f"sglang:{algorithm}"
    return _contract_class(algorithm, getattr(algorithm, "__qualname__", repr(algorithm))), EngineConfig, \
        getattr(algorithm, "__qualname__", repr(algorithm))


def _contract_class(cls, label: str):
    """``cls`` if it keeps SGLang's algorithm contract's shape: a class with ``step``."""
    if not isinstance(cls, type):
        raise ContractError(f"{label}: an engine algorithm is a class built from a DllmConfig (SGLang's contract), "
                            f"got {type(cls).__name__}")
    if not callable(getattr(cls, "step", None)):
        raise ContractError(f"{label} does not implement SGLang's DllmAlgorithm contract: no step(forward_batch, "
                            "full_logits, states) -> List[bool] method")
    return cls


def _against(algorithm, against):
    if against is None:
        if isinstance(algorithm, str) and algorithm in BUILT_IN:
            return BUILT_IN[algorithm][0]
        raise ValueError(f"against: name the veridec rule a user's algorithm follows ({', '.join(RULES)})")
    if against not in RULES:
        raise ValueError(f"against must be one of {', '.join(RULES)}, got {against!r}")
    return against


def _check_arguments(max_examples, max_rows, config, step_seconds) -> None:
    for name, value in (("max_examples", max_examples), ("max_rows", max_rows)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if config is not None and not isinstance(config, dict):
        raise ValueError(f"config must be a dict of algorithm_config entries, got {type(config).__name__}")
    if isinstance(step_seconds, bool) or not isinstance(step_seconds, (int, float)) or not 0 < step_seconds <= 3600:
        raise ValueError(f"step_seconds must be a number of seconds in (0, 3600], got {step_seconds!r}")


def _builder(cls, config_class, label, mask_id, indel, fdfo: bool = False):
    def build(case: dict):
        config = config_class(algorithm=cls.__name__, algorithm_config=dict(case["config"]),
                              block_size=case["block_size"], mask_id=mask_id,
                              max_running_requests=len(case["prompts"]), delete_token_id=indel[0],
                              split_token_id=indel[1], first_done_first_out_mode=fdfo)
        try:
            return cls(config)
        except Exception as err:  # the class's own refusal: the contract's constructor failed
            raise ContractError(f"{label}({type(config).__name__}) raised {type(err).__name__}: {err}") from err
    return build


@st.composite
def engine_cases(draw, model, rule, fixed: dict, max_rows: int, fdfo: bool = False):
    """A case: 1..max_rows prompts of 1-6 ordinary tokens, 1-12 new tokens in blocks of 1-6, the rule's knobs
    (``fixed`` overrides them)."""
    tokens = ordinary_tokens(model)
    rows = draw(st.integers(1, max_rows))
    prompts = [draw(st.lists(st.sampled_from(tokens), min_size=1, max_size=6)) for _ in range(rows)]
    config = {name: draw(strategy) for name, strategy in rule.knobs.items()}
    return {"prompts": prompts, "gen_length": draw(st.integers(1, 12)), "block_size": draw(st.integers(1, 6)),
            "config": {**config, **fixed}, **({"fdfo": True} if fdfo else {})}


def resolve_case(case: dict, model) -> dict:
    """``{"at_confidence": r}`` thresholds replaced by the r-th largest confidence (float64, 0 = the largest) of
    row 0's masked positions at its first forward (the last when fewer): a threshold equal to a confidence."""
    config = dict(case["config"])
    for name, value in config.items():
        if isinstance(value, dict):
            prompt, size = case["prompts"][0], case["block_size"]
            canvas = torch.full((size * (len(prompt) // size + 1),), model.special.mask_id, dtype=torch.long,
                                device=_device(model))  # [L]
            canvas[: len(prompt)] = torch.tensor(prompt, dtype=torch.long, device=canvas.device)
            logits = block_logits(model, canvas, len(prompt) // size, size, case.get("rounding"))  # [b, V]
            masked = canvas[-size:] == model.special.mask_id  # [b]
            found = torch.softmax(logits[masked], dim=-1).max(dim=-1).values.sort(descending=True).values
            config[name] = found[min(value["at_confidence"], found.numel() - 1)].item()
    return {**case, "config": config}


def _run_case(build, rule, differences, model, case: dict, indel: tuple, step_seconds: float, record: bool = False):
    """One case: (verdict, replay); verdict "pass", "fail", or a stated difference's name."""
    case = {**resolve_case(case, model), "indel_ids": list(indel)}
    try:
        algorithm = build(case)
    except ContractError as err:
        raise _Refused(str(err)) from err
    replay = replay_case(algorithm, rule, model, case, record=record, step_seconds=step_seconds)
    if replay.divergence is None:
        return "pass", replay
    return explained(replay.divergence, differences) or "fail", replay


def _device(model) -> torch.device:
    return next(model.parameters()).device


class _Refused(Exception):
    """The algorithm cannot be built at all: a bad argument, said before any case."""


def _search(run, strategy, result: EngineResult, max_examples: int) -> None:
    failures = []

    @hypothesis_settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                         verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), print_blob=False,
                         report_multiple_bugs=False, phases=(Phase.generate, Phase.shrink))
    @hypothesis_seed(result.seed)
    @given(strategy)
    def trial(case):
        verdict, replay = run(case)
        if not failures:
            result.cases += 1
            result.steps += replay.steps
            if verdict not in ("pass", "fail"):
                result.differences[verdict] = result.differences.get(verdict, 0) + 1
        if verdict == "fail":
            failures.append(replay)
            raise AssertionError(replay.divergence.message)

    try:
        with torch.no_grad():
            trial()
    except AssertionError:
        pass
    except _Refused as err:
        raise ContractError(str(err)) from None
    if failures:
        result.passed, result.trials_to_detection = False, result.cases
        result.failure, result.first_failing_case = failures[-1].divergence, failures[0].case
        result.failure_case = failures[-1].case


def _reproducer(build, rule, differences, model, result: EngineResult, indel, step_seconds) -> dict:
    """The shrunk case replayed with its transcript: every step's blocks and logits, both sides' decisions."""
    case = {k: v for k, v in result.failure_case.items() if k != "indel_ids"}
    _, replay = _run_case(build, rule, differences, model, case, indel, step_seconds, record=True)
    return {"algorithm": result.algorithm, "against": result.against, "case": replay.case,
            "divergence": replay.divergence.message if replay.divergence else None, "steps": replay.transcript}


def reproducer_json(result: EngineResult) -> str:
    return json.dumps(result.reproducer)
