"""Theorems fast decoders rely on, as executable checks on distributions (spec/theorems.md).

    import numpy as np
    from veridec.proofs_checks import analyse, general_certificate
    result = general_certificate(analyse(joints))      # joints [N, V, ..., V], float64 or Fractions
    result.hypotheses, result.conclusion, result.slacks, result.violations

Strategies for hypothesis live in ``veridec.proofs_checks.strategies`` (re-exported by veridec.testing.strategies).

A bottom floor beside ``veridec``: it imports the shared floor (oracles, guidance for the GO1/GO2 measurements)
and never the decoders (``veridec.reference``, ``veridec.optimized``) or the harness, which imports it.
"""

from .counterexamples import (concatenation_counterexample, fastdllm_counterexample, neighbour_capacity,
                              published_capacity)
from .joints import Analysis, analyse
from .table import run_bounds
from .theorems import (TheoremResult, cluster_certificate, concatenation_claim, distance_bounds, fastdllm_kl,
                       fastdllm_theorem, fastdllm_tv, general_certificate)

__all__ = ["Analysis", "TheoremResult", "analyse", "cluster_certificate", "concatenation_claim",
           "concatenation_counterexample", "distance_bounds", "fastdllm_counterexample", "fastdllm_kl",
           "fastdllm_theorem", "fastdllm_tv", "general_certificate", "neighbour_capacity", "published_capacity",
           "run_bounds"]
