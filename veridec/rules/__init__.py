"""Decoding rules: small pure functions from (logits, canvas) to the next canvas, shared by reference/ and
optimized/ (DESIGN.md: a decoder is a rule applied to logits)."""
