"""The models shipped inside the package, so every command runs offline.

- ``default``: a 4-layer LLaDA-layout dLLM trained on the task corpus (veridec.harness.corpus);
- ``hmm``: the same architecture trained on samples of a fixed HMM, shipped with that HMM (``hmm.json``, loaded by
  ``veridec.oracles.world.load_world_hmm``), so outputs can be scored by their exact log-likelihood under the
  true HMM;
- ``blocks``: an SDAR-layout block-diffusion model (spec/block_diffusion.md BD1) trained on the same task corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .checkpoint import load_pretrained
from .transformer import BidirectionalTransformer

ASSETS = Path(__file__).resolve().parent.parent / "assets"
SHIPPED = {"default": ASSETS / "default", "hmm": ASSETS / "hmm", "blocks": ASSETS / "blocks"}


def model_folder(name_or_path: str) -> Path:
    """``default`` / ``hmm`` / ``blocks`` or a path to a model folder."""
    return SHIPPED.get(name_or_path, Path(name_or_path))


def load_model(name_or_path: str = "default", device: str | torch.device = "cpu",
               dtype: torch.dtype | None = None) -> BidirectionalTransformer:
    return load_pretrained(model_folder(name_or_path), dtype=dtype, device=device)


def training_report(name: str) -> dict:
    return json.loads((SHIPPED[name] / "training_report.json").read_text())
