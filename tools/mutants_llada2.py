# ruff: noqa: E501  (a mutant's original and mutated texts are verbatim source lines)
"""A mutation catalogue for the llada2 check target (spec/block_diffusion.md BD12.1): LLaDA2.0's loop as a
reference (``llada2_generate``: the step cap ``min(steps, gen_length // minimal_topk)``, ``after_schedule="leave"``,
top-k / top-p of None, the padding refusal), the target's entry (its settings, one row),
the cases and knobs drawn for it (``llada2_settings``, the ``llada2`` family branch, EC7's LLaDA2 knob values),
how a candidate's output is matched to the target's canvas (``full_canvas`` and its call in ``_compare``), and
the llada convention's explicit call that LLaDA2's loops use (spec/models.md MA1: the additive / boolean mask).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue was read.

    python -m tools.mutation --catalogue tools/mutants_llada2.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

LLADA2_CHECK = "tests/test_llada2_check.py"
LLADA2_GOLDEN = "tests/test_llada2_golden.py"
CHECK = "tests/test_check.py"
TRUTHS = "tests/test_checker_truths.py"
KNOBS = "tests/test_knobs.py"
CANDIDATE_CALLS = "tests/test_candidate_calls.py"
WINO_CHECK = "tests/test_wino_check.py"

REFERENCE = "reference/block_diffusion.py"
TARGETS = "testing/targets.py"
CASES = "testing/sdar_cases.py"
STRATEGIES = "testing/strategies.py"
KNOB_CODE = "testing/knobs.py"
RUNNING = "testing/running.py"
EXACT = "testing/exact.py"
ADAPTERS = "veridec/adapters.py"

BD12 = "spec/block_diffusion.md BD12"
BD12_1 = "spec/block_diffusion.md BD12.1"
MA1 = "spec/models.md MA1"
EC1 = "spec/exactness.md EC1"
EC2 = "spec/exactness.md EC2"
EC7 = "spec/exactness.md EC7"

MUTANTS: list[Mutant] = [
    # --- reference/block_diffusion.py: llada2_generate ---
    Mutant(
        "l2-steps-not-capped",
        REFERENCE,
        "                                    min(steps, gen_length // minimal_topk), temperature,\n",
        "                                    steps, temperature,\n",
        'the step budget is steps, not min(steps, gen_length // minimal_topk): with minimal_topk 2 '
        'the target runs more steps per block, so a port that ignores minimal_topk passes',
        BD12_1,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    Mutant(
        "l2-after-schedule-commit",
        REFERENCE,
        "                                    None if eos_id is None else [eos_id], ties=ties, generator=generator,\n"
        "                                    after_schedule=\"leave\")\n",
        "                                    None if eos_id is None else [eos_id], ties=ties, generator=generator)\n",
        'after_schedule left at its default "commit": a block whose S steps are spent with masks '
        "left gets BD6.2's extra forward, so a port that adds that forward (not LLaDA2's loop) passes",
        BD12,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    Mutant(
        "l2-top-k-none-is-one",
        REFERENCE,
        "                                    0 if top_k is None else top_k, 1.0 if top_p is None else top_p,\n",
        "                                    1 if top_k is None else top_k, 1.0 if top_p is None else top_p,\n",
        'top_k=None mapped to 1 instead of 0 (off): sampled cases draw from the top token only, so a '
        'port that filters to top-1 passes and a faithful one fails',
        BD12_1,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    Mutant(
        "l2-top-p-none-is-zero",
        REFERENCE,
        "                                    0 if top_k is None else top_k, 1.0 if top_p is None else top_p,\n",
        "                                    0 if top_k is None else top_k, 0.0 if top_p is None else top_p,\n",
        "top_p=None mapped to 0 (top_k's pattern) instead of 1: only the first sorted token survives "
        'at temperature > 0, so a port whose top-p keeps only the best token passes',
        BD12_1,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    Mutant(
        "l2-steps-capped-with-max",
        REFERENCE,
        "                                    min(steps, gen_length // minimal_topk), temperature,\n",
        "                                    max(steps, gen_length // minimal_topk), temperature,\n",
        'the step budget capped with max instead of min: with steps below gen_length // minimal_topk '
        'each block gets more steps than asked, so a port that ignores steps passes',
        BD12_1,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    Mutant(
        "l2-padding-refusal-any",
        REFERENCE,
        "    if attention_mask is not None and not bool(attention_mask.bool().all()):\n",
        "    if attention_mask is not None and not bool(attention_mask.bool().any()):\n",
        'the padding refusal tests any() instead of all(): a left-padded row is decoded as if its '
        'pads were prompt, so a case the loops cannot take is compared instead of refused',
        BD12_1,
        (LLADA2_CHECK, LLADA2_GOLDEN),
    ),
    # --- testing/targets.py: the ("llada2", "none") target ---
    Mutant(
        "l2-settings-without-eos-id",
        'testing/families/sdar.py',
        'LLADA2_SETTINGS = ("gen_length", "block_length", "steps", "temperature", "top_k", "top_p", '
        '"threshold", "minimal_topk",\n'
        "                   \"eos_id\")\n",
        'LLADA2_SETTINGS = ("gen_length", "block_length", "steps", "temperature", "top_k", "top_p", '
        '"threshold", "minimal_topk")\n',
        "eos_id missing from the target's settings: it is never drawn nor passed, so a port of "
        'generate that never stops at EOS (or stops mid-block) passes',
        BD12_1,
        (LLADA2_CHECK, CHECK),
    ),
    Mutant(
        "l2-max-batch-lifted",
        TARGETS,
        "                               call=\"veridec.reference.block_diffusion.llada2_generate\", max_batch=1,\n",
        "                               call=\"veridec.reference.block_diffusion.llada2_generate\",\n",
        "the target's max_batch of 1 dropped: multi-row cases are drawn (and replayed cases not "
        'refused up front), the target refuses them and they are silently discarded, leaving fewer cases checked',
        BD12_1,
        (LLADA2_CHECK, CHECK),
    ),
    # --- testing/sdar_cases.py: llada2_settings ---
    Mutant(
        "l2-minimal-topk-above-gen-length",
        'testing/families/sdar.py',
        '                "steps": draw(st.integers(1, 6)), "minimal_topk": draw(st.sampled_from((1, '
        '2) if gen > 1 else (1,))),\n',
        '                "steps": draw(st.integers(1, 6)), "minimal_topk": draw(st.sampled_from((1, '
        '2) if gen >= 1 else (1,))),\n',
        'minimal_topk 2 drawn with gen_length 1: the target refuses (0 steps per block) and the '
        'one-token cases the shrinker aims for are discarded half the time',
        BD12_1,
        (LLADA2_CHECK, KNOBS),
    ),
    # --- testing/strategies.py: the llada2 family branch of cases ---
    Mutant(
        "l2-family-draws-sdar-settings",
        'testing/families/sdar.py',
        'sampled: llada2_settings(names, model.special.eos_id,',
        'sampled: sdar_settings(names, model.special.eos_id,',
        "the llada2 branch draws SDAR's settings: steps, minimal_topk, threshold, eos_id and top-k / "
        'top-p of None are never drawn, so a port that mishandles any of them passes',
        EC2,
        (LLADA2_CHECK, KNOBS),
    ),
    # --- testing/knobs.py: LLaDA2's knobs (EC7) ---
    Mutant(
        "l2-knob-alternatives-only-current",
        'testing/families/common.py',
        'for value in options if value != settings.get(name)]',
        'for value in options if value == settings.get(name)]',
        "a fixed-option knob's alternatives are only its current value (every family's): the target "
        "never moves, every such knob is 'not exercised' and a port that ignores threshold or steps passes the knob check",
        EC7,
        (LLADA2_CHECK, KNOBS),
    ),
    Mutant(
        "l2-knobs-fall-to-generic-lists",
        'testing/families/sdar.py',
        '"minimal_topk": minimal_topks,',
        '"minimal_topk": lambda settings: [],',
        "llada2's minimal_topk gets no alternatives: it is never exercised, so a port that drops "
        'minimal_topk passes the knob check',
        EC7,
        (LLADA2_CHECK, KNOBS),
    ),
    Mutant(
        "l2-knobs-without-minimal-topk",
        'testing/families/sdar.py',
        '"temperature": choices("temperature", KNOB_TEMPERATURES), "minimal_topk": minimal_topks,',
        '"temperature": choices("temperature", KNOB_TEMPERATURES),',
        'minimal_topk left out of KNOBS: a port that reads minimal_topk and drops it is never '
        'reported as a knob without effect',
        EC7,
        (LLADA2_CHECK, KNOBS),
    ),
    # --- testing/running.py and testing/exact.py: the candidate's output against the target's canvas ---
    Mutant(
        "l2-full-canvas-any-shorter-width",
        RUNNING,
        "    if tokens.shape[0] == canvas.shape[0] and tokens.shape[1] == canvas.shape[1] - prompt_length:\n",
        "    if tokens.shape[0] == canvas.shape[0] and tokens.shape[1] <= canvas.shape[1] - prompt_length:\n",
        "full_canvas accepts any output no wider than the generation: generate's output cut at EOS "
        "is glued to the prompt as a shorter 'canvas' instead of being refused with the reason",
        BD12_1,
        (LLADA2_CHECK, CHECK, TRUTHS),
    ),
    Mutant(
        "l2-full-canvas-prompt-from-the-end",
        RUNNING,
        "        return torch.cat([canvas[:, :prompt_length].to(tokens.device), tokens], dim=1)\n",
        "        return torch.cat([canvas[:, -prompt_length:].to(tokens.device), tokens], dim=1)\n",
        "a generation-only output is prefixed with the canvas's last prompt_length tokens instead of "
        'the prompt: a correct candidate returning the generation alone is reported as differing',
        EC1,
        (CANDIDATE_CALLS, LLADA2_CHECK, CHECK),
    ),
    Mutant(
        "l2-compare-full-canvas-arguments-swapped",
        EXACT,
        "    canvas = full_canvas(theirs.canvas, ours.canvas, prompt_length)\n",
        "    canvas = full_canvas(ours.canvas, theirs.canvas, prompt_length)\n",
        'full_canvas called with the two sides swapped: a whole-canvas candidate is replaced by the '
        "target's own canvas, so wrong tokens pass the token comparison",
        EC1,
        (LLADA2_CHECK, CHECK, TRUTHS),
    ),
    # --- veridec/adapters.py: the llada convention's explicit call ---
    Mutant(
        "l2-additive-mask-read-inverted",
        ADAPTERS,
        "        sees = attention_mask == 0\n",
        "        sees = attention_mask != 0\n",
        "an additive mask's -inf read as 'attends' and 0 as 'masked': LLaDA2's block-causal mask "
        'becomes anti-causal, so a faithful LLaDA2 port gets other logits (or NaN) and is failed',
        MA1,
        (LLADA2_CHECK, CANDIDATE_CALLS, WINO_CHECK),
    ),
    Mutant(
        "l2-all-zero-additive-read-as-booleans",
        ADAPTERS,
        "    if attention_mask.dtype == torch.bool or (zero_one.all() and (attention_mask == 1).any()):\n",
        "    if attention_mask.dtype == torch.bool or zero_one.all():\n",
        "an additive mask of zeros only (one block: W = b, LLaDA2's .log() of an all-ones matrix) "
        "read as 0/1 booleans that attend nowhere: the first block's forward of a correct port is all -inf",
        MA1,
        (LLADA2_CHECK, CANDIDATE_CALLS, WINO_CHECK),
    ),
]
