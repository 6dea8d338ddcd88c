"""Maintainers' tools: what needs a checkout of the repository and never ships in the wheel (docs/maintainers.md).

Each runs from the repository root as ``python -m tools.NAME``: ``mutation`` (the mutation gate; its catalogues
``mutants`` and ``mutants_independent``), ``golden.record`` (the golden recorder; ``golden.replay`` and
``golden.checkpoints`` serve the tests), ``gpu_check`` (the device script), ``baseline`` (the counter baseline and its
update), ``training.dllm`` / ``training.reward`` (retrain the shipped models), ``stochastic_calibration`` and
``float32_gumbel`` (tier S calibration reports).
"""
