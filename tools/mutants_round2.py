"""A mutation catalogue for the code that landed with tier A's decision-flip budget, the family rows of the
exactness table and SGLang's Gemma4Renoise replay: ``testing.flips`` (spec/exactness.md EC13: the bounds ``eps``
is propagated by, the flip walk, the rejoin distance, forks and "ended apart", the within-budget comparison, the
verdict and the metrics), ``harness/diffusiongemma_rows.py``, ``harness/fastdllm_v2_rows.py`` and
``harness/family_rows.py`` (spec/exactness.md E6, E7), DiffusionGemma's per-row generators
(``veridec.rules.diffusiongemma``, spec/diffusiongemma.md DG6.5) and ``veridec generate --sampler diffusiongemma``,
and the uniform-state replay (``testing.engine_renoise``, ``engine_renoise_compare``, ``engine_renoise_check``,
``testing.families.sglang_renoise``; spec/engines.md EN8). Each mutant is a one-line mistake placed where it would
let a wrong decode or a wrong verdict pass silently (a flip wrongly excused, a bound off by a factor, a row
skipped, a generator shared, a tolerance from the wrong tensor, an excuse too broad).

    python -m tools.mutation --catalogue tools/mutants_round2.py --related-only
"""

from __future__ import annotations

from tools.mutants import Mutant

FLIP_TESTS = ("tests/test_flip_budget.py", "tests/test_check.py")
ROW_TESTS = ("tests/test_family_rows.py",)
DG_TESTS = ("tests/test_diffusiongemma.py", "tests/test_family_rows.py")
GENERATE_TESTS = ("tests/test_generate_diffusiongemma.py", "tests/test_cli.py")
RENOISE_TESTS = ("tests/test_engine_renoise.py", "tests/test_engine_check.py")
FLIPS = "testing/flips.py"
DG_ROWS = "harness/diffusiongemma_rows.py"
V2_ROWS = "harness/fastdllm_v2_rows.py"
DG_RULE = "veridec/rules/diffusiongemma.py"
RENOISE_RULE = "testing/families/sglang_renoise.py"
RENOISE_COMPARE = "testing/engine_renoise_compare.py"
EC13 = "spec/exactness.md EC13"
EN8 = "spec/engines.md EN8"

FLIP_MUTANTS: list[Mutant] = [
    Mutant("flips-probability-bound-doubled", FLIPS, '    "probability": lambda eps, vocab: eps / 2,\n',
           '    "probability": lambda eps, vocab: eps,\n',
           "a probability is held to eps, not eps / 2: flips twice as far from the tie are excused", EC13,
           FLIP_TESTS),
    Mutant("flips-probability-margin-bound-doubled", FLIPS, '    "probability margin": lambda eps, vocab: eps,\n',
           '    "probability margin": lambda eps, vocab: 2 * eps,\n',
           "a probability margin is held to 2 eps, not eps", EC13, FLIP_TESTS),
    Mutant("flips-entropy-bound-linear-in-vocab", FLIPS,
           '    "entropy": lambda eps, vocab: 2 * eps + math.expm1(2 * eps) * math.log(vocab),\n',
           '    "entropy": lambda eps, vocab: 2 * eps + math.expm1(2 * eps) * vocab,\n',
           "the entropy bound takes V for log V (H <= log V): a far looser bound", EC13, FLIP_TESTS),
    Mutant("flips-logit-gap-bound-quadrupled", FLIPS, "    return 2 * eps\n", "    return 4 * eps\n",
           "a token flip's logit gap is held to 4 eps, not 2 eps", EC13, FLIP_TESTS),
    Mutant("flips-threshold-margin-twice-the-bound", FLIPS,
           '        options.append(("score - threshold", abs(score - threshold), delta))\n',
           '        options.append(("score - threshold", abs(score - threshold), 2 * delta))\n',
           "a score compared with a constant threshold is held to twice its bound, not once", EC13, FLIP_TESTS),
    Mutant("flips-rank-margin-where-threshold-decided", FLIPS,
           "    if threshold is None or weak < threshold:\n", "    if threshold is None or weak >= threshold:\n",
           "the ranking boundary's margin is offered where the threshold decided every commit (an excuse too broad)",
           EC13, FLIP_TESTS),
    Mutant("flips-committed-margin-forgets-gap", FLIPS,
           '            options.append(("score - strongest candidate left", abs(score - (weak - gap)), 2 * delta))\n',
           '            options.append(("score - strongest candidate left", abs(score - weak), 2 * delta))\n',
           "a committed position's margin is taken to the weakest commit (often itself), not to the strongest "
           "candidate left", EC13, FLIP_TESTS),
    Mutant("flips-no-margin-recorded-excused", FLIPS,
           '    return min(options, key=lambda o: o[1] - o[2], default=("no margin recorded", math.inf, 2 * delta))\n',
           '    return min(options, key=lambda o: o[1] - o[2], default=("no margin recorded", 0.0, 2 * delta))\n',
           "a position flip with no recorded margin gets margin 0: always within the budget", EC13, FLIP_TESTS),
    Mutant("flips-rejoin-distance-min", FLIPS,
           '            flip.rejoin, flip.wake = (None, "open") if meet is None else '
           '(max(meet[0] - i, meet[1] - j), meet[2])\n',
           '            flip.rejoin, flip.wake = (None, "open") if meet is None else '
           '(min(meet[0] - i, meet[1] - j), meet[2])\n',
           "the rejoin distance is the shorter side's steps, not the longer's: a long wake passes k", EC13,
           FLIP_TESTS),
    Mutant("flips-open-wake-passes", FLIPS,
           "        late = lambda f: f.rejoin is None or (k is not None and f.rejoin > k)\n",
           "        late = lambda f: k is not None and f.rejoin is not None and f.rejoin > k\n",
           "a flip whose wake never closed is not a failure", EC13, FLIP_TESTS),
    Mutant("flips-failure-needs-both", FLIPS,
           "        return [f for f in self.flips if not f.within or late(f)]\n",
           "        return [f for f in self.flips if not f.within and late(f)]\n",
           "a flip outside the budget fails only when its wake is also late", EC13, FLIP_TESTS),
    Mutant("flips-end-flip-skipped", FLIPS, "    if i < len(ours) or j < len(theirs):  # one side commits more: it "
           "ends on another canvas\n",
           "    if i < len(ours) and j < len(theirs):  # one side commits more: it ends on another canvas\n",
           "a side that commits more after the other ended is not an end flip", EC13, FLIP_TESTS),
    Mutant("flips-ended-apart-at-generated-positions", FLIPS,
           "    if all(a[p] == b[p] for p in a.keys() & b.keys()) and all(p < prompt_length for p in apart):\n",
           "    if all(a[p] == b[p] for p in a.keys() & b.keys()) and any(p < prompt_length for p in apart):\n",
           "a wake apart at a generated position (one prompt mask among them) counts as ended apart", EC13,
           FLIP_TESTS),
    Mutant("flips-max-error-last-case", FLIPS,
           '        entry["max_error"] = max(entry["max_error"] or 0.0, case.error)\n',
           '        entry["max_error"] = case.error\n',
           "the metrics' largest eps is the last judged case's, not the largest", EC13, FLIP_TESTS),
]

ROW_MUTANTS: list[Mutant] = [
    Mutant("rows-dg-batch-one-shared-stream", DG_ROWS,
           "                                 seeded(inputs.seed, inputs.model.device, rows))\n",
           "                                 seeded(inputs.seed, inputs.model.device))\n",
           "the batch row draws every row from one stream, not one generator per row", "spec/exactness.md E6",
           ROW_TESTS),
    Mutant("rows-dg-cached-logits-first-step-only", DG_ROWS,
           "    agreements = [row_agreement(e, m, pad_id, every_step=bitwise) for e, m in zip(expected, measured)]\n",
           "    agreements = [row_agreement(e, m, pad_id, every_step=False) for e, m in zip(expected, measured)]\n",
           "the cached row's logits are compared at each canvas's first step only, not at every step",
           "spec/exactness.md E6", ROW_TESTS),
    Mutant("rows-dg-float32-tier-a", DG_ROWS,
           '    tier = "E" if model.dtype in (torch.float32, torch.float64) else ROUNDED_TIER\n',
           '    tier = "E" if model.dtype == torch.float64 else ROUNDED_TIER\n',
           "batch and padded are tier A (reported, not asserted) in float32", "spec/exactness.md E6", ROW_TESTS),
    Mutant("rows-dg-max-logit-error-min", DG_ROWS, "                max_logit_error=max(a[3] for a in agreements), "
           "full_forwards=counters[0],\n",
           "                max_logit_error=min(a[3] for a in agreements), full_forwards=counters[0],\n",
           "the row's logit error is the smallest row's, not the largest", "spec/exactness.md E6", ROW_TESTS),
    Mutant("rows-dg-extra-steps-truncated", DG_ROWS,
           "    return inside == expected.steps, int((generated == truth).sum()), generated.shape[0], error\n",
           "    return inside[:len(expected.steps)] == expected.steps, int((generated == truth).sum()), "
           "generated.shape[0], error\n",
           "a measured row's extra steps inside the expected canvases are cut off before the events are compared",
           "spec/exactness.md E6", ROW_TESTS),
    Mutant("rows-v2-prefix-cache-tier-a", V2_ROWS,
           '    return (RowKind("prefix-cache", "E", prefix_sides, compared), RowKind("block-cache", "A", block_sides, '
           "compared))\n",
           '    return (RowKind("prefix-cache", "A", prefix_sides, compared), RowKind("block-cache", "A", block_sides, '
           "compared))\n",
           "the prefix cache's row is tier A: reported, never asserted exact", "spec/exactness.md E7", ROW_TESTS),
    Mutant("rows-v2-tokens-against-themselves", V2_ROWS,
           "    found = [compare_traces(e.trace, m.trace, e.canvas, m.canvas, numeric_error=tol)\n",
           "    found = [compare_traces(e.trace, m.trace, e.canvas, e.canvas, numeric_error=tol)\n",
           "the measured decode's tokens are the expected canvas: token match is always 1", "spec/exactness.md E7",
           ROW_TESTS),
    Mutant("rows-v2-decoder-not-listed", "harness/family_rows.py",
           "FAMILY_DECODERS = (diffusiongemma_rows.DECODER, fastdllm_v2_rows.DECODER)\n",
           "FAMILY_DECODERS = (diffusiongemma_rows.DECODER,)\n",
           "the default decoders leave fastdllm-v2 out: its rows are silently skipped", "spec/exactness.md E6",
           ROW_TESTS),
]

DG_MUTANTS: list[Mutant] = [
    Mutant("dg-per-row-sample-shares-row-0", DG_RULE,
           "    return torch.stack([torch.multinomial(probs[b], num_samples=1, generator=g).view(length) if rows[b]\n",
           "    return torch.stack([torch.multinomial(probs[b], num_samples=1, generator=generator[0]).view(length) "
           "if rows[b]\n",
           "every row's sample is drawn from row 0's generator", "spec/diffusiongemma.md DG6.5", DG_TESTS),
    Mutant("dg-per-row-noise-shares-row-0", DG_RULE,
           "    return torch.stack([torch.randint(0, vocab_size, shape[1:], generator=g, device=device) if rows[b]\n",
           "    return torch.stack([torch.randint(0, vocab_size, shape[1:], generator=generator[0], device=device) "
           "if rows[b]\n",
           "every row's noise canvas is drawn from row 0's generator", "spec/diffusiongemma.md DG6.5", DG_TESTS),
    Mutant("dg-per-row-finished-noise-draws", DG_RULE,
           "    rows = [True] * shape[0] if live is None else live.tolist()\n", "    rows = [True] * shape[0]\n",
           "a row stopped within the canvas still draws noise: its stream runs ahead of its lone decode",
           "spec/diffusiongemma.md DG6.5", DG_TESTS),
    Mutant("dg-per-row-longer-list-accepted", DG_RULE, "    if len(generator) != rows:\n",
           "    if len(generator) < rows:\n", "a list with more generators than rows is accepted",
           "spec/diffusiongemma.md DG6.5", DG_TESTS),
    Mutant("dg-generate-ignores-seed", "harness/generate_diffusiongemma.py",
           "    generator = torch.Generator(device=device).manual_seed(args.seed)\n",
           "    generator = torch.Generator(device=device).manual_seed(0)\n",
           "generate --sampler diffusiongemma draws with seed 0 whatever --seed says", "spec/diffusiongemma.md DG6.4",
           GENERATE_TESTS),
    Mutant("dg-generate-shows-past-eos", "harness/generate_diffusiongemma.py", "    return generated[:cut]\n",
           "    return generated\n", "the printed ids run on past the first EOS (padding shown as text)",
           "spec/diffusiongemma.md DG5", GENERATE_TESTS),
]

RENOISE_MUTANTS: list[Mutant] = [
    Mutant("renoise-done-flag-not-compared", RENOISE_COMPARE,
           "        if not torch.equal(after[i], expected) or done[i] != reference_done:\n",
           "        if not torch.equal(after[i], expected):\n",
           "an engine that stops a row early or late passes when the canvas agrees", EN8, RENOISE_TESTS),
    Mutant("renoise-finished-row-may-change", RENOISE_COMPARE,
           "        expected = before[i] if decision is None else decision.tokens\n",
           "        expected = after[i] if decision is None else decision.tokens\n",
           "a row the rule has finished is held to the engine's own canvas: changing it passes", EN8, RENOISE_TESTS),
    Mutant("renoise-temperature-excuse-one-step-off", RENOISE_COMPARE,
           "    remaining = rule.remaining + 1  # the step that made rule.logits\n",
           "    remaining = rule.remaining  # the step that made rule.logits\n",
           "the temperature-rounding excuse is checked at the next step's temperature: a schedule one step early is "
           "excused", EN8, RENOISE_TESTS),
    Mutant("renoise-stop-without-stability", RENOISE_RULE,
           "        stable = p.stability_threshold == 0 or (len(self.history) == p.stability_threshold and all(\n",
           "        stable = p.stability_threshold == 0 or (all(\n",
           "the rule counts an empty or short argmax history as stable: it agrees with a stop without stability",
           EN8, RENOISE_TESTS),
    Mutant("renoise-race-tie-entropy-rounding", RENOISE_RULE,
           "                               near_tie=by_entropy <= rounding or race <= "
           "probability_rounding(processed))\n",
           "                               near_tie=by_entropy <= rounding or race <= rounding)\n",
           "the race's relative margin is held to the entropies' rounding, not the probabilities'", EN8,
           RENOISE_TESTS),
    Mutant("renoise-stop-margin-when-unstable", RENOISE_RULE,
           "                         abs(mean - p.confidence_threshold) if stable else math.inf)\n",
           "                         abs(mean - p.confidence_threshold))\n",
           "the confidence margin counts as a near tie where stability already decided the stop", EN8,
           RENOISE_TESTS),
    Mutant("renoise-acceptance-margin-inclusive-sum", RENOISE_RULE,
           "    return ((ranked.cumsum(0) - ranked) - bound).abs().min().item()\n",
           "    return (ranked.cumsum(0) - bound).abs().min().item()\n",
           "the acceptance margin uses the inclusive cumulative sum C_k, not C_k - H_(k)", EN8, RENOISE_TESTS),
    Mutant("renoise-seed-zero-falls-back-to-rid", RENOISE_RULE, "    if seed is not None:\n", "    if seed:\n",
           "a config seed of 0 is ignored: the request id's blake2b seeds the stream", EN8, RENOISE_TESTS),
]

MUTANTS: list[Mutant] = FLIP_MUTANTS + ROW_MUTANTS + DG_MUTANTS + RENOISE_MUTANTS
