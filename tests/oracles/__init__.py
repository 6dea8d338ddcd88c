"""Spec oracles: a second implementation of every rule and formula the reference and optimized paths share,
written from spec/ and the papers alone (never from the production code), in the most naive form: Python
loops, ``fractions.Fraction`` or float64, no torch, no vectorisation, nothing imported from ``veridec``.

The tests in ``tests/test_spec_oracles_*.py`` hold the production rules against these on generated inputs,
with the boundaries forced in (exact ties, confidences equal to a threshold, one-masked blocks, -inf logits).
"""
