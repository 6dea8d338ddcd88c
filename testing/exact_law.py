"""Tier S on an oracle model: the candidate's samples against the exact law of the target's decode (spec/stochastic.md
ST7). The oracle's conditionals are exact, so ``proofs_checks.laws.decoder_law`` enumerates the law of the
veridec decode the target names (LLaDA's quota or Fast-dLLM's threshold, ``low_confidence`` remasking, one row),
and only the candidate decodes: N draws under seeds ``case seed + i``, held against the law by ``check_law``'s
goodness of fit (ST6). Cases are small (V^block_length proposal rows per state).
"""

from __future__ import annotations

import torch.nn.functional as F
from hypothesis import strategies as st
from tqdm.auto import tqdm

from veridec.oracles import EnumeratedJoint
from veridec.oracles.base import Oracle
from veridec.proofs_checks.laws import decoder_law
from veridec.rules.parallel import Threshold, TopK

from .running import CALL_SLACK, CheckSetup, case_tensors, drawn_canvas, run_candidate
from .stochastic import LawOutcome, failed_draw, fit_outcome, law_samples
from .targets import TARGETS

THRESHOLDS = (None, 0.6, 0.4, 0.8)
MAX_GEN = 4


def is_oracle(model) -> bool:
    return isinstance(model, Oracle)


def check_law_target(goal, cache: str) -> None:
    """Only targets whose decode decoder_law enumerates (``Target.exact_law``: no cache, an oracle has none)."""
    if not goal.exact_law:
        names = sorted({against for (against, _), each in TARGETS.items() if each.exact_law})
        raise ValueError(f"an oracle model holds a candidate against the exact law of {', '.join(names)} "
                         f"without a cache (cache='none'), got against={goal.name!r}, cache={cache!r}")


@st.composite
def oracle_cases(draw, model, names):
    """One row: a prompt of symbols (an enumerated joint's canvas fills its length), gen length <= MAX_GEN,
    blocks dividing it, a constant quota per step, temperature 0.7 or 1, a threshold where the target takes one."""
    prompt_length = draw(st.integers(1, 2))
    if isinstance(model, EnumeratedJoint):
        gen_length = model.max_length - prompt_length
    else:
        gen_length = draw(st.integers(2, MAX_GEN))
    if not 1 <= gen_length <= MAX_GEN:
        raise ValueError(f"the oracle's length leaves {gen_length} generated tokens; 1 to {MAX_GEN} are enumerated")
    block_length = draw(st.sampled_from([b for b in range(gen_length, 0, -1) if gen_length % b == 0]))
    per_step = draw(st.sampled_from([k for k in range(1, block_length + 1) if block_length % k == 0]))
    settings = {"gen_length": gen_length, "block_length": block_length,
                "steps": (gen_length // block_length) * (block_length // per_step),
                "temperature": draw(st.sampled_from((0.7, 1.0)))}
    if "threshold" in names:
        settings["threshold"] = draw(st.sampled_from(THRESHOLDS))
    prompt = [draw(st.integers(0, model.num_symbols - 1)) for _ in range(prompt_length)]
    return {"prompt": [prompt], "attention_mask": None, "seed": draw(st.integers(0, 2**31 - 1)), "settings": settings}


def law_rule(settings: dict):
    """The rule whose decode the target runs: the threshold, or the quota (masks per step) as TopK."""
    if settings.get("threshold") is not None:
        return Threshold(settings["threshold"])
    steps_per_block = settings["steps"] // (settings["gen_length"] // settings["block_length"])
    if steps_per_block < 1 or settings["block_length"] % steps_per_block:
        raise ValueError("the quota per step must be constant (block_length divisible by steps per block)")
    return TopK(settings["block_length"] // steps_per_block)


def run_exact_law_case(setup: CheckSetup, case: dict) -> LawOutcome:
    """Draw the candidate ``setup.samples`` times (by default as many as detect a TV of ``setup.delta``, ST6)
    on ``case`` and hold its outputs against the target's exact law."""
    model, settings = setup.model, case["settings"]
    try:
        rule = law_rule(settings)
        law = decoder_law(model, rule, case["prompt"][0], settings["gen_length"], settings["temperature"],
                          settings["block_length"])
    except ValueError as err:
        return LawOutcome(case, "skipped", [f"the exact law cannot be enumerated: {err}"])
    n = law_samples(law, setup.level, setup.delta, setup.samples)
    prompt, _ = case_tensors(case, model)
    like = F.pad(prompt, (0, settings["gen_length"]), value=model.special.mask_id)  # [1, P + G]
    limit = 2 * settings["gen_length"] + CALL_SLACK
    outputs = []
    for i in tqdm(range(n), desc="samples of the candidate", unit="sample", disable=not setup.progress, leave=False):
        side = run_candidate(setup, prompt, None, {**case, "seed": case["seed"] + i}, limit)
        canvas, problem = drawn_canvas(side, like, prompt.shape[1])
        if problem is not None:
            return failed_draw(case, i, problem, n)
        outputs.append(tuple(canvas[0, prompt.shape[1]:].tolist()))
    return fit_outcome(case, outputs, law, setup.level, f"the samples do not follow the exact law of "
                       f"{setup.goal.name} ({rule.name})", ("target", "candidate"))
