"""The report of an engine check (``EngineResult.markdown``): the verdict, the stated differences met, the
stand-ins, and a failure's first divergence with its shrunk case."""

from __future__ import annotations

import json


def engine_markdown(result) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    lines = [f"# veridec check --engine {result.algorithm}: {verdict}", "",
             f"Against veridec's `{result.against}` rule by logit replay on `{result.model}` ({result.logits}), "
             f"seed {result.seed}: {result.cases} cases, {result.steps} engine steps compared.", ""]
    if result.differences:
        lines += ["Typed outcomes, not failures (stated differences; `stalled`: the rule itself never finishes the "
                  "case):", ""]
        lines += [f"- `{name}`: {count} cases" for name, count in sorted(result.differences.items())]
        lines.append("")
    if result.failure is not None:
        lines += ["## First divergence (shrunk)", "", result.failure.message, "",
                  f"Shrunk case: `{json.dumps(result.failure_case)}`",
                  f"Found after {result.trials_to_detection} cases; first failing case: "
                  f"`{json.dumps(result.first_failing_case)}`", ""]
    lines += ["## Stand-ins", ""] + [f"- {line}" for line in result.stand_ins]
    return "\n".join(lines) + "\n"
