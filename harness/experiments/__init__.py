"""One module per ``veridec experiment NAME`` (``models``, ``parallel``, ``speculative``, ``fastguide``), each
with ``run(out, quick=False, seed=0)`` writing ``NAME.md`` and ``NAME.json`` under ``out``.

Experiments import the decoders and ``veridec.harness.workloads``, never each other; the CLI imports them by name.
"""
