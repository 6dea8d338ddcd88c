"""Spec oracles: a second implementation of every rule and formula the reference and optimized paths share,
written from spec/ and the papers alone (never from the production code), in the most naive form: Python
loops, ``fractions.Fraction`` or float64, no torch, no vectorisation, nothing imported from ``veridec``
(guidance.py, laws.py, parallel.py, sequential.py, theorems.py; their worked examples are data files in
``examples/``, read by ``data.py``).

The tests in ``tests/test_spec_oracles_*.py`` hold the production rules against these on generated inputs,
with the boundaries forced in (exact ties, confidences equal to a threshold, one-masked blocks, -inf logits).
``bridge.py`` is their shared adapter side (closeness, float64 conversion, scripted draws, the glue between the
oracles' lists and production's tensors): it imports production, the oracle modules never do.
"""
