"""Slow exact decoders: one full forward of the whole canvas per step, nothing cached (spec/sequential.md)."""
