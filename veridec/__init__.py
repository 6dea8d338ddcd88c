"""veridec: verified decoders for masked diffusion language models.

This package is the shared floor: the model interface and models (``models``), oracle models with exact
conditionals (``oracles``), the decoding rules both paths share (``rules``), reward guidance (``guidance``),
traces and their comparison (``trace``, ``compare``), measured tolerances (``numerics``), and the canvas and
argument checks every decoder starts with (``canvas``, ``decoding``).

Floors (imports only downward, tests/test_layering.py): ``veridec.harness`` on top; ``veridec.reference`` and
``veridec.optimized`` side by side; ``veridec`` and ``veridec.proofs_checks`` at the bottom. Nothing here
imports the decoders or the harness.
"""

__version__ = "0.1.0"
