"""Named operating points (spec/parallel.md P10): seed 000 Table 2's high-quality (hq) and high-throughput
(ht) regimes, LocalLeap's defaults (seed 002 §4), Fast-dLLM's paper threshold, and certified variants
(spec/theorems.md TC1)."""

from __future__ import annotations

from .parallel import DAPD, KLASS, EntropyBounded, Factor, LocalLeap, Threshold, TopK

PRESETS = {
    "sequential": TopK(1),
    "conf-hq": TopK(4),
    "conf-ht": TopK(8),
    "fastdllm": Threshold(0.9),
    "fastdllm-hq": Threshold(0.8),
    "fastdllm-ht": Threshold(0.6),
    "factor": Factor(1.0),
    "klass-hq": KLASS(confidence=0.4, kl_threshold=1.5, history=1),
    "klass-ht": KLASS(confidence=0.25, kl_threshold=1.0, history=1),
    "eb-hq": EntropyBounded(gamma=4.0),
    "eb-ht": EntropyBounded(gamma=16.0),
    "dapd-hq": DAPD(scale=4.0),
    "dapd-ht": DAPD(scale=16.0),
    "localleap": LocalLeap(kappa=0.9, radius=4, tau=0.75),
    "localleap-dream": LocalLeap(kappa=0.9, radius=4, tau=0.8),
    "fastdllm-certified": Threshold(0.9, certified=True),
    "fastdllm-ht-certified": Threshold(0.6, certified=True),
    "localleap-certified": LocalLeap(kappa=0.9, radius=4, tau=0.75, certified=True),
}


def preset(name: str):
    if name not in PRESETS:
        raise ValueError(f"decoder preset must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]
