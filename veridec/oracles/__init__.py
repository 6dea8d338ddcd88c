"""Oracle models with exact conditionals (an enumerated joint over V^L, a hidden Markov model by
forward-backward), implementing the same MaskPredictor interface as the transformer (spec/models.md).

Imports only ``veridec.models`` (the interface; ``world``, the shipped HMM, finds its file through
``veridec.models.shipped``); proofs, decoders' tests and the harness import it, the models never do."""

from .base import Oracle
from .enumerated import EnumeratedJoint
from .hmm import HMMOracle

__all__ = ["EnumeratedJoint", "HMMOracle", "Oracle"]
