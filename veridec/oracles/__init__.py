"""Oracle models with exact conditionals (an enumerated joint over V^L, a hidden Markov model by
forward-backward), implementing the same MaskPredictor interface as the transformer (spec/models.md).

Imports only ``veridec.models.interface``; models, proofs, decoders' tests and the harness import it."""

from .base import Oracle
from .enumerated import EnumeratedJoint
from .hmm import HMMOracle

__all__ = ["EnumeratedJoint", "HMMOracle", "Oracle"]
