"""Scripts that retrain the shipped models: ``dllm`` (the default task model and the HMM-world model, ``python -m
tools.training.dllm``) and ``reward`` (the reward model, ``python -m tools.training.reward``).

They import the models, the decoders and ``veridec.harness.workloads``; run them from the repository root.
"""
