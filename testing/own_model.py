"""A candidate on the user's own model object (spec/exactness.md EC9): the candidate runs on ``candidate_model``
(any ``torch.nn.Module`` answering ``model(x)`` with logits: the user's modelling, patched or hooked by the
decoder), the target on veridec's model
of the same weights. Before any case, a preflight holds the two models against each other: the largest logit
difference on two fixed canvases must be within the measured rounding of veridec's model (``numerics.tolerance``
of its logits against a copy one precision up, or, for a model of a coarser dtype, against a rerun of veridec's
model cast to that dtype: spec EC13); that difference is then the numeric error that excuses ties."""

from __future__ import annotations

import copy
import hashlib
import inspect
import math

import torch

from veridec.adapters import adapt
from veridec.numerics import HIGHER, tolerance

from .guard import IMPORT_TIMEOUT, CandidateExited, CandidateTimedOut, guarded, import_seconds

PREFLIGHT_LENGTH = 24  # positions of each preflight canvas (fewer if the model is shorter)


class CandidateModelMismatch(ValueError):
    """The user's model does not compute veridec's model's function (other weights, another layout), or does
    not answer ``model(x)`` with logits."""


HF = "hf"  # candidate_model's name for the model folder loaded with transformers' auto classes


def own_model(candidate_model, model_source: str | None,
              trust_remote_code: bool = False) -> tuple[torch.nn.Module | None, str | None]:
    """``candidate_model`` as (the module, its label): a module as given, "FILE.py:FACTORY" loaded and called
    (with ``model_source``, the name or folder of veridec's model, when the factory takes an argument and there
    is one), or "hf": ``model_source``'s folder loaded with transformers (``load_hf_model``)."""
    if candidate_model is None:
        return None, None
    if trust_remote_code and candidate_model != HF:
        raise ValueError("trust_remote_code applies to candidate_model='hf' (--hf-model) only")
    if candidate_model == HF:
        return load_hf_model(model_source, trust_remote_code), HF + (" (remote code)" if trust_remote_code else "")
    label = type(candidate_model).__name__
    if isinstance(candidate_model, str):
        from .candidates import CandidateError, load_candidate

        label = candidate_model
        try:
            factory = load_candidate(candidate_model)
        except CandidateError as err:
            raise ValueError(f"candidate_model: {err} (FILE.py:FACTORY, a function returning the model)") from err
        takes = [p for p in inspect.signature(factory).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        seconds = import_seconds()
        try:
            with guarded(seconds, f"the model factory {label}", code=2):
                candidate_model = factory(model_source) if takes and model_source is not None else factory()
        except CandidateExited as err:
            raise ValueError(f"candidate_model: {label} cannot be loaded: it called {err}") from err
        except CandidateTimedOut as err:
            raise ValueError(f"candidate_model: {label} cannot be loaded: it took more than {seconds:g} s "
                             f"({IMPORT_TIMEOUT})") from err
        except BaseException as err:  # noqa: BLE001 - the user's factory (sys.exit too): named, not a traceback
            raise ValueError(f"candidate_model: {label} cannot be loaded: it raised {type(err).__name__}({err})") \
                from err
    if not isinstance(candidate_model, torch.nn.Module):
        raise ValueError(f"candidate_model must be a torch.nn.Module returning logits for model(input_ids=x) (or "
                         f"FILE.py:FACTORY returning one), got {type(candidate_model).__name__}")
    return candidate_model, label


def preflight_canvases(model) -> torch.Tensor:
    """Two canvases [2, L]: seeded random tokens (no mask) with their second half masked, and all masks."""
    length = min(PREFLIGHT_LENGTH, getattr(model, "max_length", PREFLIGHT_LENGTH))
    mask_id, vocab = model.special.mask_id, model.vocab_size
    tokens = torch.randint(0, vocab - 1, (length,), generator=torch.Generator().manual_seed(0), device="cpu")  # [L]
    tokens = tokens + (tokens >= mask_id).long()  # skip the mask id
    tokens[length // 2:] = mask_id
    return torch.stack([tokens, torch.full_like(tokens, mask_id)]).to(model.device)  # [2, L]


def logits_of(output) -> torch.Tensor:
    """The logits of a model call's output: ``.logits``, the first item of a tuple, or the tensor itself."""
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, (tuple, list)) and output:
        logits = output[0]
    if logits is None and isinstance(output, torch.Tensor):
        logits = output
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        raise CandidateModelMismatch(f"candidate_model(input_ids=x) must return logits [B, L, V] (as .logits, the "
                                     f"first item, or the tensor), got {type(output).__name__}")
    return logits


def load_hf_model(folder, trust_remote_code: bool = False) -> torch.nn.Module:
    """A checkpoint folder loaded with transformers: ``AutoModel`` where the config maps it (the official LLaDA and
    Dream folders, whose modelling code ships in the folder and runs only with ``trust_remote_code``), else
    ``AutoModelForCausalLM``; float32, eval mode, nothing downloaded. Errors name the folder and the remedy."""
    from pathlib import Path

    if not isinstance(folder, (str, Path)) or not Path(folder).is_dir():
        raise ValueError(f"candidate_model='hf' (--hf-model) loads --model's checkpoint folder with transformers; "
                         f"--model must be a folder, got {folder!r}")
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    options = dict(trust_remote_code=trust_remote_code, local_files_only=True)
    try:
        config = AutoConfig.from_pretrained(str(folder), **options)
        auto_map = getattr(config, "auto_map", None) or {}
        loader = AutoModel if "AutoModel" in auto_map else AutoModelForCausalLM
        return loader.from_pretrained(str(folder), config=config, dtype=torch.float32, **options).eval()
    except Exception as err:  # noqa: BLE001 - transformers' many failures, each named with the folder
        if "trust_remote_code" in str(err) and not trust_remote_code:
            raise ValueError(f"{folder}: its config asks for modelling code shipped in the folder (auto_map); it runs "
                             "only with --trust-remote-code (trust_remote_code=True), never by default") from err
        raise ValueError(f"{folder}: transformers could not load it ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from err


def _digest(tensor: torch.Tensor) -> tuple:
    """A tensor's identity by value: (shape, dtype, sha256 of its bytes)."""
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return tuple(tensor.shape), tensor.dtype, hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def _official_names(model) -> dict[str, str]:
    """veridec's internal tensor name -> the checkpoint's official one (the internal name where none is known)."""
    from veridec.models.layouts import LAYOUTS

    layout, cfg = LAYOUTS.get(getattr(model, "layout", None)), getattr(model, "cfg", None)
    return {} if layout is None or cfg is None else layout.tensor_names(cfg)


@torch.no_grad()
def check_same_weights(candidate_model, model) -> None:
    """Every weight of veridec's ``model`` must equal, value for value, some tensor of ``candidate_model``'s state
    dict (names aside: layouts rename them), at that tensor's dtype (a model loaded in bfloat16 holds the rounded
    float32 weights); raises CandidateModelMismatch naming the first weight found nowhere."""
    theirs = [t for t in candidate_model.state_dict().values() if isinstance(t, torch.Tensor) and not t.is_meta]
    found = {_digest(t) for t in theirs}
    dtypes = {t.dtype for t in theirs if t.is_floating_point()}
    names = _official_names(model)
    for name, tensor in model.state_dict().items():
        if not any(_digest(tensor.to(dtype)) in found for dtype in {tensor.dtype, *dtypes}):
            raise CandidateModelMismatch(
                f"candidate_model does not hold veridec's weights: none of its tensors equals {names.get(name, name)} "
                f"{tuple(tensor.shape)} (compared by a digest of their values, names aside; load the same "
                "checkpoint, with tensors neither fused nor transposed)")


@torch.no_grad()
def preflight(candidate_model, model, convention: str) -> float:
    """The largest |logit difference| between ``candidate_model`` and veridec's ``model`` (behind
    ``convention``) on ``preflight_canvases``, once its output has that shape and ``check_same_weights`` holds;
    raises CandidateModelMismatch, naming both numbers, when it exceeds the measured rounding."""
    x = preflight_canvases(model)
    ours = adapt(model, convention)(input_ids=x).logits  # [2, L, V]
    try:
        output = candidate_model(x)
    except Exception as err:  # noqa: BLE001 - the user's model: its failure is named, not a traceback
        raise CandidateModelMismatch(f"candidate_model(x) raised {type(err).__name__}: {err} (x: a canvas "
                                     f"{tuple(x.shape)} of token ids)") from err
    theirs = logits_of(output)
    if theirs.shape != ours.shape:
        raise CandidateModelMismatch(f"candidate_model returns logits {tuple(theirs.shape)} on a canvas "
                                     f"{tuple(x.shape)}; veridec's model returns {tuple(ours.shape)}")
    check_same_weights(candidate_model, model)
    higher = copy.deepcopy(model).to(HIGHER.get(model.dtype, torch.float64))
    exact = adapt(higher, convention)(input_ids=x).logits  # [2, L, V]
    finite = torch.isfinite(ours) & torch.isfinite(exact)  # banned tokens (-inf) carry no rounding
    bound = max(tolerance(ours[finite], exact[finite]), lower_rounding(model, convention, x, ours, candidate_model))
    del higher
    difference = _max_difference(ours, theirs.to(ours.device))
    if not difference <= bound:
        raise CandidateModelMismatch(
            f"candidate_model is not veridec's model of the same weights: its logits differ by up to "
            f"{difference:.3g} on the preflight canvases, beyond the measured rounding {bound:.3g} (other weights, "
            "another layout or dtype, or a cache already active at the top-level call)")
    return difference


def floating_dtype(module) -> torch.dtype | None:
    """The dtype of a module's first floating parameter (None: it has none)."""
    return next((p.dtype for p in module.parameters() if p.is_floating_point()), None)


def lower_rounding(model, convention: str, x: torch.Tensor, ours: torch.Tensor, candidate_model) -> float:
    """Where ``candidate_model`` holds a floating dtype coarser than veridec's ``model`` (a bfloat16 or float32
    port, spec EC13): the measured rounding of that dtype, ``numerics.tolerance`` of a rerun of ``model`` cast to
    it against ``ours`` (its logits [2, L, V] on ``x``); 0 otherwise."""
    dtype = floating_dtype(candidate_model)
    if dtype is None or torch.finfo(dtype).eps <= torch.finfo(model.dtype).eps:
        return 0.0
    lower = copy.deepcopy(model).to(dtype)
    rerun = adapt(lower, convention)(input_ids=x).logits.to(ours.dtype)  # [2, L, V]
    finite = torch.isfinite(ours) & torch.isfinite(rerun)
    return tolerance(rerun[finite], ours[finite])


def _max_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """Max |ours - theirs| in float64 over entries finite on both sides; inf where only one side is finite."""
    a, b = ours.double(), theirs.double()
    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
        return math.inf
    finite = torch.isfinite(a)
    return (a[finite] - b[finite]).abs().max().item() if finite.any() else 0.0
