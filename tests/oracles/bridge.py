"""The adapter side of the spec-oracle tests (tests/test_spec_oracles_*.py): closeness, float64 conversion,
generators, scripted draws and the glue between the oracles' plain lists and production's tensors and models.

This module may import production (veridec); the oracle modules next to it (guidance.py, parallel.py, ...) never
do, so that they stay a second implementation written from the spec alone.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from unittest import mock

import torch

from veridec.models.interface import PredictorOutput, SpecialTokens
from veridec.numerics import SAFETY
from veridec.rules.parallel import DAPD, KLASS, EntropyBounded, Factor, LocalLeap, Quota, Threshold, TopK

from . import parallel as parallel_oracle

F64 = torch.float64
EPS64 = torch.finfo(F64).eps  # 2^-52: one float64 ulp at 1
EPS32 = torch.finfo(torch.float32).eps  # 2^-23
NEG_INF = -math.inf


# ------------------------------------------------------------------------------------------------ numbers
def examples(n: int) -> int:
    """A test's own ``max_examples`` ``n``, lifted to the loaded profile's when that asks for more (the deep profile
    of tools/oracle_profile.py; the ci and dev profiles ask for fewer, so they run ``n``)."""
    from hypothesis import settings

    return max(n, settings().max_examples)


def t64(x) -> torch.Tensor:
    """Nested lists (or a tensor) -> a float64 tensor."""
    return torch.as_tensor(x, dtype=F64) if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=F64)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def mismatch(actual, expected, rel: float = 0.0, abs_tol: float = 0.0, where: str = "value") -> str | None:
    """Where ``actual`` and ``expected`` differ (None: they agree). Dicts (same keys) and lists/tuples compare
    item by item; two values of which neither is a float (ints, bools, None, str, Fractions) exactly; otherwise
    as floats, |a - e| <= max(abs_tol, rel * max(|a|, |e|)) (math.isclose's rule), infinities exactly."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or actual.keys() != expected.keys():
            return f"{where}: keys {actual!r} vs {expected!r}"
        return next((m for k in expected if (m := mismatch(actual[k], expected[k], rel, abs_tol, f"{where}[{k!r}]"))),
                    None)
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{where}: {actual!r} vs {expected!r}"
        return next((m for i, (a, e) in enumerate(zip(actual, expected))
                     if (m := mismatch(a, e, rel, abs_tol, f"{where}[{i}]"))), None)
    if not isinstance(actual, float) and not isinstance(expected, float) or expected is None or actual is None:
        return None if actual == expected else f"{where}: {actual!r} != {expected!r}"
    a, e = float(actual), float(expected)
    if a == e:
        return None
    if math.isinf(a) or math.isinf(e) or not abs(a - e) <= max(abs_tol, rel * max(abs(a), abs(e))):
        return f"{where}: {actual!r} vs {expected!r} (rel {rel:.1e}, abs {abs_tol:.1e})"
    return None


def close(actual, expected, rel: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Whether ``mismatch`` finds nothing (exact unless ``rel`` / ``abs_tol`` say otherwise)."""
    return mismatch(actual, expected, rel, abs_tol) is None


def assert_close(actual, expected, rel: float = 0.0, abs_tol: float = 0.0, where: str = "value") -> None:
    problem = mismatch(actual, expected, rel, abs_tol, where)
    assert problem is None, problem


def finite_max_abs(a, b) -> float:
    """max |a - b| over the entries finite in both (nested lists or tensors of one shape); 0 if none."""
    a, b = t64(a), t64(b)
    finite = torch.isfinite(a) & torch.isfinite(b)
    return (a[finite] - b[finite]).abs().max().item() if finite.any() else 0.0


def tolerance64(reference, *reruns, ulps: float = 8) -> float:
    """veridec.numerics.tolerance for float64 results: each rerun is ``reference`` computed again with another
    rounding, the largest difference measures its rounding error; two evaluations may then differ by two such
    errors times numerics.SAFETY, plus ``ulps`` float64 ulps at the output's scale (finite entries)."""
    ref = t64(reference)
    finite = ref[torch.isfinite(ref)]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    measured = max((finite_max_abs(reference, r) for r in reruns), default=0.0)
    return SAFETY * 2 * measured + ulps * EPS64 * max(1.0, scale)


# ------------------------------------------------------------------------------------------------ draws
class Draws:
    """Patches ``torch.rand`` and ``torch.multinomial`` while active: records every call (kind, the request,
    the result) and, with a ``script``, returns the scripted uniforms instead of drawing, after checking each
    request's shape and dtype against the script (the documented draw order)."""

    def __init__(self, script=None):
        self.script = None if script is None else list(script)
        self.calls = []
        self._rand, self._multinomial = torch.rand, torch.multinomial

    def rand(self, *size, dtype=None, device=None, generator=None, **kw):
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        dtype = dtype or torch.get_default_dtype()
        if self.script is None:
            out = self._rand(shape, dtype=dtype, device=device, generator=generator, **kw)
        else:
            assert self.script, f"unscripted draw torch.rand({shape}, dtype={dtype})"
            out = self.script.pop(0)
            assert (shape, dtype) == (tuple(out.shape), out.dtype), ("draw order", shape, dtype, out.shape, out.dtype)
            out = out.clone()
        self.calls.append(("rand", (shape, dtype), out.clone()))
        return out

    def multinomial(self, input, num_samples, replacement=False, *, generator=None, **kw):
        out = self._multinomial(input, num_samples, replacement, generator=generator, **kw)
        self.calls.append(("multinomial", (input.detach().clone(), num_samples, replacement), out.clone()))
        return out

    def marker(self, what):
        self.calls.append((what, None, None))

    @contextmanager
    def active(self):
        with mock.patch.object(torch, "rand", self.rand), mock.patch.object(torch, "multinomial", self.multinomial):
            yield self
        if self.script is not None:
            assert not self.script, f"{len(self.script)} scripted draws were not used"

    def of(self, kind):
        return [c for c in self.calls if c[0] == kind]


# ------------------------------------------------------------------------------------------------ models
class ListPredictor:
    """A production mask predictor around an oracle-style model: ``fn(canvas [B][L] ints, attention [B][L])`` ->
    logits [B][L][V] lists (the oracles' toy models); token-aligned (logit_shift 0), float64."""

    logit_shift = 0
    device = torch.device("cpu")

    def __init__(self, fn, vocab_size: int, mask_id: int, max_length: int = 64):
        self.fn, self.vocab_size, self.max_length = fn, vocab_size, max_length
        self.special = SpecialTokens(mask_id=mask_id)

    def __call__(self, x, attention_mask=None):
        am = [[1] * x.shape[1] for _ in range(x.shape[0])] if attention_mask is None else attention_mask.tolist()
        return PredictorOutput(t64(self.fn(x.tolist(), am)))


def oracle_callable(model, with_mask: bool, attentions: bool = False):
    """A production model as an oracle decoder's callable (canvas lists, attention lists) -> logits lists
    [B][L][V] float64 (and, with ``attentions``, per-layer attention lists), called exactly as production calls
    it: the attention mask passed only ``with_mask`` (None otherwise)."""

    def call(canvas, attention_mask):
        x = torch.tensor(canvas, dtype=torch.long)
        mask = torch.tensor(attention_mask, dtype=torch.long) if with_mask else None
        if not attentions:
            return model(x, attention_mask=mask).logits.double().tolist()
        out = model(x, attention_mask=mask, output_attentions=True)
        return out.logits.double().tolist(), [a.double().tolist() for a in out.attentions]

    return call


def production_rule(rule: dict):
    """The production rule object for a parallel-oracle rule dict (defaults filled by the oracle's make_rule)."""
    r = parallel_oracle.make_rule(rule)
    build = {
        "topk": lambda: TopK(r["k"]),
        "threshold": lambda: Threshold(r["threshold"], inclusive=r["inclusive"], certified=r["certified"]),
        "factor": lambda: Factor(r["factor"], inclusive=r["inclusive"], last_rank=r["last_rank"]),
        "quota": lambda: Quota(r["steps_per_block"]),
        "localleap": lambda: LocalLeap(kappa=r["kappa"], radius=r["radius"], tau=r["tau"],
                                       inclusive=r["inclusive"], certified=r["certified"]),
        "eb": lambda: EntropyBounded(r["gamma"]),
        "klass": lambda: KLASS(confidence=r["confidence"], kl_threshold=r["kl_threshold"], history=r["history"]),
        "dapd": lambda: DAPD(scale=r["scale"], tau_min=r["tau_min"], tau_max=r["tau_max"],
                             top_layers=r["top_layers"], late_confidence=r["late_confidence"]),
    }
    if r["rule"] not in build:
        raise AssertionError(r["rule"])
    return build[r["rule"]]()


def greedy_candidate(model, prompt: torch.Tensor, gen_length: int, mask_id: int) -> torch.Tensor:
    """A plain candidate written outside the project: one position per call, the most confident masked one,
    its argmax token (the checker tests' stand-in for a user's decoder). Returns the canvas [B, P + gen_length]."""
    x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)  # [B, L]
    rows = torch.arange(x.shape[0])
    for _ in range(gen_length):
        confidence, token = model(x).logits.softmax(-1).max(-1)  # [B, L] each
        position = confidence.masked_fill(x != mask_id, -1.0).argmax(1)  # [B]
        x[rows, position] = token[rows, position]
    return x
