"""The harness's modules import each other without a cycle (issue 43): every import counts, those inside a function
too, so a lazy import does not hide one (``supervise.main`` imports ``cli``; nothing that ``cli`` imports may
import ``supervise``). Imports by a computed name (``importlib.import_module``) are not in the graph."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_names(folder: Path, package: str) -> dict[str, Path]:
    """Each module of ``folder`` (the package ``package``) by its dotted name (a package by its own name)."""
    names = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names[".".join([package, *parts])] = path
    return names


def imported_names(path: Path, module: str) -> set[str]:
    """The dotted names a module's imports load: each imported module, each name imported from one (it may be a
    module), and the packages above them (importing ``a.b`` runs ``a``'s ``__init__``)."""
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    loaded = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            loaded.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here.split(".")[:len(here.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            loaded.add(source)
            loaded.update(f"{source}.{alias.name}" for alias in node.names)
    return {".".join(name.split(".")[:end]) for name in loaded for end in range(1, name.count(".") + 2)}


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (itself left out)."""
    modules = module_names(folder, package)
    return {name: (imported_names(path, name) & modules.keys()) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: every import cycle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_harness_modules_import_no_cycle():
    graph = import_graph(ROOT / "harness", "veridec.harness")
    assert "veridec.harness.cli" in graph["veridec.harness.supervise"]  # the graph sees the lazy import
    assert cycles(graph) == [], cycles(graph)


def test_the_supervisor_and_the_check_share_the_childs_side_only():
    """``supervise`` (the entry point, which decides) and the command (``cli``, ``check_command``) meet in
    ``child``, which imports nothing of the harness."""
    graph = import_graph(ROOT / "harness", "veridec.harness")
    assert graph["veridec.harness.child"] == set()
    assert "veridec.harness.supervise" not in graph["veridec.harness.cli"] | graph["veridec.harness.check_command"]


def test_a_planted_cycle_is_found():
    """Negative control: a three-module circle beside a module outside it, and an acyclic graph."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_a_lazy_relative_import_cycle_in_files_is_found(tmp_path):
    """Negative control through files: ``one`` imports ``two`` at the top, ``two`` imports ``one`` in a function."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "one.py").write_text("from . import two\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "sub" / "two.py").write_text("def run():\n    from ..one import main\n")
    (tmp_path / "two.py").write_text("def run():\n    from .sub.two import run\n    from .one import main\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.two"] == {"pkg", "pkg.one"}
    assert cycles(graph) == [["pkg.one", "pkg.sub.two", "pkg.two"]]
