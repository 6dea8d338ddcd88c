"""The true HMM behind the shipped ``hmm`` model (``veridec/assets/hmm/hmm.json``; token ids = HMM symbols)."""

from __future__ import annotations

import json

from veridec.models.shipped import SHIPPED

from .hmm import HMMOracle


def load_world_hmm() -> HMMOracle:
    """The HMM the shipped ``hmm`` model was trained on, with exact conditionals and log-likelihoods."""
    return HMMOracle.from_dict(json.loads((SHIPPED["hmm"] / "hmm.json").read_text()))
