"""``veridec verify``'s registry and theorem rows on stand-ins (spec/exactness.md E1, spec/theorems.md): every check
module registers, the verify seed reaches the drawn joints and the checks' generators, and TD1 fails on the worst
law's mass error."""

from pathlib import Path

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
