"""Oracle models with exact conditionals, implementing the same MaskPredictor interface as the transformer."""

from .base import Oracle
from .enumerated import EnumeratedJoint
from .hmm import HMMOracle

__all__ = ["EnumeratedJoint", "HMMOracle", "Oracle"]
