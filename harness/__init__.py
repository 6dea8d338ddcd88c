"""The top floor, ``veridec.harness``: what a user of the installed wheel runs. The ``veridec`` command (``cli``:
generate, verify, exactness, bounds, experiment, check) with its argument checks (``arguments``) and the
``check`` command (``check_command``); the exactness table (``exactness``); the records every long run resumes
from and shares under torchrun (``records``, ``units``, ``distributed``); the workloads they share
(``workloads``: prompts, one decode of a variant, quality and cost measures; ``corpus``: the default model's
task world and its checkers); the pytest plugin (``pytest_plugin``, the ``pytest11`` entry point, which imports
nothing heavy); and two rooms: ``checks`` (the registry behind ``veridec verify``) and ``experiments`` (one module
per ``veridec experiment``, reproducing the papers' tables on the shipped models).

It may import every other floor; nothing that ships imports it. Importing the package itself loads nothing.
Maintainers' tooling that needs a checkout (the mutation gate, the golden recorder, the GPU script, the counter
baseline, training, calibration) lives in tools/, outside the package.
"""
