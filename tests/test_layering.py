"""Imports run only downward (docs/design.md): harness on top, testing (veridec.testing) just below it; reference
and optimized side by side, never importing each other; the shared floor (veridec/) and proofs_checks import
neither of them. Nothing that ships imports tools/ (maintainers' tooling, which needs a checkout)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"veridec": "veridec", "reference": "veridec.reference", "optimized": "veridec.optimized",
            "proofs_checks": "veridec.proofs_checks", "harness": "veridec.harness", "testing": "veridec.testing"}
FORBIDDEN = {
    "veridec": {"veridec.reference", "veridec.optimized", "veridec.harness", "veridec.testing", "tools"},
    "proofs_checks": {"veridec.reference", "veridec.optimized", "veridec.harness", "veridec.testing", "tools"},
    "reference": {"veridec.optimized", "veridec.harness", "veridec.testing", "tools"},
    "optimized": {"veridec.reference", "veridec.harness", "veridec.testing", "tools"},
    "testing": {"veridec.harness", "tools"},  # the top floor beside harness, which uses it (``veridec check``)
    "harness": {"tools"},
}


def imported_modules(path: Path, package: str):
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    module_package = ".".join([package, *path.parent.relative_to(ROOT / path.relative_to(ROOT).parts[0]).parts])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module_package.split(".")[: len(module_package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_imports_only_go_down(folder):
    violations = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in imported_modules(path, PACKAGES[folder]):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[folder]):
                violations.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not violations, "\n".join(violations)


def test_the_models_room_imports_no_oracle():
    """veridec.models is the floor's lowest room: the oracles sit on it (the shipped HMM world included)."""
    files = sorted((ROOT / "veridec" / "models").rglob("*.py"))
    violations = [f"{path.relative_to(ROOT)} imports {name}" for path in files
                  for name in imported_modules(path, "veridec") if name.startswith("veridec.oracles")]
    assert not violations, "\n".join(violations)


def test_subpackages_import():
    import veridec.harness  # noqa: F401
    import veridec.optimized  # noqa: F401
    import veridec.proofs_checks  # noqa: F401
    import veridec.reference  # noqa: F401


def test_every_package_is_listed_for_normal_installs():
    """An editable install finds any folder; a normal install ships only the packages pyproject lists."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, package in PACKAGES.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *parts]))
    assert found == listed, f"missing from pyproject: {sorted(found - listed)}; stale: {sorted(listed - found)}"
