"""A mkdocs hook (mkdocs.yml ``hooks:``): the picture docs/checking.md shows, made by the docs build itself. It checks
a broken example (``examples/fastdllm_dual_broken.py:one_too_many``) against veridec's dual-cache Fast-dLLM
decoder on the tiny check model and adds the failure's commit timeline to the site as
``images/check-timeline.png`` (``CheckResult.figure``), so the page always shows what the current code draws."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PICTURE = "images/check-timeline.png"


def timeline_png() -> bytes:
    import torch

    from veridec.testing import check_decoder, load_candidate
    from veridec.testing.figures import png

    torch.set_num_threads(1)
    sys.path.insert(0, str(EXAMPLES))
    try:
        broken = load_candidate(f"{EXAMPLES / 'fastdllm_dual_broken.py'}:one_too_many")
        result = check_decoder(broken, "fastdllm", cache="dual", model="tiny-llada", max_examples=40, knobs=False)
    finally:
        sys.path.remove(str(EXAMPLES))
    if result.passed:
        raise RuntimeError("docs picture: the broken example passed its check; the picture would show nothing")
    return png(result.figure())


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, PICTURE, content=timeline_png()))
    return files
