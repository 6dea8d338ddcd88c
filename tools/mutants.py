"""The mutation gate's catalogue: realistic single-point bugs, one small patch each (``tools.mutation``).

Each ``Mutant`` is a one-line (at most a two-line swap) mistake a competent developer could make and a reviewer
could miss: a comparison's strictness, a constant in a formula, a precision, the order of two operations, a
tie order, a direction, a boundary token, an off-by-one, a counter counting the wrong thing, an inverted mask,
a missing clone. ``original`` must occur exactly once in ``path`` (``tests/test_mutation.py`` checks it
against the working tree); ``clause`` names the spec clause the mutated line implements; ``tests`` are the
test files to run first (the module's own tests, by the spec's citations), before the whole suite.

The catalogue is spread over the code in proportion to its size (statement lines without docstrings, measured
when it was written: rules 608, models 632, guidance 267, oracles 171, trace/compare 167, numerics/canvas/
decoding 61, reference 251, optimized 396, proofs_checks 515), not chosen by what a test is known to cover.
Keep it as data: a changed line that a mutant targets makes ``tests/test_mutation.py`` fail until the entry is
updated to the new text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mutant:
    name: str  # unique, kebab-case
    path: str  # repository-relative file the patch applies to
    original: str  # the exact text replaced; must occur exactly once in the file
    replacement: str
    description: str  # the bug, one line
    clause: str  # the spec clause the mutated line implements
    tests: tuple[str, ...]  # related test files (repository-relative), run first

    @property
    def area(self) -> str:
        """Where the mutant lives: veridec/<sub-package or module>, reference, optimized or proofs_checks."""
        parts = self.path.split("/")
        if parts[0] != "veridec":
            return parts[0]
        return "veridec/" + (parts[1] if len(parts) > 2 else parts[1].removesuffix(".py"))


# Related test files, named once.
SAMPLERS = "tests/test_reference_samplers.py"
RULES = "tests/test_parallel_rules.py"
DECODERS = "tests/test_parallel_decoders.py"
FASTDLLM = "tests/test_fastdllm.py"
CACHE = "tests/test_fastdllm_cache.py"
COUNTERS = "tests/test_counters.py"
SPECULATIVE = "tests/test_speculative.py"
MODEL_CACHE = "tests/test_model_cache.py"
TWIN = "tests/test_transformers_equivalence.py"
CHECKPOINT = "tests/test_checkpoint.py"
ORACLES = "tests/test_oracles.py"
GUIDANCE = "tests/test_guidance.py"
FASTGUIDE = "tests/test_fastguide.py"
REWARD_TRAINING = "tests/test_reward_training.py"
COMPARE = "tests/test_compare.py"
THEOREMS = "tests/test_theorems.py"
OBSERVATIONS = "tests/test_observations.py"
CLI = "tests/test_cli.py"
HOSTILE = "tests/test_hostile_inputs.py"
ORACLE_PARALLEL = "tests/test_spec_oracles_parallel.py"
ORACLE_SEQUENTIAL = "tests/test_spec_oracles_sequential.py"
ORACLE_GUIDANCE = "tests/test_spec_oracles_guidance.py"
ORACLE_THEOREMS = "tests/test_spec_oracles_theorems.py"
GOLDEN = "tests/test_golden.py"
CHECK = "tests/test_check.py"
STOCHASTIC = "tests/test_stochastic.py"
LAWS = "tests/test_laws.py"
UNITS = "tests/test_units.py"
EXACT_FIT = "tests/test_exact_law_fit.py"
RECORDING = "tests/test_recording.py"

MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------ veridec/rules: common (LLaDA-style proposal)
    Mutant(
        "gumbel-noise-float32", "veridec/rules/common.py",
        "noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)",
        "noise = torch.rand(logits.shape, dtype=torch.float32, device=logits.device, generator=generator)",
        "Gumbel-max noise u drawn in float32 instead of float64 (other draws per seed, coarser noise)",
        "spec/sequential.md SQ1.4 step 2; spec/notation.md N7", (SAMPLERS, FASTDLLM, DECODERS)),
    Mutant(
        "quota-remainder-off-by-one", "veridec/rules/common.py",
        "return masks // steps + (index < masks % steps).long()",
        "return masks // steps + (index <= masks % steps).long()",
        "LLaDA's quota gives the remainder to steps i <= M mod S (one token too many per block)",
        "spec/sequential.md SQ1.3", (SAMPLERS, FASTDLLM)),
    Mutant(
        "ranking-ties-to-highest-position", "veridec/rules/common.py",
        "ranking = torch.sort(score, dim=1, descending=True, stable=True).indices",
        "ranking = torch.sort(score, dim=1, stable=True).indices.flip(1)",
        "equal confidences rank the highest position first (stable ascending sort, reversed)",
        "spec/notation.md N5; spec/parallel.md P1.3", (RULES, SAMPLERS, DECODERS)),
    # ------------------------------------------------------------------ veridec/rules: llada
    Mutant(
        "tokens-per-step-floor", "veridec/rules/llada.py",
        "n_steps = math.ceil(int(counts.max()) / k)",
        "n_steps = int(counts.max()) // k",
        "the fixed top-k schedule takes floor(M/k) steps, dropping the remainder step",
        "spec/sequential.md SQ1.3 (tokens_per_step)", (SAMPLERS,)),
    Mutant(
        "llada-confidence-before-eos-edit", "veridec/rules/llada.py",
        "probs = F.softmax(official_confidence_logits(logits, params, special), dim=-1)  # in the logits' dtype",
        "probs = F.softmax(logits, dim=-1)  # in the logits' dtype",
        "the confidence softmax reads the logits before the EOS/EoT -inf edit",
        "spec/sequential.md SQ1.4 step 3-4, SQ1.6", (SAMPLERS,)),
    # ------------------------------------------------------------------ veridec/rules: dream
    Mutant(
        "top-p-drops-crossing-token", "veridec/rules/filters.py",
        "drop[..., 1:] = beyond[..., :-1]",
        "drop[..., 1:] = beyond[..., 1:]",
        "nucleus filter forgets the shift: the token that crosses top_p is removed",
        "spec/sequential.md SQ2.5", (SAMPLERS, GUIDANCE)),
    Mutant(
        "dream-temperature-after-top-p", "veridec/rules/dream.py",
        "    if temperature > 0:\n        logits = logits / temperature\n"
        "    if top_p is not None and top_p < 1:\n        logits = top_p_logits(logits, top_p, ties)\n",
        "    if top_p is not None and top_p < 1:\n        logits = top_p_logits(logits, top_p, ties)\n"
        "    if temperature > 0:\n        logits = logits / temperature\n",
        "sample_tokens applies top-p to the untempered logits, then divides by the temperature",
        "spec/sequential.md SQ2.5", (SAMPLERS,)),
    Mutant(
        "dream-entropy-sign", "veridec/rules/common.py",
        "return torch.sum(probs * torch.log(probs + 1e-10), dim=-1)",
        "return -torch.sum(probs * torch.log(probs + 1e-10), dim=-1)",
        "alg='entropy' scores by +entropy, so the least certain positions are committed first",
        "spec/sequential.md SQ2.4; spec/notation.md N4", (SAMPLERS,)),
    Mutant(
        "dream-count-from-max-not-mean", "veridec/rules/dream.py",
        "mean_masks = mask_index.sum() / mask_index.shape[0]",
        "mean_masks = mask_index.sum(dim=1).max()",
        "Dream's per-step count uses the largest row's masks instead of the batch mean",
        "spec/sequential.md SQ2.4", (SAMPLERS,)),
    Mutant(
        "dream-batched-when-any-row-has-k", "veridec/rules/dream.py",
        "if min(counts) >= k:",
        "if max(counts) >= k:",
        "the batched top-k runs when some row has fewer than k masks (re-masks committed tokens)",
        "spec/sequential.md SQ2.4 (deviation: clamp k per row)", (SAMPLERS,)),
    # ------------------------------------------------------------------ veridec/rules: parallel
    Mutant(
        "factor-n-instead-of-n-plus-1", "veridec/rules/parallel.py",
        "levels = 1 - torch.full_like(n, self.factor) / (n + 1)",
        "levels = 1 - torch.full_like(n, self.factor) / n",
        "the factor rule's level is 1 - f/n instead of 1 - f/(n + 1)",
        "spec/parallel.md P4", (RULES, FASTDLLM)),
    # the three bugs tests/test_spec_oracles_parallel.py found (fixed), kept so that they stay dead
    Mutant(
        "factor-level-in-float32", "veridec/rules/parallel.py",
        "n = torch.arange(1, sorted_conf.shape[1] + 1, device=sorted_conf.device, dtype=torch.float64)[None]",
        "n = torch.arange(1, sorted_conf.shape[1] + 1, device=sorted_conf.device)[None]",
        "the factor level 1 - f/(n + 1) is evaluated in float32 (a LongTensor n) against float64 confidences",
        "spec/parallel.md P4", (ORACLE_PARALLEL, RULES)),
    Mutant(
        "eb-prefix-as-total-minus-entry", "veridec/rules/parallel.py",
        "before = F.pad(entropy.cumsum(dim=1)[:, :-1], (1, 0))",
        "before = entropy.cumsum(dim=1) - entropy",
        "EB's sum of the preceding entropies formed as a running total minus the entry (loses sub-ulp terms)",
        "spec/parallel.md P6", (ORACLE_PARALLEL, RULES)),
    Mutant(
        "dapd-query-clamped-not-first-real", "reference/parallel.py",
        "query = scoring_queries(x.shape[1], model.logit_shift, attention_mask, x.device)  # [B, L]",
        "query = (positions - model.logit_shift).clamp_min(0)  # [B, L]",
        "DAPD reads a padded Dream row's first real token at the padding before it instead of its own position",
        "spec/parallel.md P8; spec/models.md M3", (ORACLE_PARALLEL, DECODERS)),
    Mutant(
        "passes-inclusive-swapped", "veridec/rules/parallel.py",
        "return value >= bound if inclusive else value > bound",
        "return value > bound if inclusive else value >= bound",
        "inclusive and strict level comparisons swapped (c > tau where the official code has c >= tau)",
        "spec/parallel.md P3, P4, P5", (RULES, FASTDLLM)),
    Mutant(
        "localleap-neighbours-need-kappa", "veridec/rules/parallel.py",
        "neighbours = near & passes(view.confidence, self.tau, self.inclusive) & view.candidates",
        "neighbours = near & passes(view.confidence, self.kappa, self.inclusive) & view.candidates",
        "LocalLeap's neighbours are held to the anchor level kappa instead of tau",
        "spec/parallel.md P5", (RULES, DECODERS)),
    Mutant(
        "eb-highest-entropy-first", "veridec/rules/parallel.py",
        "order = torch.sort(score, dim=1, descending=True, stable=True).indices  # [B, W]",
        "order = torch.sort(score, dim=1, stable=True).indices  # [B, W]",
        "EB-Sampler sorts -entropy ascending: candidates by decreasing entropy",
        "spec/parallel.md P6", (RULES, DECODERS)),
    Mutant(
        "klass-kl-reversed", "veridec/rules/parallel.py",
        "kl = (view.probs * (log_p - log_prev)).sum(dim=-1)  # [B, W] KL(p_t || p_{t-1})",
        "kl = (state[\"probs\"][:, window] * (log_prev - log_p)).sum(dim=-1)  # [B, W] KL(p_t || p_{t-1})",
        "KLASS measures KL(p_{t-1} || p_t) instead of KL(p_t || p_{t-1})",
        "spec/parallel.md P7", (RULES, DECODERS)),
    Mutant(
        "dapd-progress-reversed", "veridec/rules/parallel.py",
        "progress = 1 - view.block_masks.double() / view.block_length  # [B]",
        "progress = view.block_masks.double() / view.block_length  # [B]",
        "DAPD's progress is the masked share, so tau decreases as the block fills",
        "spec/parallel.md P8", (RULES, DECODERS)),
    Mutant(
        "certified-non-strict", "veridec/rules/parallel.py",
        "keep = in_order & (errors.cumsum(dim=1) + errors.cummax(dim=1).values < 1)",
        "keep = in_order & (errors.cumsum(dim=1) + errors.cummax(dim=1).values <= 1)",
        "certified decoding accepts S + e_max = 1, where T1 allows a tie",
        "spec/theorems.md TC1, T1", (RULES, THEOREMS)),
    Mutant(
        "quota-reads-masks-now", "veridec/rules/parallel.py",
        "return torch.minimum(quota(view.block_masks_at_start, self.steps_per_block, i), view.count)",
        "return torch.minimum(quota(view.block_masks, self.steps_per_block, i), view.count)",
        "Quota computes k_i from the masks left now instead of the block's masks at its start",
        "spec/parallel.md P9", (FASTDLLM, CACHE)),
    # ------------------------------------------------------------------ veridec/rules: step, drafts
    Mutant(
        "step-confidence-in-model-dtype", "veridec/rules/step.py",
        "probs = F.softmax(logits.to(torch.float64), dim=-1)  # [B, W, V]",
        "probs = F.softmax(logits, dim=-1)  # [B, W, V]",
        "parallel_step's probabilities drop the float64 cast (confidences in the model's dtype)",
        "spec/parallel.md P1.2; spec/fastdllm.md FD2", (RULES, DECODERS, FASTDLLM)),
    Mutant(
        "drafts-chain-one-too-deep", "veridec/rules/drafts.py",
        "for i in rest[:self.depth - alternative - 1]:",
        "for i in rest[:self.depth - alternative]:",
        "draft alternative i reaches depth D - i + 1 (one node too many per chain)",
        "spec/speculative.md SPD1", (SPECULATIVE,)),
    # ------------------------------------------------------------------ veridec/models
    Mutant(
        "rmsnorm-eps-outside-rsqrt", "veridec/models/layers.py",
        "normed = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + self.eps)",
        "normed = xc * (torch.rsqrt(xc.pow(2).mean(-1, keepdim=True)) + self.eps)",
        "RMSNorm adds eps after the reciprocal square root instead of inside it",
        "spec/models.md M5, M6", (TWIN, MODEL_CACHE)),
    Mutant(
        "rope-rotate-half-sign", "veridec/models/layers.py",
        "rotated = torch.cat([-tc[..., half:], tc[..., :half]], dim=-1)",
        "rotated = torch.cat([tc[..., half:], -tc[..., :half]], dim=-1)",
        "rotate_half negates the wrong half (rotation by -theta)",
        "spec/models.md M5", (TWIN, MODEL_CACHE)),
    Mutant(
        "rope-angles-in-float64", "veridec/models/layers.py",
        "angles = positions.float()[..., None] * inv_freq  # [B, Q, D/2]",
        "angles = positions.double()[..., None] * inv_freq.double()  # [B, Q, D/2]",
        "rotary angles computed in float64 instead of float32 (the official code's rounding)",
        "spec/models.md M6", (TWIN, MODEL_CACHE)),
    Mutant(
        "gqa-keys-tiled-not-interleaved", "veridec/models/layers.py",
        "k = k.repeat_interleave(groups, dim=1)  # [B, H, Lk, D]",
        "k = k.repeat(1, groups, 1, 1)  # [B, H, Lk, D]",
        "grouped K heads tiled instead of interleaved (query head h reads the wrong key head)",
        "spec/models.md M5", (TWIN, MODEL_CACHE)),
    Mutant(
        "attention-weights-scaled-by-keys", "veridec/models/layers.py",
        "scores = (q @ k.transpose(-2, -1)).to(compute_dtype(q.dtype)) * q.shape[-1] ** -0.5  # [B, H, Q, Lk]",
        "scores = (q @ k.transpose(-2, -1)).to(compute_dtype(q.dtype)) * k.shape[-2] ** -0.5  # [B, H, Q, Lk]",
        "the explicit-softmax path scales scores by 1/sqrt(keys) instead of 1/sqrt(head_dim)",
        "spec/models.md MC6", (MODEL_CACHE, DECODERS)),
    Mutant(
        "cached-rope-ignores-padding", "veridec/models/transformer.py",
        "rope = positions - cache.rope_offset[:, None]  # [B, Q]",
        "rope = positions  # [B, Q]",
        "forward_cached rotates by canvas position, forgetting the row's left-padding offset",
        "spec/models.md MC2; spec/notation.md N2", (MODEL_CACHE, CACHE, DECODERS)),
    Mutant(
        "realign-ignores-padding", "veridec/models/interface.py",
        "return 0 if attention_mask is None else attention_mask.int().argmax(dim=1, keepdim=True)",
        "return 0",
        "Dream realignment treats position 0 as every row's first real token (padded rows shift a pad in)",
        "spec/notation.md N6; spec/models.md M3", (MODEL_CACHE, SAMPLERS)),
    Mutant(
        "query-positions-shift-sign", "veridec/models/interface.py",
        "shifted = token_positions - logit_shift",
        "shifted = token_positions + logit_shift",
        "the query scoring token i runs at i + shift instead of i - shift",
        "spec/models.md M3; spec/notation.md N6", (MODEL_CACHE,)),
    Mutant(
        "llada-gate-and-up-swapped", "veridec/models/layouts.py",
        '    "mlp.gate.weight": ("model.transformer.blocks.{i}.ff_proj.weight", '
        '"model.layers.{i}.mlp.gate_proj.weight"),\n'
        '    "mlp.up.weight": ("model.transformer.blocks.{i}.up_proj.weight", "model.layers.{i}.mlp.up_proj.weight"),',
        '    "mlp.gate.weight": ("model.transformer.blocks.{i}.up_proj.weight", '
        '"model.layers.{i}.mlp.gate_proj.weight"),\n'
        '    "mlp.up.weight": ("model.transformer.blocks.{i}.ff_proj.weight", "model.layers.{i}.mlp.up_proj.weight"),',
        "LLaDA's ff_proj (the gate) and up_proj tensors mapped to each other",
        "spec/models.md ML1", (CHECKPOINT, TWIN)),
    # ------------------------------------------------------------------ veridec/oracles
    Mutant(
        "hmm-backward-transition-direction", "veridec/oracles/hmm.py",
        "beta = (like[:, t + 1] * beta) @ self.transition.T  # [B, S]",
        "beta = (like[:, t + 1] * beta) @ self.transition  # [B, S]",
        "the backward pass multiplies by T instead of T transposed",
        "spec/models.md M9", (ORACLES,)),
    Mutant(
        "hmm-chain-starts-after-first-real", "veridec/oracles/hmm.py",
        "starts = (t <= first_real)[:, None]  # [B, 1]: pad or first real position",
        "starts = (t < first_real)[:, None]  # [B, 1]: pad or first real position",
        "a left-padded row's chain restarts before its first real token instead of at it",
        "spec/models.md M9; spec/notation.md N2", (ORACLES,)),
    Mutant(
        "enumerated-log-prob-little-endian", "veridec/oracles/enumerated.py",
        "index = (x * self.num_symbols ** torch.arange(self.length - 1, -1, -1, device=x.device)).sum(dim=1)  # [B]",
        "index = (x * self.num_symbols ** torch.arange(self.length, device=x.device)).sum(dim=1)  # [B]",
        "log_prob indexes the joint little-endian while outcomes are row-major",
        "spec/models.md M9", (ORACLES, THEOREMS)),
    # ------------------------------------------------------------------ veridec/guidance
    Mutant(
        "entrgi-log-vocab-minus-one", "veridec/guidance/guide.py",
        "return nats / math.log(probs.shape[-1])",
        "return nats / math.log(probs.shape[-1] - 1)",
        "EntRGi normalizes the entropy by log(|V| - 1) instead of log |V|",
        "spec/guidance.md G4", (GUIDANCE,)),
    Mutant(
        "guidance-vector-sign", "veridec/guidance/guide.py",
        "moved = torch.where(torch.isfinite(phi0), phi.detach() - phi0, 0.0)",
        "moved = torch.where(torch.isfinite(phi0), phi0 - phi.detach(), 0.0)",
        "the guidance vector is phi_0 - phi_M (pushes against the reward)",
        "spec/guidance.md G4", (GUIDANCE, FASTGUIDE)),
    Mutant(
        "soft-embedding-untempered", "veridec/guidance/guide.py",
        "probs = F.softmax(phi / params.temperature, dim=-1)  # [B, G, V]",
        "probs = F.softmax(phi, dim=-1)  # [B, G, V]",
        "the expected embedding e_tilde uses softmax(phi) instead of softmax(phi / T)",
        "spec/guidance.md G4", (GUIDANCE,)),
    Mutant(
        "guided-temperature-after-top-p", "veridec/guidance/sampling.py",
        "probs = F.softmax(top_p_logits(phi / temperature, top_p), dim=-1)",
        "probs = F.softmax(top_p_logits(phi, top_p) / temperature, dim=-1)",
        "the guided token is drawn from top-p of the untempered distribution, tempered after",
        "spec/guidance.md G6, GF1", (GUIDANCE, FASTGUIDE)),
    Mutant(
        "fastguide-first-candidate-may-defer", "veridec/guidance/fastguide.py",
        "commit = active & ((gamma >= params.tau) | (j == 0))",
        "commit = active & (gamma >= params.tau)",
        "a_1 is deferred like later candidates (a step can commit nothing; the decode loops)",
        "spec/guidance.md GF1", (FASTGUIDE,)),
    Mutant(
        "fastguide-deferral-strict", "veridec/guidance/fastguide.py",
        "commit = active & ((gamma >= params.tau) | (j == 0))",
        "commit = active & ((gamma > params.tau) | (j == 0))",
        "confidence deferral commits only gamma > tau instead of gamma >= tau",
        "spec/guidance.md GF1", (FASTGUIDE,)),
    Mutant(
        "fastguide-candidates-include-unmasked", "veridec/guidance/fastguide.py",
        "chosen = [[int(s) for s in row[:int(m.sum())]] for row, m in zip(ranked, masked)]",
        "chosen = [[int(s) for s in row] for row, m in zip(ranked, masked)]",
        "with fewer than k masks left, unmasked slots become candidates and are overwritten",
        "spec/guidance.md GF1", (FASTGUIDE,)),
    Mutant(
        "reward-left-pad-mask-off-by-one", "veridec/guidance/reward.py",
        "mask = torch.stack([torch.arange(width, device=r.device) >= width - len(r) for r in rows]).long()",
        "mask = torch.stack([torch.arange(width, device=r.device) > width - len(r) for r in rows]).long()",
        "the reward's left-padding mask hides each row's first real position",
        "spec/guidance.md G3", (GUIDANCE, REWARD_TRAINING)),
    # ------------------------------------------------------------------ veridec/trace, veridec/compare
    Mutant(
        "selection-gap-sign", "veridec/trace.py",
        "gaps.append(weakest - strongest_left)",
        "gaps.append(strongest_left - weakest)",
        "the selection gap is recorded as strongest-left minus weakest-committed",
        "spec/sequential.md SQ0.1", (COMPARE, SAMPLERS)),
    Mutant(
        "query-positions-ignore-batch", "veridec/trace.py",
        "self.query_positions += rows * queries",
        "self.query_positions += queries",
        "query positions count one row per forward, not B rows",
        "spec/notation.md N8", (COUNTERS, CACHE)),
    Mutant(
        "tokens-per-step-ignores-batch", "veridec/trace.py",
        "return self.tokens_committed() / max(1, len(self.steps) * self.batch_size)",
        "return self.tokens_committed() / max(1, len(self.steps))",
        "tokens per step divides by steps only, not steps x rows",
        "spec/sequential.md SQ0.1 (trace); spec/exactness.md E3 tokens_per_step", (COMPARE, SAMPLERS, DECODERS)),
    Mutant(
        "compare-tie-strict", "veridec/compare.py",
        "tie=margin <= numeric_error)",
        "tie=margin < numeric_error)",
        "a divergence whose margin equals the numeric error is not a tie",
        "spec/sequential.md SQ0.5", (COMPARE,)),
    Mutant(
        "compare-one-sided-off-by-one", "veridec/compare.py",
        "step, extra = (steps_a if longer_is_a else steps_b)[min(len(steps_a), len(steps_b))]",
        "step, extra = (steps_a if longer_is_a else steps_b)[min(len(steps_a), len(steps_b)) - 1]",
        "a trace that commits on alone is reported at its last shared step, not its first extra one",
        "spec/sequential.md SQ0.5", (COMPARE,)),
    # ------------------------------------------------------------------ veridec/numerics, canvas, decoding
    Mutant(
        "tolerance-drops-factor-two", "veridec/numerics.py",
        "return SAFETY * 2 * max_abs(low, high) + ulp32(high)",
        "return SAFETY * max_abs(low, high) + ulp32(high)",
        "the measured tolerance counts one computation's error, not the sum of two",
        "spec/exactness.md E1, E3 (logit_tolerance: 2 x (2 x |f32 - f64|) + one ulp)", (MODEL_CACHE, GUIDANCE)),
    Mutant(
        "canvas-context-off-by-one", "veridec/canvas.py",
        "if prompt_len + gen_length > model.max_length:",
        "if prompt_len + gen_length >= model.max_length:",
        "a canvas of exactly max_length positions is refused",
        "spec/models.md M4; spec/sequential.md SQ0.6", (HOSTILE, SAMPLERS, CLI)),
    Mutant(
        "left-pad-pads-on-the-right", "veridec/canvas.py",
        "ids = torch.tensor([[pad_id] * (width - len(r)) + list(r) for r in rows], dtype=torch.long, device=\"cpu\")",
        "ids = torch.tensor([list(r) + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long, device=\"cpu\")",
        "left_pad puts the pad ids on the right while the attention mask stays left-padded",
        "spec/notation.md N2", (REWARD_TRAINING, CLI)),
    Mutant(
        "step-budget-ignores-quota", "veridec/decoding.py",
        'budget = int(candidates.sum(dim=1).max()) + getattr(rule, "steps_per_block", 0)',
        "budget = int(candidates.sum(dim=1).max())",
        "the stall budget forgets a quota schedule's empty steps",
        "spec/parallel.md P11 (step budget)", (DECODERS, FASTDLLM)),
    # ------------------------------------------------------------------ reference
    Mutant(
        "cfg-scale-formula", "reference/llada.py",
        "guided = unconditional + (cfg_scale + 1) * (conditional - unconditional)",
        "guided = unconditional + cfg_scale * (conditional - unconditional)",
        "classifier-free guidance weights the difference by w instead of w + 1",
        "spec/sequential.md SQ1.5", (SAMPLERS,)),
    Mutant(
        "cfg-counts-one-branch", "reference/llada.py",
        "trace.counters.add_forward(rows=2 * x.shape[0], queries=x.shape[1])",
        "trace.counters.add_forward(rows=x.shape[0], queries=x.shape[1])",
        "the CFG forward of 2B stacked rows is counted as B rows",
        "spec/sequential.md SQ1.5; spec/notation.md N8", (COUNTERS, SAMPLERS)),
    Mutant(
        "dream-timesteps-off-by-one", "reference/dream.py",
        "timesteps = torch.linspace(1, eps, steps + 1, device=x.device)",
        "timesteps = torch.linspace(1, eps, steps, device=x.device)",
        "Dream's time grid has steps points instead of steps + 1",
        "spec/sequential.md SQ2.2", (SAMPLERS,)),
    Mutant(
        "reference-block-step-off-by-one", "reference/parallel.py",
        "block_step=step, block_masks_at_start=at_start,",
        "block_step=step + 1, block_masks_at_start=at_start,",
        "the reference tells the rule its block step counting from 1",
        "spec/parallel.md P1.3, P9, P11", (DECODERS, FASTDLLM, CACHE)),
    Mutant(
        "guided-step-aliases-response", "reference/guided.py",
        "after = response.clone()",
        "after = response",
        "sequential guided decoding writes into the canvas view it records as 'before'",
        "spec/guidance.md G6; spec/sequential.md SQ0.1", (GUIDANCE, COUNTERS)),
    Mutant(
        "best-of-n-argmax-over-prompts", "reference/guided.py",
        "best = scores.argmax(dim=0)  # [B]",
        "best = scores.argmax(dim=1)  # [B]",
        "Best-of-N takes the argmax over prompts instead of over the N samples",
        "spec/guidance.md G7", (GUIDANCE, COUNTERS)),
    # ------------------------------------------------------------------ optimized
    Mutant(
        "cached-window-drops-first-query", "optimized/parallel.py",
        "logits = out.logits[:, :end - block.start]  # [B, W, V]: query j scores token j + shift",
        "logits = out.logits[:, shift:end - block.start + shift]  # [B, W, V]: query j scores token j + shift",
        "the cached step drops the first fed query instead of the last (Dream's window shifted by one)",
        "spec/parallel.md P11 (Dream's shifted window); spec/fastdllm.md FD6", (DECODERS, CACHE)),
    Mutant(
        "cached-forward-counted-as-full", "optimized/parallel.py",
        "check=False, **options)  # fed is the block geometry: no host read\n"
        "    run.trace.counters.add_forward(rows=x.shape[0], queries=fed.shape[1], full=False)",
        "check=False, **options)  # fed is the block geometry: no host read\n"
        "    run.trace.counters.add_forward(rows=x.shape[0], queries=fed.shape[1], full=True)",
        "every cached forward is counted as a full forward",
        "spec/parallel.md P11 (counters); spec/notation.md N8", (CACHE, COUNTERS)),
    Mutant(
        "cached-candidate-at-block-end", "optimized/parallel.py",
        "stop = block.end - window_start  # window columns before the block's end: every candidate lies there",
        "stop = block.end + 1 - window_start  # window columns before the block's end: every candidate lies there",
        "the first position after the block is a candidate of the block's steps",
        "spec/parallel.md P11 (candidates)", (DECODERS, CACHE)),
    Mutant(
        "cached-steps-restart-at-zero", "optimized/parallel.py",
        "    step = 1\n",
        "    step = 0\n",
        "the first cached step tells the rule block_step 0 again (the refresh was step 0)",
        "spec/parallel.md P9, P11", (CACHE, DECODERS, FASTDLLM)),
    Mutant(
        "dapd-cached-columns-unshifted", "optimized/parallel.py",
        "return logits, out.attentions, Window(block.start, rows, rows + block.start - shift)",
        "return logits, out.attentions, Window(block.start, rows, rows + block.start)",
        "a cached DAPD step reads attention at the token's own key, not at its query position",
        "spec/parallel.md P8 (dependency), P11", (DECODERS,)),
    Mutant(
        "step-columns-start-at-the-block", "optimized/parallel.py",
        "slice(max(0, block.first - window_start),",
        "slice(max(0, block.start - window_start),",
        "a step's columns start at the block, so masks inside the prompt stop competing in no-cache steps",
        "spec/parallel.md P11 (what a step reads; candidates)", (DECODERS, FASTDLLM)),
    Mutant(
        "fused-check-ignores-candidates", "veridec/decoding.py",
        "if not bool((token_probs.isnan() & candidates).any()):",
        "if not bool(token_probs.isnan().any()):",
        "the fused finiteness check refuses NaN probabilities at positions no step acts on",
        "spec/sequential.md SQ0.6 (non-finite values)", (HOSTILE,)),
    Mutant(
        "trace-records-a-proposed-mask", "veridec/trace.py",
        "if r == row and was[i] == mask_id and now[i] != mask_id]",
        "if r == row and was[i] == mask_id]",
        "a selected position whose proposal is the mask token itself is recorded as a commit",
        "spec/sequential.md SQ0.1 (trace)", (GOLDEN, DECODERS)),
    Mutant(
        "unused-draw-on-the-dual-cache", "optimized/fastdllm.py",
        'return replace(self, unused_draw=cache == "prefix")',
        'return replace(self, unused_draw=cache == "dual")',
        "the official prefix path's unused Gumbel draw is made on the dual cache instead",
        "spec/fastdllm.md FD6", (CACHE, FASTDLLM)),
    Mutant(
        "june2025-forward-at-step-zero", "optimized/fastdllm.py",
        "return self.extra_forward and step == 1",
        "return self.extra_forward and step == 0",
        "the June 2025 loop's extra cached forward is tied to step 0, which the loop never asks about",
        "spec/fastdllm.md FD6 (loop=\"june2025\")", (CACHE, COUNTERS)),
    Mutant(
        "packed-branches-see-each-other", "optimized/packed.py",
        "new_part = (branch_of[:, None] != branch_of[None, :]).expand(batch, -1, -1).clone()  # [B, K*Q, K*Q]",
        "new_part = (branch_of[:, None] == branch_of[None, :]).expand(batch, -1, -1).clone()  # [B, K*Q, K*Q]",
        "the packing mask is inverted: queries see other branches' keys, not their own",
        "spec/speculative.md SPV1", (SPECULATIVE, MODEL_CACHE)),
    Mutant(
        "packed-positions-interleaved", "optimized/packed.py",
        "fed = positions.repeat(1, k)  # [B, K*Q]",
        "fed = positions.repeat_interleave(k, dim=1)  # [B, K*Q]",
        "packed positions repeat position-major while the tokens are packed branch-major",
        "spec/speculative.md SPV1", (SPECULATIVE,)),
    Mutant(
        "speculative-step-aliases-state", "optimized/speculative.py",
        "after = self.x.clone()",
        "after = self.x",
        "R's step writes into the current state (a draft node) instead of a copy",
        "spec/speculative.md SP2, SP3", (SPECULATIVE,)),
    Mutant(
        "sparse-window-at-response-index", "optimized/fastguide.py",
        "positions = window_positions(self.prompt_len + previous, query, self.window, x.shape[1])  # [B, n]",
        "positions = window_positions(previous, query, self.window, x.shape[1])  # [B, n]",
        "the window around the last commit is centred at its response index, not its canvas position",
        "spec/guidance.md GF3", (FASTGUIDE,)),
    Mutant(
        "sparse-query-shift-sign", "optimized/fastguide.py",
        "query = self.prompt_len + slot - self.model.logit_shift  # [B] the query scoring the candidate",
        "query = self.prompt_len + slot + self.model.logit_shift  # [B] the query scoring the candidate",
        "Dream's candidate is read at query a_j + 1 instead of a_j - 1",
        "spec/guidance.md GF3; spec/notation.md N6", (FASTGUIDE,)),
    # ------------------------------------------------------------------ proofs_checks
    Mutant(
        "t1-hypothesis-non-strict", "proofs_checks/theorems.py",
        "hyp = a.total_error + a.max_error < 1",
        "hyp = a.total_error + a.max_error <= 1",
        "T1's hypothesis admits S + e_max = 1",
        "spec/theorems.md T1", (THEOREMS,)),
    Mutant(
        "t2-n-instead-of-n-plus-1", "proofs_checks/theorems.py",
        "& ((a.length + 1) * np.asarray(eps) <= 1)",
        "& (a.length * np.asarray(eps) <= 1)",
        "the Fast-dLLM hypothesis checks n eps <= 1 instead of (n + 1) eps <= 1",
        "spec/theorems.md T2", (THEOREMS,)),
    Mutant(
        "t2c-3n-plus-1", "proofs_checks/theorems.py",
        '{"TV": (3 * a.length - 1) * eps / 2 - a.tv}',
        '{"TV": (3 * a.length + 1) * eps / 2 - a.tv}',
        "the published TV bound is checked as (3n + 1) eps / 2 instead of (3n - 1) eps / 2",
        "spec/theorems.md T2c", (THEOREMS,)),
    Mutant(
        "f-v-log-vocab", "proofs_checks/theorems.py",
        "return hb + eps * math.log(symbols - 1) if symbols > 2 else hb",
        "return hb + eps * math.log(symbols) if symbols > 2 else hb",
        "f_V uses eps ln|V| instead of eps ln(|V| - 1)",
        "spec/theorems.md Setting (f_V), T2d, T5", (THEOREMS,)),
    Mutant(
        "kl-direction-reversed", "proofs_checks/joints.py",
        "kl = _kl(flat, product)",
        "kl = _kl(product, flat)",
        "the analysis computes KL(q || p) instead of KL(p || q)",
        "spec/theorems.md TK1, T2d, T5", (THEOREMS,)),
    Mutant(
        "exact-argmax-ties-to-highest", "proofs_checks/joints.py",
        "out[b, j] = row.index(max(row))",
        "out[b, j] = len(row) - 1 - row[::-1].index(max(row))",
        "x* breaks marginal ties toward the highest symbol in exact batches",
        "spec/theorems.md TK1 (x*: ties to the lowest symbol)", (THEOREMS,)),
    Mutant(
        "bound-strictness-swapped", "proofs_checks/theorems.py",
        "ok &= (slack > 0 if self.strict[name] else slack >= 0).astype(bool)",
        "ok &= (slack >= 0 if self.strict[name] else slack > 0).astype(bool)",
        "exact batches judge strict bounds as non-strict and vice versa",
        "spec/theorems.md TK1", (THEOREMS,)),
    Mutant(
        "cluster-m-counts-the-anchor", "proofs_checks/theorems.py",
        "m = a.length - 1",
        "m = a.length",
        "T3's neighbour count m includes the anchor",
        "spec/theorems.md T3; TK1 (m = n - 1)", (THEOREMS,)),
    Mutant(
        "distance-l2-drops-factor-two", "proofs_checks/theorems.py",
        '"L2": np.sqrt((s - e_max) ** 2 + 2 * s**2) - a.lp_distance(2),',
        '"L2": np.sqrt((s - e_max) ** 2 + s**2) - a.lp_distance(2),',
        "T5's L2 bound loses the factor 2 on S^2",
        "spec/theorems.md T5 (L_p)", (THEOREMS,)),
    Mutant(
        "capacity-published-floor", "proofs_checks/counterexamples.py",
        "return math.ceil(Fraction(kappa) / (1 - Fraction(tau)) - 1) - 1",
        "return math.floor(Fraction(kappa) / (1 - Fraction(tau)) - 1)",
        "the corrected neighbour capacity falls back to the published floor formula",
        "spec/theorems.md T4", (THEOREMS,)),
    Mutant(
        "counterexample-delta-one-over-n", "proofs_checks/counterexamples.py",
        "delta = (Fraction(1, length + 1) + min(eps, Fraction(1, length))) / 2",
        "delta = (Fraction(1, length) + min(eps, Fraction(1, length))) / 2",
        "T2b's counterexample centres delta on 1/n instead of 1/(n + 1)",
        "spec/theorems.md T2b", (THEOREMS,)),
    Mutant(
        "epsilons-above-the-boundary", "proofs_checks/generate.py",
        "top = 1.0 / (length + 1)",
        "top = 1.0 / length",
        "T2's eps is drawn up to 1/n, so the hypotheses rarely hold near the boundary 1/(n + 1)",
        "spec/theorems.md TK1 (eps in (e_max, 1/(n+1)])", (THEOREMS,)),
    Mutant(
        "bounds-table-keeps-loosest-slack", "proofs_checks/table.py",
        "into[key] = row[key] if into[key] is None else min(into[key], row[key])",
        "into[key] = row[key] if into[key] is None else max(into[key], row[key])",
        "merging bounds rows keeps the loosest slack (and margin) instead of the tightest",
        "spec/theorems.md TK3", (THEOREMS, CLI)),
    # ------------------------------------------------------------------ adapters, recording, veridec check
    Mutant(
        "prefix-continuation-rope-from-zero", "veridec/adapters.py",
        "positions = torch.arange(cached, cached + queries, device=x.device).expand(batch, -1)  # [B, Q]",
        "positions = torch.arange(0, queries, device=x.device).expand(batch, -1)  # [B, Q]",
        "Fast-dLLM's prefix continuation places its queries at 0 .. Q-1 instead of after the cached prefix",
        "spec/models.md MA1", (CHECK,)),
    Mutant(
        "cache-adapter-counts-real-tokens-as-offset", "veridec/adapters.py",
        "return mask, (~mask).sum(dim=1)",
        "return mask, mask.sum(dim=1)",
        "the cached calls' RoPE offset counts real tokens instead of left pads",
        "spec/models.md MA1", (CHECK,)),
    Mutant(
        "recorded-commit-at-previous-call", "veridec/recording.py",
        "step_of[committed] = last_masked[committed]",
        "step_of[committed] = index - 1",
        "a recorded commit is placed at the call before the one that shows it, not the last that showed it masked",
        "spec/notation.md N9", (RECORDING, CHECK)),
    Mutant(
        "recorded-commit-takes-final-token", "veridec/recording.py",
        "token_of[committed] = now[committed]",
        "token_of[committed] = final[committed]",
        "a recorded commit takes the final canvas's token, so a later overwrite rewrites the commit",
        "spec/notation.md N9", (RECORDING, CHECK)),
    Mutant(
        "logit-error-against-canvas-after-the-call", "veridec/recording.py",
        "        for index in range(len(self.calls) - 1, -1, -1):\n"
        "            for row, positions in enumerate(steps[index].positions):\n"
        "                held[row, positions] = mask_id\n"
        "            call = self.calls[index]\n",
        "        for index in range(len(self.calls) - 1, -1, -1):\n"
        "            call = self.calls[index]\n",
        "a call's logit error is measured on the canvas after its own commits (the re-masking is skipped)",
        "spec/notation.md N9", (RECORDING, CHECK)),
    Mutant(
        "dream-hook-commits-unrecorded", "reference/dream.py",
        "        order = _with_hook_commits(result.order, result.x, new_x, mask_id)\n",
        "        order = result.order\n",
        "masks Dream's tokens hook fills are left out of the step's recorded commits",
        "spec/sequential.md SQ2.7", (CHECK, SAMPLERS)),
    Mutant(
        "dream-top-p-always-stable", "veridec/rules/dream.py",
        'stable=ties == "lowest"',
        "stable=True",
        "ties='torch' does not reach top-p's sort, which keeps tied logits in id order",
        "spec/sequential.md SQ2.5", (SAMPLERS,)),
    Mutant(
        "tier-a-equal-counts-as-worse", "testing/check.py",
        "worse += [name for name in HIGHER_IS_WORSE if both(name) and result.metrics[name] > baseline[name]]",
        "worse += [name for name in HIGHER_IS_WORSE if both(name) and result.metrics[name] >= baseline[name]]",
        "tier A fails a run whose logit error or costs merely equal the baseline's",
        "spec/exactness.md EC3", (CHECK,)),
    Mutant(
        "nfe-compared-with-full-forwards", "testing/exact.py",
        'if theirs.nfe is not None and theirs.nfe != b["model_calls"]:',
        'if theirs.nfe is not None and theirs.nfe != b["full_forwards"]:',
        "a reported nfe is held against the full forwards instead of the model calls",
        "spec/exactness.md EC1", (CHECK,)),
    Mutant(
        "confidence-rank-off-by-one", 'testing/families/common.py',
        'rank = min(threshold["at_confidence"], confidence.numel() - 1)',
        'rank = min(threshold["at_confidence"] - 1, confidence.numel() - 1)',
        "a threshold drawn at rank r takes the confidence ranked r - 1",
        "spec/exactness.md EC2", (CHECK,)),
    Mutant(
        "hook-calls-not-compared", "testing/exact.py",
        "    if ours.hook_calls != theirs.hook_calls:\n",
        "    if False:\n",
        "the hook call logs of the two sides are never compared",
        "spec/exactness.md EC5", (CHECK,)),
    Mutant(
        "tier-s-bonferroni-dropped", "testing/stochastic.py",
        "return min(1.0, self.smallest_p * max(1, len(self.tests)))",
        "return min(1.0, self.smallest_p)",
        "a case's p-value is its smallest test's, uncorrected for the number of tests",
        "spec/stochastic.md ST2", (STOCHASTIC,)),
    Mutant(
        "tier-s-noncentrality-halved", "testing/stochastic.py",
        "return 4.0 if exact_law else 2.0",
        "return 4.0 if exact_law else 1.0",
        "the power bound takes lambda >= N delta^2 (half of ST3's), so N is twice what is needed",
        "spec/stochastic.md ST3", (STOCHASTIC,)),
    Mutant(
        "tier-s-pooling-strict", "testing/stochastic.py",
        "own = [value for value in ranked if pooled[value] >= MIN_POOLED][: MAX_CELLS - 1]",
        "own = [value for value in ranked if pooled[value] > MIN_POOLED][: MAX_CELLS - 1]",
        "a value seen exactly 5 times is pooled instead of getting its own cell",
        "spec/stochastic.md ST1", (STOCHASTIC,)),
    Mutant(
        "law-proposals-untempered", "proofs_checks/laws.py",
        "probs = torch.softmax(logits.double() / temperature, dim=-1)  # [m, V]",
        "probs = torch.softmax(logits.double(), dim=-1)  # [m, V]",
        "the enumerated proposals ignore the temperature (the decoder samples softmax(l / T))",
        "spec/theorems.md TD1", (LAWS,)),
    Mutant(
        "law-merge-overwrites", "proofs_checks/laws.py",
        "following[tuple(row)] = following.get(tuple(row), 0.0) + weight",
        "following[tuple(row)] = weight",
        "proposal rows reaching the same canvas overwrite each other's probability instead of adding",
        "spec/theorems.md TD1", (LAWS,)),
    Mutant(
        "random-threshold-none-pass-dropped", "proofs_checks/laws.py",
        "(tau ** m / m if size == 1 else 0.0)",
        "0.0",
        "random-order Threshold forgets the top-1 committed when no draw reaches tau",
        "spec/theorems.md TD2", (LAWS,)),
    Mutant(
        "random-order-bound-skips-later-steps", "proofs_checks/laws.py",
        "                bound += p_chosen * weight * sub_bound\n",
        "",
        "TD2's bound counts the first step's TV only",
        "spec/theorems.md TD2", (LAWS,)),
    Mutant(
        "tier-s-cases-not-counted", "testing/check.py",
        'level = o.alpha / (1 if case is not None else max_examples)  # tier S: Bonferroni over the cases run',
        'level = o.alpha  # tier S: Bonferroni over the cases run',
        "tier S's samples are derived for one case's level, not the level Bonferroni over the cases gives",
        "spec/stochastic.md ST2", (STOCHASTIC,)),
    Mutant(
        "tier-s-tests-not-counted", "testing/stochastic.py",
        "tests = 2 * decoded  # the whole output, each position, each adjacent pair",
        "tests = decoded  # the whole output, each position, each adjacent pair",
        "the derived samples count one test per filled position instead of 2 per position",
        "spec/stochastic.md ST3", (STOCHASTIC,)),
    Mutant(
        "exact-law-quota-inverted", "testing/exact_law.py",
        'return TopK(settings["block_length"] // steps_per_block)',
        "return TopK(steps_per_block)",
        "the target's quota per step is taken as the steps per block (the wrong exact law)",
        "spec/stochastic.md ST7", (EXACT_FIT,)),
    Mutant(
        "fit-cells-from-the-sample", "testing/stochastic.py",
        "own = [value for value in ranked if n * law[value] >= MIN_POOLED][: MAX_CELLS - 1]",
        "own = [value for value in ranked if observed[value] >= MIN_POOLED][: MAX_CELLS - 1]",
        "the goodness-of-fit cells are chosen by the observed counts instead of the law's expected counts",
        "spec/stochastic.md ST6", (EXACT_FIT,)),
    Mutant(
        "fit-two-sample-noncentrality", "testing/stochastic.py",
        "return 4.0 if exact_law else 2.0",
        "return 2.0 if exact_law else 2.0",
        "the one-sample power uses the two-sample noncentrality (twice the samples needed)",
        "spec/stochastic.md ST6", (EXACT_FIT,)),
    Mutant(
        "fit-impossible-outcome-pooled", "testing/stochastic.py",
        "if any(law.get(value, 0.0) <= 0 for value in observed):",
        "if any(law.get(value, 0.0) < 0 for value in observed):",
        "an outcome the law forbids is pooled instead of rejecting outright",
        "spec/stochastic.md ST6", (EXACT_FIT,)),
    Mutant(
        "fit-rest-merge-forgets-n", "testing/stochastic.py",
        "while own and 0 < n * rest < MIN_POOLED:",
        "while own and 0 < rest < MIN_POOLED:",
        "the rest cell's expected count is taken as its probability (every cell merged away)",
        "spec/stochastic.md ST6", (EXACT_FIT,)),
    Mutant(
        "law-memory-not-carried", "proofs_checks/laws.py",
        "for output, p in law_from(next_canvas, 0 if done else block_step + 1, after):",
        "for output, p in law_from(next_canvas, 0 if done else block_step + 1, memory):",
        "the enumeration hands the next state the memory from before the step (KLASS never sees a stable step)",
        "spec/theorems.md TD1", (LAWS,)),
    Mutant(
        "units-every-rank-computes-all", "harness/units.py",
        "if group.mine(i) and key not in results]",
        "if key not in results]",
        "every process of a torchrun computes every unit (the work is not shared)",
        "spec/exactness.md E4 (other runs made of units)", (UNITS,)),
    Mutant(
        "units-recorded-ones-recomputed", "harness/units.py",
        "if group.mine(i) and key not in results]",
        "if group.mine(i)]",
        "a resumed run recomputes its finished units",
        "spec/exactness.md E4 (other runs made of units)", (UNITS,)),
    Mutant(
        "units-merge-skipped", "harness/units.py",
        "        records.merge()\n    return [results[key] for key in keys]",
        "    return [results.get(key) for key in keys]",
        "rank 0 builds the report before folding the other ranks' records in",
        "spec/exactness.md E4 (other runs made of units)", (UNITS,)),
    Mutant(
        "pmi-sign", "proofs_checks/observations.py",
        "return float(after - before)",
        "return float(before - after)",
        "GO2's PMI is log p(x_b) - log p(x_b | x_a)",
        "spec/guidance.md GO2", (OBSERVATIONS,)),
]


# The independent truths of each area (spec oracles, official golden traces), run after a mutant's own tests.
AREA_TRUTHS = {
    "veridec/rules": (ORACLE_PARALLEL, ORACLE_SEQUENTIAL, GOLDEN),
    "reference": (GOLDEN, ORACLE_SEQUENTIAL, ORACLE_PARALLEL, ORACLE_GUIDANCE),
    "optimized": (GOLDEN, ORACLE_PARALLEL, ORACLE_GUIDANCE),
    "veridec/models": (GOLDEN,),
    "veridec/guidance": (ORACLE_GUIDANCE,),
    "proofs_checks": (ORACLE_THEOREMS,),
    "veridec/oracles": (ORACLE_THEOREMS,),
    "veridec/trace": (ORACLE_PARALLEL,),
    "veridec/decoding": (ORACLE_PARALLEL, GOLDEN),
    "veridec/canvas": (GOLDEN,),
}
MUTANTS = [replace(m, tests=m.tests + tuple(t for t in AREA_TRUTHS.get(m.area, ()) if t not in m.tests))
           for m in MUTANTS]


def by_name() -> dict[str, Mutant]:
    return {m.name: m for m in MUTANTS}
