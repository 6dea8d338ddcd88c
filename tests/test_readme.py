"""README's Python examples run as written (in order, in one namespace), on the shipped default model."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace = {}
    for block in blocks:
        exec(compile(block.replace("/tmp/", f"{tmp_path}/"), str(README), "exec"), namespace)  # noqa: S102
