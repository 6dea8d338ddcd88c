"""Theorems fast decoders rely on, as executable checks on distributions (spec/theorems.md)."""
