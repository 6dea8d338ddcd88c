"""The top floor, ``veridec.harness``: the ``veridec`` command (``cli``), the exactness table (``exactness``) and
the counter baseline (``baseline``), the workloads they share (``workloads``: prompts, one decode of a variant,
quality and cost measures; ``corpus``: the default model's task world and its checkers), the GPU script
(``gpu_check``), and three rooms: ``checks`` (the registry behind ``veridec verify``), ``experiments`` (one
module per ``veridec experiment``) and ``training`` (the scripts that retrain the shipped models).

It may import every other floor; nothing outside the harness imports it (tests and benchmarks aside).
"""
