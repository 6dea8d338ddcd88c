"""The models a check runs on: the shipped ones, a checkpoint folder, or tiny random ones built for checking.

The tiny check models (``tiny-llada``, ``tiny-dream``, ``tiny-sdar`` and ``tiny-fastdllm-v2``: block diffusion) are
random transformers made to exercise a decoder's decisions: their LM head is scaled (confidences spread over (0, 1),
so thresholds decide something), tokens come in pairs with identical LM-head rows (every argmax among a pair is an
exact tie, which spec SQ0.4 breaks to the lower id), and they never propose the mask token (a decoder whose model
does keeps the position masked, and the official threshold loops then never end).
"""

from __future__ import annotations

from pathlib import Path

import torch

from veridec.models import random_model
from veridec.models.shipped import SHIPPED, load_model
from veridec.models.tiny import never_predicts_mask

TINY = {"tiny-llada": "llada", "tiny-dream": "dream", "tiny-sdar": "sdar", "tiny-fastdllm-v2": "fastdllm_v2"}
ORACLES = ("oracle-joint", "oracle-hmm")  # exact conditionals: tier S holds samples against exact laws
UNIFORM_STATE = ("diffusiongemma",)  # the shipped uniform-state checkpoint (spec/diffusiongemma.md DG1.2)
MODEL_NAMES = (*SHIPPED, *TINY, *ORACLES, *UNIFORM_STATE)
TIED_PAIRS = 32  # tokens (0, 1), (2, 3) ... (62, 63) share their LM-head row
LOGIT_SCALE = 4.0


def load_check_model(name: str = "default", device: str | torch.device = "cpu"):
    """The model ``name`` names: default | hmm | blocks | tiny-llada | tiny-dream | tiny-sdar | tiny-fastdllm-v2 |
    oracle-joint | oracle-hmm | diffusiongemma | a model folder (a DiffusionGemma one too)."""
    if name in TINY:
        return tiny_check_model(TINY[name]).to(device)
    if name in ORACLES:
        return oracle_check_model(name)
    if name in UNIFORM_STATE:
        from veridec.models.diffusiongemma import load_shipped_diffusiongemma

        return load_shipped_diffusiongemma(device=device)
    if name not in MODEL_NAMES and not Path(name).is_dir():
        raise ValueError(f"model must be one of {', '.join(MODEL_NAMES)} or a model folder, got {name!r}")
    if _is_diffusiongemma_folder(name):
        from veridec.models.diffusiongemma import load_diffusiongemma

        return load_diffusiongemma(name, device=device)
    return load_model(name, device=device)


def _is_diffusiongemma_folder(name: str) -> bool:
    config = Path(name) / "config.json"
    return name not in MODEL_NAMES and config.is_file() and '"diffusion_gemma"' in config.read_text()


def tiny_check_model(layout: str, seed: int = 0):
    model = random_model(layout, seed)
    head = model.embed.weight if model.lm_head is None else model.lm_head.weight  # [V, hidden]
    with torch.no_grad():
        head.mul_(LOGIT_SCALE)
        for first in range(0, 2 * TIED_PAIRS, 2):
            head[first + 1] = head[first]
    return never_predicts_mask(model)


def oracle_check_model(name: str):
    """``oracle-joint``: a random enumerated joint over 3 symbols and 5 positions (a prompt of 1-2 symbols, the
    rest generated); ``oracle-hmm``: a random 4-state HMM over 3 symbols (any length). Both compute on the host."""
    from veridec.oracles import EnumeratedJoint, HMMOracle

    if name == "oracle-joint":
        return EnumeratedJoint.random(3, 5, seed=0, concentration=0.5)
    return HMMOracle.random(4, 3, seed=0)
