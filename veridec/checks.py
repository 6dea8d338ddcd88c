"""The argument checks every room shares (models, rules, decoders): a ValueError naming the argument and what it
may be. The floor's lowest module: it imports nothing of veridec."""

from __future__ import annotations

import math
import numbers

import torch


def is_integer(value) -> bool:
    """A Python integer, never a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value) -> bool:
    """A finite real number: never NaN, an infinity or a bool."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def check_generator(generator, name: str = "generator") -> None:
    """None or a ``torch.Generator`` (an int seed, a string or a numpy Generator is refused by name)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"{name} must be None or a torch.Generator (seed one with torch.Generator().manual_seed(s)), "
                         f"got {type(generator).__name__}")


def check_has_data(name: str, tensor) -> None:
    """A tensor that holds values: one on the meta device (shapes only) is refused by name."""
    if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it holds no values (create it on a real device)")


def check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def check_flag(name: str, value) -> None:
    """True or False, never another value that compares equal to one (1, 0)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_integer(name: str, value, low: int = 1) -> None:
    """An integer >= ``low``."""
    if not is_integer(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def check_positive(name: str, value) -> None:
    """A finite number > 0."""
    if not is_finite_number(value) or not value > 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_range(name: str, value, low=None, high=None, low_open=False, high_open=False, integer=False) -> None:
    """Raise ValueError naming ``name`` and the allowed range unless ``value`` is a finite real number (an integer
    with ``integer``) with low <= value <= high (open ends optional; a missing bound is open: infinities are
    refused everywhere)."""
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
    if integer and not is_integer(value):
        raise ValueError(f"{name} must be an integer in {span}, got {value!r}")
    if not is_finite_number(value):
        raise ValueError(f"{name} must be a finite number in {span}, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise ValueError(f"{name} must lie in {span}, got {value!r}")
