"""veridec: verified decoders for masked diffusion language models.

Floors (imports only downward): ``veridec.harness`` on top; ``veridec.reference`` and ``veridec.optimized``
side by side; ``veridec`` (models, oracles, rules, traces) and ``veridec.proofs_checks`` at the bottom.
"""

__version__ = "0.1.0"
