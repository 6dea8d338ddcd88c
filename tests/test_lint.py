"""The code style gate: ruff with the project's settings (pyproject.toml [tool.ruff]) over the whole tree, and no
product function over 50 lines."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


PRODUCT_FOLDERS = ("veridec", "harness", "reference", "optimized", "proofs_checks", "testing")
LONGEST_FUNCTION = 50  # lines, from the def line (decorators excluded) to the last line


def long_functions(source: str, limit: int = LONGEST_FUNCTION) -> list[tuple[str, int, int]]:
    """(name, def line, length) of each function or method in ``source`` longer than ``limit`` lines."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= limit]


def test_no_product_function_is_over_50_lines():
    files = [path for folder in PRODUCT_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)" for path in files
             for name, line, length in long_functions(path.read_text())]
    assert not found, f"functions over {LONGEST_FUNCTION} lines:\n" + "\n".join(found)


def test_a_51_line_function_is_found_and_a_50_line_one_is_not():
    """Negative control: the length runs from ``def`` to the last line, a decorator not counted, a method and a
    nested function found too."""
    body = "".join(f"    x{i} = {i}\n" for i in range(48))
    fifty = f"@decorated\ndef fifty():\n{body}    return x0\n"
    fifty_one = f"def fifty_one():\n{body}    x = 1\n    return x\n"
    nested = "class Holder:\n    def method(self):\n        def inner():\n" + body.replace("    ", "            ") + \
        "            x = 1\n            return x\n        return inner\n"
    assert long_functions(fifty) == []
    assert long_functions(fifty_one) == [("fifty_one", 1, 51)]
    assert sorted(name for name, _, _ in long_functions(nested)) == ["inner", "method"]
