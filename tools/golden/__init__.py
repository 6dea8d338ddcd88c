"""The golden traces of the official samplers: ``record`` (runs the official code; maintainers only), ``replay`` and
``checkpoints`` (what tests/test_golden.py needs)."""
