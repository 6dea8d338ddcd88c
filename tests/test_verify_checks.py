"""``veridec verify``'s registry and theorem rows on stand-ins (spec/exactness.md E1, spec/theorems.md): every check
module registers, the verify seed reaches the drawn joints and the checks' generators, and TD1 fails on the worst
law's mass error."""

import copy
import functools
from pathlib import Path
from types import SimpleNamespace

import torch

from veridec.harness.checks import bounds
from veridec.harness.checks.registry import CHECK_MODULES, VerifyContext, all_checks


def test_every_check_module_registers_its_checks():
    """Each module of harness/checks but the registry is imported by ``all_checks`` (another test importing one
    would hide a module left out)."""
    folder = Path(bounds.__file__).parent
    modules = {f"veridec.harness.checks.{p.stem}" for p in folder.glob("*.py")
               if p.stem not in ("__init__", "registry")}
    assert set(CHECK_MODULES) == modules
    assert "block-diffusion/cached-batch-equals-reference" in all_checks()


def test_the_checks_generators_follow_the_seed():
    first, again, other = (VerifyContext(None, None, seed=s).generator(5) for s in (3, 3, 4))
    assert first.initial_seed() == again.initial_seed() != other.initial_seed()


def test_the_theorem_rows_draw_with_the_verify_seed(monkeypatch):
    seen = []

    def run_bounds(cases, seed):
        seen.append(seed)
        return {"rows": [{"theorem": "T1 general certificate", "cases": cases, "hypotheses_held": 1, "violations": 0,
                          "counterexample": None, "tightest_margin": 0.5}]}

    monkeypatch.setattr(bounds, "run_bounds", run_bounds)
    bounds._report.cache_clear()
    try:
        assert bounds._row(VerifyContext(None, None, seed=7, quick=True), "T1 general certificate")[1]
    finally:
        bounds._report.cache_clear()
    assert seen == [7]


def test_td1_fails_on_the_worst_laws_mass(monkeypatch):
    rows = [{"mass_error": 0.0, "cases": 3}, {"mass_error": 0.5, "cases": 3}]
    monkeypatch.setattr(bounds, "_laws", lambda ctx: rows)
    cases, passed, margin, _, _ = bounds._td1(VerifyContext(None, None))
    assert cases == 6 and not passed and margin == 1e-9 - 0.5


def _models():
    from veridec.models import random_model

    low = random_model("llada", 3, num_layers=1, hidden_size=16, num_heads=2, num_kv_heads=2, intermediate_size=24)
    return low, copy.deepcopy(low).double()


def test_a_slack_is_measured_from_the_reference_not_the_candidate():
    """1 - err / tol with tol from the reference against its rerun one precision up: a candidate 0.1 off where the
    reference rounds by 1e-7 fails (a tolerance from the candidate would grow with its error and pass it)."""
    from veridec.harness.checks.models import _measured_slack

    ctx = VerifyContext("model", "higher")
    compute = {"model": (torch.tensor([1.0]), torch.tensor([1.1])),
               "higher": (torch.tensor([1.0 + 1e-7], dtype=torch.float64), None)}
    assert _measured_slack(ctx, compute.get) < -1000


def test_the_recompute_check_catches_a_cache_read_stale(monkeypatch):
    """MC3's negative control: forward_cached that attends to the cache it was given as well as to its fresh
    entries (write=False, no bias) reads the first canvas's keys; the check fills the cache from another canvas
    than it queries, so it fails (from the same canvas the stale keys would equal the fresh ones)."""
    from veridec.harness.checks.models import cache_recompute

    low, high = _models()
    ctx = VerifyContext(low, high, quick=True)
    assert cache_recompute(ctx)[1]
    for model in (low, high):
        model.forward_cached = functools.partial(type(model).forward_cached, model, write=False)
    assert not cache_recompute(ctx)[1]


class CountingModel:
    """Logits that follow the canvas: every position prefers token ``n``, n = the unmasked tokens so far, so the
    order in which positions are taken shows in the tokens."""

    special = SimpleNamespace(mask_id=9)

    def __call__(self, x):
        n = int((x != 9).sum())
        logits = torch.zeros(1, x.shape[1], 10)
        logits[..., n % 9] = 3.0
        return SimpleNamespace(logits=logits)


def test_the_brute_force_loop_takes_the_lowest_position_on_ties():
    from veridec.harness.checks.reference import greedy_sequential_brute_force

    x = greedy_sequential_brute_force(CountingModel(), torch.tensor([[5, 6]]), gen_length=4, block_length=2)
    assert x.tolist() == [[5, 6, 2, 3, 4, 5]]


def test_the_fastdllm_top1_check_counts_the_forwards(monkeypatch):
    """FD3: the canvas of LLaDA's loop and 16 forwards exactly; one forward more fails."""
    from veridec.harness.checks import reference

    low, high = _models()
    ctx = VerifyContext(low, high, quick=True)
    assert reference.fastdllm_top1(ctx)[1]
    real = reference.fastdllm_generate

    def one_more(*args, **kwargs):
        decoded = real(*args, **kwargs)
        decoded.trace.counters.full_forwards += 1
        return decoded

    monkeypatch.setattr(reference, "fastdllm_generate", one_more)
    assert not reference.fastdllm_top1(ctx)[1]
