"""A mutation catalogue of the bugs that a single Hypothesis draw missed (issue 49): each was killed, or would have
been, only while the derandomized examples happened to reach its branch, so the gate holds them under ``--seeds``.

    python -m tools.mutation --catalogue tools/mutants_draws.py --seeds 3 --related-only
"""

from __future__ import annotations

from tools.mutants import Mutant

FASTGUIDE = "tests/test_fastguide.py"
RULES = "tests/test_parallel_rules.py"
ORACLE_GUIDANCE = "tests/test_spec_oracles_guidance.py"
ORACLE_PARALLEL = "tests/test_spec_oracles_parallel.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "hybrid-anchor-at-deferred-candidate", "veridec/guidance/fastguide.py",
        "previous = torch.where(commit, slot, previous)",
        "previous = torch.where(active, slot, previous)",
        "the next recomputation is anchored at the last verified candidate, a deferred one included, not the last "
        "committed one (issue 49: passed the suite once 26% of the draws were rejected)",
        "spec/guidance.md GF1-GF3", (FASTGUIDE, ORACLE_GUIDANCE)),
    Mutant(
        "factor-level-reciprocal-product", "veridec/rules/parallel.py",
        "levels = 1 - torch.full_like(n, self.factor) / (n + 1)",
        "levels = 1 - self.factor / (n + 1)",
        "the factor level as Python float / tensor (torch: a reciprocal, then a product; two roundings): rank 4 at "
        "f = 2.4999999999999996 passes at c = 0.5 (issue 49: a clean-code disagreement one draw missed)",
        "spec/parallel.md P4", (RULES, ORACLE_PARALLEL)),
]
