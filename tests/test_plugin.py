"""The pytest plugin costs nothing until a fixture is requested: loading its entry point, as pytest does in every
session of an environment where veridec is installed, imports neither torch, Hypothesis nor any decoder."""

import json
import subprocess
import sys

HEAVY = ("torch", "hypothesis", "numpy", "scipy", "transformers", "veridec.testing", "veridec.reference",
         "veridec.optimized", "veridec.models", "veridec.proofs_checks", "veridec.harness.cli")
ENTRY_POINT = ("from importlib.metadata import entry_points; "
               "(plugin,) = [e for e in entry_points(group='pytest11') if e.name == 'veridec']; "
               "print(plugin.load().__name__)")


def heavy_imports(statement: str) -> tuple[str, list[str]]:
    """Run ``statement`` in a fresh interpreter: what it printed, and the heavy modules it left imported."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *printed, loaded = done.stdout.strip().splitlines()
    heavy = [name for name in json.loads(loaded) if any(name == h or name.startswith(h + ".") for h in HEAVY)]
    return "\n".join(printed), heavy


def test_loading_the_plugin_imports_nothing_heavy():
    printed, heavy = heavy_imports(ENTRY_POINT)
    assert printed == "veridec.harness.pytest_plugin"
    assert heavy == [], f"the plugin's entry point imported {heavy}"


def test_the_probe_sees_a_heavy_import():
    """The negative control: importing what a fixture loads (here torch itself) is seen."""
    _, heavy = heavy_imports("import torch")
    assert "torch" in heavy


def test_the_fixtures_load_what_they_serve(veridec_check, tiny_llada, enumerated_oracle):
    assert tiny_llada.vocab_size > 0 and enumerated_oracle(3, 2, 0).max_length == 2 and callable(veridec_check)
