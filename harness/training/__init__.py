"""Scripts that retrain the shipped models: ``dllm`` (the default task model and the HMM-world model, ``python -m
veridec.harness.training.dllm``) and ``reward`` (the reward model, ``python -m veridec.harness.training.reward``).

They import the models, the decoders and ``veridec.harness.workloads``; ``veridec train`` dispatches to them.
"""
