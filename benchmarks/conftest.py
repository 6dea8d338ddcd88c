"""Benchmarks run single-threaded, like the tests: compare speeds as ratios measured in one run."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

torch.set_num_threads(1)
