"""Foreign decoders: load one from a file, fit its signature to a calling convention, call it.

A candidate is any callable ``(model, prompt, **settings)`` returning the canvas [B, P + G] (or only the
generation [B, G]), a ``(tokens, nfe)`` pair, or an object with ``.sequences`` (Dream's output). The settings
its signature names are filled from the model and the drawn case; one it names but the check does not draw is
held at its default on both sides.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .guard import IMPORT_TIMEOUT, CandidateExited, CandidateTimedOut, guarded, import_seconds


class CandidateError(ValueError):
    """The candidate cannot be checked as given (missing file or function, a signature that fits no convention)."""


def load_candidate(spec: str) -> Callable:
    """``FILE.py:FUNCTION`` -> the function, imported from the file at run time."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise CandidateError(f"candidate must be FILE.py:FUNCTION, got {spec!r}")
    file = Path(path)
    if not file.is_file():
        raise CandidateError(f"candidate file {file} does not exist")
    seconds = import_seconds()
    try:  # os._exit at import (or bound there) raises; its module keeps the refusing one
        with guarded(seconds, f"the import of {file}", code=2):
            module = _import_file(file)
    except CandidateExited as err:
        raise CandidateError(f"{file} cannot be loaded: importing it called {err}") from err
    except CandidateTimedOut as err:
        raise CandidateError(f"{file} cannot be loaded: importing it took more than {seconds:g} s "
                             f"({IMPORT_TIMEOUT})") from err
    except BaseException as err:  # noqa: BLE001 - foreign code at import: sys.exit, KeyboardInterrupt, any error
        raise CandidateError(f"{file} cannot be loaded: importing it raised {type(err).__name__}({err})") from err
    function = getattr(module, name, None)
    if not callable(function):
        raise CandidateError(f"{file} defines no function {name!r}")
    if inspect.isbuiltin(function):
        raise CandidateError(f"{file}: {name} is {function!r}, not a decoder; give a function defined in Python, "
                             "called as FUNCTION(model, prompt, **settings)")
    try:
        function.__veridec_source__ = spec  # reports and reproducers name it this way
    except (AttributeError, TypeError) as err:
        raise CandidateError(f"{file}: {name} is a {type(function).__name__}, which takes no attributes; give a "
                             "function defined in Python, called as FUNCTION(model, prompt, **settings)") from err
    return function


def _import_file(file: Path):
    """Import ``file`` as a module; a file with relative imports (Fast-dLLM's ``from .model import ...``) is
    imported as ``folder.stem``, its folder's parent on ``sys.path``, so its own package imports for real."""
    folder = file.resolve().parent
    sys.path.insert(0, str(folder))  # the file may import its neighbours
    try:
        spec = importlib.util.spec_from_file_location(f"veridec_candidate_{abs(hash(str(file.resolve())))}", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import would (dataclasses and pickling look it up)
        try:
            spec.loader.exec_module(module)
            return module
        except ImportError as err:
            del sys.modules[spec.name]
            if "relative import" not in str(err):
                raise
        sys.path.insert(0, str(folder.parent))
        try:
            return importlib.import_module(f"{folder.name}.{file.stem}")
        finally:
            sys.path.remove(str(folder.parent))
    finally:
        sys.path.remove(str(folder))


@dataclass(frozen=True)
class Fit:
    """How a candidate's signature meets a target's settings."""

    names: frozenset[str]  # keyword parameters it names
    defaults: dict  # their defaults (inspect.Parameter.empty where none)
    accepts_any: bool  # it takes **kwargs
    prompt_form: str = "tensor"  # how it takes the prompt: "tensor" [B, P], or "dict" {"input_ids": [B, P]}

    def takes(self, name: str) -> bool:
        return self.accepts_any or name in self.names


PROMPT_FORMS = ("auto", "tensor", "dict")
DICT_ANNOTATIONS = ("dict", "Dict", "Mapping", "BatchEncoding")  # a prompt annotated so is passed as a dict


def fit_candidate(candidate: Callable, target, prompt_form: str = "auto") -> Fit:
    """Check that ``candidate`` takes (model, prompt, ...) and the target's length setting; name what is wrong.
    ``prompt_form``: "tensor", "dict" (``{"input_ids": prompt}``, as JetAstra/SDAR's published
    ``block_diffusion_generate`` reads it), or "auto": "dict" where the prompt parameter is annotated as a dict,
    Mapping or BatchEncoding, else "tensor"."""
    if prompt_form not in PROMPT_FORMS:
        raise CandidateError(f"prompt_form must be one of {', '.join(PROMPT_FORMS)}, got {prompt_form!r}")
    try:
        parameters = list(inspect.signature(candidate).parameters.values())
    except (TypeError, ValueError) as err:
        raise CandidateError(f"candidate {candidate!r} has no inspectable signature: {err}") from err
    label = getattr(candidate, "__qualname__", repr(candidate))
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if len(positional) < 2 and not var_positional:
        raise CandidateError(f"{label} must take (model, prompt, ...) positionally; its signature is "
                             f"{inspect.signature(candidate)}")
    keyword = {p.name: p.default for p in parameters[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    form = _prompt_form(positional[1] if len(positional) > 1 else None) if prompt_form == "auto" else prompt_form
    fit = Fit(frozenset(keyword), keyword, any(p.kind == p.VAR_KEYWORD for p in parameters), form)
    if not fit.takes(target.length_name):
        raise CandidateError(f"{label} takes no {target.length_name!r}, so it fits no {target.convention} "
                             f"convention (signature {inspect.signature(candidate)})")
    required = [name for name, default in keyword.items() if default is inspect.Parameter.empty
                and name not in (*target.settings, target.mask_name, "attention_mask")]
    if required:
        raise CandidateError(f"{label} requires {', '.join(required)}, which {target.name} does not take")
    return fit


def _prompt_form(parameter) -> str:
    """"dict" where the prompt parameter's annotation names a dict, Mapping or BatchEncoding (a string under
    ``from __future__ import annotations``), else "tensor"."""
    if parameter is None or parameter.annotation is inspect.Parameter.empty:
        return "tensor"
    annotation = parameter.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "") or repr(annotation)
    return "dict" if any(name in text for name in DICT_ANNOTATIONS) else "tensor"


def call_candidate(candidate: Callable, fit: Fit, model, prompt, attention_mask, settings: dict, mask_name: str,
                   mask_id: int):
    """Run the candidate on ``model`` (an adapter); returns (tokens [B, *], nfe or None)."""
    kwargs = {name: value for name, value in settings.items() if fit.takes(name)}
    if mask_name and fit.takes(mask_name):
        kwargs[mask_name] = mask_id
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
    given = prompt.clone(), None if attention_mask is None else attention_mask.clone()
    argument = prompt if fit.prompt_form == "tensor" else {"input_ids": prompt, **(
        {} if attention_mask is None else {"attention_mask": attention_mask})}
    output = split_output(candidate(model, argument, **kwargs))
    if not torch.equal(prompt, given[0]) or (attention_mask is not None and not torch.equal(attention_mask, given[1])):
        raise CandidateError("the candidate changed the prompt or attention mask it was given (in place); a decoder "
                             "must leave its inputs as they were")
    return output


def split_output(output) -> tuple[torch.Tensor, int | None]:
    if isinstance(output, tuple) and len(output) == 2:
        tokens, nfe = output
        return _tokens(tokens), int(nfe)
    return _tokens(getattr(output, "sequences", output)), None


def _tokens(tokens) -> torch.Tensor:
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        raise CandidateError(f"the candidate must return tokens [B, L] (or (tokens, nfe)), got "
                             f"{type(tokens).__name__} {tuple(getattr(tokens, 'shape', ()))}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise CandidateError(f"the candidate must return integer token ids, got a tensor of dtype {tokens.dtype}")
    return tokens


def checked_tokens(tokens: torch.Tensor, vocab_size: int, device) -> torch.Tensor:
    """The candidate's tokens [B, L] on ``device`` (the prompt's), every id in [0, ``vocab_size``); a tensor that
    cannot be brought there (on the meta device: no data) or an id outside the vocabulary is its failure."""
    try:
        tokens = tokens.to(device)
    except (RuntimeError, NotImplementedError) as err:
        raise CandidateError(f"the candidate returned its tokens on device {tokens.device}, which cannot be read on "
                             f"the prompt's device {device} ({str(err).splitlines()[0]})") from err
    outside = (tokens < 0) | (tokens >= vocab_size)
    if outside.any():
        row, position = (int(i) for i in outside.nonzero()[0])
        raise CandidateError(f"the candidate returned token id {int(tokens[row, position])} at row {row}, position "
                             f"{position}, outside the vocabulary [0, {vocab_size})")
    return tokens
