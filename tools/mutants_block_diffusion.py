"""A mutation catalogue for block diffusion, SDAR / TraDo's ``block_diffusion_generate`` (spec/block_diffusion.md
BD1-BD10; spec/models.md M10; spec/exactness.md EC6, EC7).

It covers the rule ``veridec.rules.sdar`` (``SDARParams``' validation, the transfer schedule, ``filtered_logits``'
top-k ties and shifted top-p, ``sample_block``'s greedy lowest id, ``select``'s capped quota, sequential first
masks, strict dynamic threshold and its quota, static top-n with ``ties`` lowest or torch, ``_entropy_bounded``,
``official_select``, ``official_overwrites``, ``row_record``'s commits), the plain decoder
``reference/block_diffusion.py`` (the canvas, the first decoded block, the block-causal forward up to the block's
end, the step past the schedule, the stop rule), the cached, batched decoder ``optimized/block_diffusion.py`` (the
layout in whole blocks, ``layout_output``, the prefill, ``decode_block``'s live rows and stops, ``_step``'s per-row
generators and the official loop's writes), the model (``block_causal_bias``, ``cached_block_bias``, ``forward_blocks``'
``first_real``, ``block_cache``; q/k norms in ``Attention.project``; the SDAR layout's config and tensor names),
the ``hf-block`` convention (``HFBlockConvention``: slots per cache handle, the mask's columns), the recording of
block calls (a position shown for the first time is no commit), and the check's side: ``testing.targets``' step
per model call and published target, ``testing.exact._judge_as_published``, ``testing.official.sdar_defect``,
``testing.sdar_cases`` and ``testing.knobs``' SDAR entries. Each mutant is a one- or two-line mistake placed where
it would most likely let a wrong decode or a wrong verdict pass silently (a schedule off by one, a tie broken the
other way, a block that sees what it must not, a defect predicted at the wrong step, a deviating candidate let
through).

Written from the spec and the production code alone: nothing under tests/ and no other catalogue
(tools/mutants.py beyond ``Mutant``, tools/mutants_own_model.py beyond its format) was read.

    python -m tools.mutation --catalogue tools/mutants_block_diffusion.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

BD = "tests/test_block_diffusion.py"
GOLDEN = "tests/test_block_diffusion_golden.py"
CHECK = "tests/test_block_diffusion_check.py"
MODELS = "tests/test_block_models.py"
SELECTION = "tests/test_sdar_rule.py"  # the selections by hand (added after the related-test triage)
RULE = (BD, GOLDEN, CHECK, SELECTION)
DECODE = (BD, GOLDEN)

MUTANTS: list[Mutant] = [
    # --- veridec/rules/sdar.py: settings, schedule, sampling ---------------------------------------------------
    Mutant(
        "bd-params-zero-accepted",
        "veridec/rules/sdar.py",
        "            check_integer(name, getattr(self, name), 1)\n",
        "            check_integer(name, getattr(self, name), 0)\n",
        "gen_length, block_length and denoising_steps of 0 pass validation: 0 steps divides by zero in the "
        "schedule (ZeroDivisionError, as upstream) instead of a ValueError naming the setting",
        "spec/block_diffusion.md BD2", (BD,),
    ),
    Mutant(
        "bd-schedule-remainder-off-by-one",
        "veridec/rules/sdar.py",
        "    return [block_length // steps + (i < block_length % steps) for i in range(steps)]\n",
        "    return [block_length // steps + (i <= block_length % steps) for i in range(steps)]\n",
        "the remainder b mod S goes to one step too many (step 0 gets an extra token even when S divides b): "
        "the quotas sum past b and blocks commit faster than the published schedule",
        "spec/block_diffusion.md BD3", RULE,
    ),
    Mutant(
        "bd-topk-drops-ties",
        "veridec/rules/filters.py",
        "    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1:]  # [.., 1]\n"
        "    return logits.masked_fill(logits < kth, fill)\n",
        "    top = torch.topk(logits, min(top_k, logits.shape[-1]))  # [.., k]\n"
        "    return torch.full_like(logits, fill).scatter(-1, top.indices, top.values)\n",
        "top-k keeps exactly k tokens by index: tokens tied with the k-th largest logit (the check models' twin "
        "tokens) are dropped, changing the filtered law and every draw there",
        "spec/block_diffusion.md BD4", RULE,
    ),
    Mutant(
        "bd-topp-without-shift",
        "veridec/rules/filters.py",
        "    drop[..., 1:] = beyond[..., :-1]  # the mass before the token exceeds top_p\n",
        "    drop[..., 1:] = beyond[..., 1:]  # the mass before the token exceeds top_p\n",
        "top-p drops the token whose cumulative mass crosses top_p instead of keeping it (the mask not shifted "
        "right by one): the nucleus is one token short",
        "spec/block_diffusion.md BD4", RULE,
    ),
    Mutant(
        "bd-greedy-last-max",
        "veridec/rules/sdar.py",
        "    return torch.where(logits == best, ids, logits.shape[-1]).min(dim=-1).values\n",
        "    return torch.where(logits == best, ids, -1).max(dim=-1).values\n",
        "greedy decoding (temperature 0) takes the highest id among equal maxima instead of the lowest (SQ0.4): "
        "on the check models' tied twin tokens every greedy decode differs",
        "spec/block_diffusion.md BD6.1", (BD, CHECK),
    ),
    # --- veridec/rules/sdar.py: selection --------------------------------------------------------------------
    Mutant(
        "bd-sequential-contiguous-range",
        "veridec/rules/sdar.py",
        "        return masked & (masked.cumsum(0) <= n)  # the first n masked positions\n",
        "        return masked & (torch.arange(len(masked), device=masked.device) < int(masked.nonzero()[0]) + n)\n",
        "sequential takes the masks inside the range [first mask, first + n) instead of the first n masks: "
        "after a drawn mask token left a hole, fewer than n positions commit",
        "spec/block_diffusion.md BD6.3", (BD, SELECTION),
    ),
    Mutant(
        "bd-dynamic-threshold-ge",
        "veridec/rules/sdar.py",
        "        high = confidence > params.confidence_threshold  # strict, as published\n",
        "        high = confidence >= params.confidence_threshold\n",
        "the dynamic threshold is no longer strict: a confidence exactly at confidence_threshold (1 under "
        "top_k=1) counts as high, committing more than the published code does",
        "spec/block_diffusion.md BD5.2", RULE,
    ),
    Mutant(
        "bd-dynamic-below-quota-accepted",
        "veridec/rules/sdar.py",
        "        high = confidence > params.confidence_threshold  # strict, as published\n"
        "        if int(high.sum()) >= n:\n",
        "        high = confidence > params.confidence_threshold  # strict, as published\n"
        "        if high.any():\n",
        "low_confidence_dynamic commits the positions above the threshold even when fewer than the quota "
        "(Fast-dLLM's rule), instead of falling back to the static top n",
        "spec/block_diffusion.md BD5.2", RULE,
    ),
    Mutant(
        "bd-lowest-ties-by-topk",
        "veridec/rules/common.py",
        "    return torch.sort(scores, descending=largest, stable=True).indices[:k]\n",
        "    return torch.topk(scores, k, largest=largest).indices\n",
        "ties='lowest' ranks with torch.topk, whose CPU order on equal confidences is not the lowest position: "
        "under top_k=1 (every confidence 1) the default check picks torch's positions",
        "spec/block_diffusion.md BD6.5", (BD, CHECK),
    ),
    Mutant(
        "bd-torch-ties-by-stable-sort",
        "veridec/rules/common.py",
        "        return torch.topk(scores, k, largest=largest).indices\n",
        "        return torch.sort(scores, descending=largest, stable=True).indices[:k]\n",
        "ties='torch' ranks equal confidences lowest position first instead of calling torch.topk: --ties torch "
        "no longer matches a candidate that ranks as the published code",
        "spec/block_diffusion.md BD6.5", RULE,
    ),
    Mutant(
        "bd-entropy-bounded-no-minimum",
        "veridec/rules/sdar.py",
        "    k = max(1, int((scores[order].cumsum(0) < bound).sum()))\n",
        "    k = int((scores[order].cumsum(0) < bound).sum())\n",
        "entropy_bounded may commit nothing when the lowest entropy alone reaches eb_threshold (k not at least "
        "1): the block idles until the step past its schedule commits every mask",
        "spec/block_diffusion.md BD6.4", (BD,),
    ),
    # --- veridec/rules/sdar.py: the published behaviour and its defects ----------------------------------------
    Mutant(
        "bd-official-quota-capped",
        "veridec/rules/sdar.py",
        "    n = params.schedule[step]\n",
        "    n = min(params.schedule[step], int(masked.sum()))\n",
        "official_select caps the quota at the masks left: the published overwrites of prompt and committed "
        "tokens (BD7.3) are no longer reproduced",
        "spec/block_diffusion.md BD10", (GOLDEN, CHECK, SELECTION),
    ),
    Mutant(
        "bd-official-sequential-masked-only",
        "veridec/rules/sdar.py",
        "        chosen[first:first + n] = True\n",
        "        chosen[first:first + n] = masked[first:first + n]\n",
        "published sequential selects only the masks of [f, f + n): its overwrite of committed positions "
        "after a drawn mask token is not reproduced",
        "spec/block_diffusion.md BD10", (GOLDEN, CHECK, SELECTION),
    ),
    Mutant(
        "bd-official-confidence-unmasked",
        "veridec/rules/sdar.py",
        "        return chosen\n"
        "    confidence = torch.where(masked, x0_p, torch.full_like(x0_p, -math.inf))  # [b]\n",
        "        return chosen\n"
        "    confidence = x0_p  # [b]\n",
        "the published selection ranks every position by its draw's probability, not -inf off the masks: "
        "committed tokens compete with masks at every step and are overwritten",
        "spec/block_diffusion.md BD10", (GOLDEN, CHECK, SELECTION),
    ),
    Mutant(
        "bd-overwrites-at-equal-quota",
        "veridec/rules/sdar.py",
        "    return params.remasking_strategy != \"entropy_bounded\" and quota > count\n",
        "    return params.remasking_strategy != \"entropy_bounded\" and quota >= count\n",
        "official_overwrites predicts an overwrite when the quota equals the masks left (no unmasked position "
        "is picked then): cases the published code completes exactly are judged as deviations",
        "spec/block_diffusion.md BD7.3", (GOLDEN, CHECK),
    ),
    Mutant(
        "bd-row-record-counts-drawn-masks",
        "veridec/rules/sdar.py",
        "    committed = transfer & masked & (x0 != mask_id)  # [b]\n",
        "    committed = transfer & masked  # [b]\n",
        "a selected position that drew the mask token is recorded as a commit although it stays masked: the "
        "trace holds a commit of the mask token and its later real commit",
        "spec/block_diffusion.md BD6.2", RULE,
    ),
    # --- reference/block_diffusion.py ----------------------------------------------------------------------
    Mutant(
        "bd-ref-canvas-floor",
        "veridec/canvas.py",
        "    return -(-length // block_size) * block_size\n",
        "    return length // block_size * block_size\n",
        "the canvas is rounded down to whole blocks instead of up: the last partial block of the generation is "
        "never decoded and the canvas is shorter than T",
        "spec/block_diffusion.md BD2", DECODE,
    ),
    Mutant(
        "bd-ref-partial-block-skipped",
        "reference/block_diffusion.py",
        "    for block in range(prompt.shape[1] // block_length, length // block_length):\n"
        "        _decode_block(model, x, block, params, mask_id, trace, generator, record_logits)\n",
        "    for block in range(-(-prompt.shape[1] // block_length), length // block_length):\n"
        "        _decode_block(model, x, block, params, mask_id, trace, generator, record_logits)\n",
        "decoding starts after the block that holds the prompt's last P mod b tokens: its masks are never "
        "decoded and stay masks in the returned canvas",
        "spec/block_diffusion.md BD2", DECODE,
    ),
    Mutant(
        "bd-ref-forward-not-block-causal",
        "reference/block_diffusion.py",
        "        logits = model(x[:, :end], block_size=b).logits[:, start:]  # [1, b, V]\n",
        "        logits = model(x[:, :end]).logits[:, start:]  # [1, b, V]\n",
        "the reference's forward up to the block's end drops block_size: earlier blocks see the current "
        "block's masks (bidirectional), so its logits differ from the block-causal model",
        "spec/block_diffusion.md BD1", DECODE,
    ),
    Mutant(
        "bd-ref-past-schedule-mask-not-banned",
        "reference/block_diffusion.py",
        "                                       banned=mask_id if past else None)\n",
        "                                       banned=None)\n",
        "the step past the schedule does not ban the mask token: a drawn mask leaves its position masked again "
        "and the block takes more than S + 1 steps",
        "spec/block_diffusion.md BD6.2", DECODE,
    ),
    Mutant(
        "bd-ref-stop-in-prompt",
        "reference/block_diffusion.py",
        "        _decode_block(model, x, block, params, mask_id, trace, generator, record_logits)\n"
        "        if _stopped(x[0, prompt.shape[1]:], params.stopping_criteria_idx):\n",
        "        _decode_block(model, x, block, params, mask_id, trace, generator, record_logits)\n"
        "        if _stopped(x[0], params.stopping_criteria_idx):\n",
        "the stop rule looks at the whole canvas, prompt included: a prompt holding a stop id ends the decode "
        "after its first block",
        "spec/block_diffusion.md BD5.5", DECODE,
    ),
    # --- optimized/block_diffusion.py -----------------------------------------------------------------------
    Mutant(
        "bd-opt-shift-by-tokens",
        "optimized/block_diffusion.py",
        "    shift = [(first - f) * b for f in full]\n",
        "    shift = [max(len(q) for q in prompts) - len(p) for p in prompts]\n",
        "rows are left-padded by tokens instead of whole blocks: a shorter row's blocks no longer start at its "
        "own canvas' block boundaries, so it decodes other blocks than alone",
        "spec/block_diffusion.md BD8.2", (BD,),
    ),
    Mutant(
        "bd-opt-output-drops-padding",
        "optimized/block_diffusion.py",
        "        out[row, pad:pad + end - shift] = x[row, shift:end]\n",
        "        out[row, :end - shift] = x[row, shift:end]\n",
        "the output puts each row's canvas at position 0, over its left padding: padded rows are shifted "
        "against the trace's positions and the caller's layout",
        "spec/block_diffusion.md BD8.2", (BD,),
    ),
    Mutant(
        "bd-opt-prefill-not-stored",
        "optimized/block_diffusion.py",
        "            self.forward(0, width, store=True)\n",
        "            self.forward(0, width, store=False)\n",
        "the prefill of the prompt's whole blocks does not write the cache: later blocks attend to empty "
        "entries instead of the prompt (the call count is still right)",
        "spec/block_diffusion.md BD8.1", RULE,
    ),
    Mutant(
        "bd-opt-last-block-not-live",
        "optimized/block_diffusion.py",
        "        return torch.tensor([not stop and end <= last for stop, last in zip(self.stopped, "
        "self.layout.ends)],\n",
        "        return torch.tensor([not stop and end < last for stop, last in zip(self.stopped, "
        "self.layout.ends)],\n",
        "a row's last block counts as past its canvas: it is never decoded and stays masked",
        "spec/block_diffusion.md BD8.2", RULE,
    ),
    Mutant(
        "bd-opt-stopped-rows-decoded",
        "optimized/block_diffusion.py",
        "        while (masked := (self.x[:, start:end] == self.mask_id) & live[:, None]).any():\n",
        "        while (masked := self.x[:, start:end] == self.mask_id).any():\n",
        "rows that stopped or are past their canvas keep decoding while another row is live: their canvas "
        "after a stop token differs from their single decode (one row is unaffected)",
        "spec/block_diffusion.md BD8.2", (BD,),
    ),
    Mutant(
        "bd-opt-row0-generator",
        "optimized/block_diffusion.py",
        "self.generators[row], self.loop.banned(step, self.params, self.mask_id))\n",
        "self.generators[0], self.loop.banned(step, self.params, self.mask_id))\n",
        "every row draws from row 0's generator: with a generator per row the batch no longer equals the rows' "
        "single decodes",
        "spec/block_diffusion.md BD8.2", (BD,),
    ),
    Mutant(
        "bd-opt-official-overwrites-guarded",
        "optimized/block_diffusion.py",
        "        return transfer\n",
        "        return transfer & masked\n",
        "the official loop writes only masked positions: the published overwrites of prompt and committed tokens "
        "are not in the canvas, so the published run equals the intended one",
        "spec/block_diffusion.md BD10", (GOLDEN, CHECK, SELECTION),
    ),
    Mutant(
        "bd-opt-first-real-dropped",
        "optimized/block_diffusion.py",
        "                                        store=store, first_real=self.first_real)\n",
        "                                        store=store)\n",
        "the batched decoder does not pass first_real: real queries attend to the whole blocks of padding "
        "before a shorter row (one row without padding is unaffected)",
        "spec/block_diffusion.md BD8.2", (BD,),
    ),
    # --- veridec/models/transformer.py: block-causal attention and the block cache ----------------------------
    Mutant(
        "bd-block-causal-ge",
        "veridec/models/transformer.py",
        "    return torch.zeros(length, length, device=device).masked_fill(blocks[None] > blocks[:, None], "
        "float(\"-inf\"))\n",
        "    return torch.zeros(length, length, device=device).masked_fill(blocks[None] >= blocks[:, None], "
        "float(\"-inf\"))\n",
        "block_causal_bias hides a query's own block (>= for >): no bidirectional attention inside a block and "
        "a first block with no key at all",
        "spec/models.md M10", (MODELS, BD),
    ),
    Mutant(
        "bd-cached-bias-sees-unwritten",
        "veridec/models/transformer.py",
        "    unwritten = torch.full((width, cache_length - start), float(\"-inf\"), device=device)\n",
        "    unwritten = torch.zeros(width, cache_length - start, device=device)\n",
        "a denoising forward (store=False) sees the cache's slots from its own block on, never written (zeros): "
        "its logits mix in empty keys",
        "spec/models.md M10", (MODELS, BD),
    ),
    Mutant(
        "bd-cached-bias-blocks-bidirectional",
        "veridec/models/transformer.py",
        "    own = block_causal_bias(width, block_size, device)  # [Q, Q]\n",
        "    own = torch.zeros(width, width, device=device)  # [Q, Q]\n",
        "forward_blocks' blocks attend to each other both ways: a prefill of several prompt blocks lets an "
        "earlier block see later ones, and their stored keys differ",
        "spec/models.md M10", (MODELS, BD, CHECK),
    ),
    Mutant(
        "bd-first-real-key-strict",
        "veridec/models/transformer.py",
        "            real_key = keys[None] >= first_real[:, None]  # [B, Lk]\n",
        "            real_key = keys[None] > first_real[:, None]  # [B, Lk]\n",
        "first_real's separation counts the first real position as padding: real queries never see the row's "
        "first token",
        "spec/models.md M10", (MODELS, BD),
    ),
    Mutant(
        "bd-block-cache-rope-offset-dropped",
        "veridec/models/transformer.py",
        "            cache.rope_offset.copy_(first_real)\n",
        "            pass\n",
        "block_cache leaves the RoPE offset 0: a row shifted by blocks of padding counts its positions from the "
        "batch canvas, not its own",
        "spec/models.md M10", (MODELS,),
    ),
    # --- veridec/models/layers.py and layouts.py: the SDAR layout ----------------------------------------------
    Mutant(
        "bd-qknorm-after-rope",
        "veridec/models/layers.py",
        "        if hasattr(self, \"q_norm\"):\n"
        "            q, k = self.q_norm(q), self.k_norm(k)\n"
        "        q, k = q.transpose(1, 2), k.transpose(1, 2)\n"
        "        v = self.v(h).view(b, n, self.n_kv_heads, self.head_dim).transpose(1, 2)\n"
        "        return apply_rope(q, cos_q, sin_q), apply_rope(k, cos, sin), v\n",
        "        q, k = apply_rope(q.transpose(1, 2), cos_q, sin_q), apply_rope(k.transpose(1, 2), cos, sin)\n"
        "        if hasattr(self, \"q_norm\"):\n"
        "            q, k = self.q_norm(q), self.k_norm(k)\n"
        "        v = self.v(h).view(b, n, self.n_kv_heads, self.head_dim).transpose(1, 2)\n"
        "        return q, k, v\n",
        "the per-head q/k RMSNorm is applied after RoPE instead of before: equal only for unit norm weights "
        "(a rotation keeps the RMS), wrong for trained ones",
        "spec/models.md M10", (MODELS,),
    ),
    Mutant(
        "bd-sdar-head-dim-from-hidden",
        "veridec/models/layouts.py",
        "        explicit_head_dim=_integer(c, \"head_dim\", 128), qk_norm=True)\n",
        "        explicit_head_dim=None, qk_norm=True)\n",
        "SDAR's head_dim is derived from hidden_size / num_attention_heads instead of read from the config: "
        "checkpoints whose head_dim differs do not load or load wrongly shaped",
        "spec/models.md M10", (MODELS,),
    ),
    Mutant(
        "bd-sdar-tied-embeddings-key",
        "veridec/models/layouts.py",
        "        tie_embeddings=_flag(c, \"tie_word_embeddings\"), max_length=_integer(c, \"max_position_embeddings\", "
        "32768),\n",
        "        tie_embeddings=_flag(c, \"weight_tying\"), max_length=_integer(c, \"max_position_embeddings\", "
        "32768),\n",
        "the SDAR config reads LLaDA's weight_tying key instead of tie_word_embeddings: a tied SDAR checkpoint "
        "is taken as untied and asks for an lm_head.weight it does not hold",
        "spec/models.md M10", (MODELS,),
    ),
    Mutant(
        "bd-sdar-qknorm-filter-inverted",
        "veridec/models/layouts.py",
        "                if suffix.endswith(\".bias\") and not cfg.qkv_bias or suffix in QK_NORMS and not "
        "cfg.qk_norm:\n",
        "                if suffix.endswith(\".bias\") and not cfg.qkv_bias or suffix in QK_NORMS and "
        "cfg.qk_norm:\n",
        "the QK_NORMS filter is inverted: an SDAR model's q_norm/k_norm tensors are left out of its official "
        "names, so they are neither saved nor loaded (the norms stay at ones)",
        "spec/models.md M10", (MODELS,),
    ),
    Mutant(
        "bd-sdar-qnorm-official-name",
        "veridec/models/layouts.py",
        "    \"attn.q_norm.weight\": (None, None, \"model.layers.{i}.self_attn.q_norm.weight\"),\n",
        "    \"attn.q_norm.weight\": (None, None, \"model.layers.{i}.self_attn.q_layernorm.weight\"),\n",
        "the q norm's official tensor name is wrong: an official SDAR checkpoint lacks the expected key and a "
        "saved folder does not load in the official modelling",
        "spec/models.md M10", (MODELS,),
    ),
    # --- veridec/adapters.py: the hf-block convention -----------------------------------------------------------
    Mutant(
        "bd-hfblock-slots-not-accumulated",
        "veridec/adapters.py",
        "            self._stores[id(past_key_values)] = (past_key_values, cache, stored + queries)\n",
        "            self._stores[id(past_key_values)] = (past_key_values, cache, queries)\n",
        "the adapter remembers only the last store's length, not the running total: each store_kv call appends "
        "at the wrong slot and overwrites earlier blocks' keys",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    Mutant(
        "bd-hfblock-mask-ignored",
        "veridec/adapters.py",
        "        sees = _block_visibility(attention_mask, batch, queries, stored + queries, x.device)  # [B|1, Q, K]\n",
        "        sees = _block_visibility(None, batch, queries, stored + queries, x.device)  # [B|1, Q, K]\n",
        "the hf-block adapter ignores the candidate's attention mask (every key visible): a candidate whose "
        "prefill lets a block see the next one is not caught",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    Mutant(
        "bd-hfblock-own-columns-misplaced",
        "veridec/adapters.py",
        "            visible = torch.cat([sees[..., :stored], hidden, sees[..., stored:]], dim=2)  # [B|1, Q, L + Q]\n",
        "            visible = torch.cat([sees, hidden], dim=2)  # [B|1, Q, L + Q]\n",
        "a call with store_kv=False puts the mask's columns for its own keys on the cache's unused slots: the "
        "block attends to empty slots and not to itself",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    # --- veridec/recording.py ---------------------------------------------------------------------------------
    Mutant(
        "bd-recording-first-shown-as-commit",
        "veridec/recording.py",
        "                seen, token_of = torch.where(fresh, now, seen), torch.where(fresh, now, token_of)\n",
        "                token_of = torch.where(fresh, now, token_of)\n",
        "a position a block call shows for the first time counts as a commit (from the mask) at the last call: "
        "the prompt's tail in the first decoded block becomes commits in the prefill's step",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    # --- testing/: the target, the verdict, the defects, the cases, the knobs -----------------------------------
    Mutant(
        "bd-target-prefill-step-strict",
        'testing/families/sdar.py',
        "    calls = [empty()] if trace.counters.model_calls and real >= settings.get(\"block_length\", 8) else []\n",
        "    calls = [empty()] if trace.counters.model_calls and real > settings.get(\"block_length\", 8) else []\n",
        "the target's empty prefill step is missing when the prompt is exactly one block: step k is no longer "
        "call k and a correct candidate's commit order mismatches",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    Mutant(
        "bd-target-store-step-before-block",
        'testing/families/sdar.py',
        "        calls.append(step)\n"
        "        if k + 1 == len(steps) or steps[k + 1].block != step.block:\n"
        "            calls.append(empty())\n",
        "        if k == 0 or steps[k - 1].block != step.block:\n"
        "            calls.append(empty())\n"
        "        calls.append(step)\n",
        "the target's empty store step is placed before each block's first denoising step instead of after its "
        "last: every commit is one call early against the candidate's calls",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    Mutant(
        "bd-official-target-intended",
        'testing/families/sdar.py',
        'ties=ties, loop="official", **settings)',
        "ties=ties, **settings)",
        "the target's published behaviour runs veridec's intended decode: a candidate that overwrites as the "
        "published code fails, and one that deviates otherwise may pass",
        "spec/block_diffusion.md BD10", (CHECK,),
    ),
    Mutant(
        "bd-judge-published-canvas-only",
        "testing/exact.py",
        "    same = torch.equal(official.canvas.cpu(), theirs.canvas.cpu()) and counters == {\n"
        "        name: getattr(theirs.counters, name) for name in COST_FIELDS}\n",
        "    same = torch.equal(official.canvas.cpu(), theirs.canvas.cpu())\n",
        "where the published code deviates, a candidate with the official canvas but other model calls "
        "(an extra forward, no store) is said to reproduce the defect",
        "spec/exactness.md EC6", (CHECK,),
    ),
    Mutant(
        "bd-sdar-defect-in-block-not-reset",
        'testing/families/sdar.py',
        "        in_block = in_block + 1 if step.block == last else 0\n",
        "        in_block = in_block + 1 if last is not None else 0\n",
        "sdar_defect counts denoising steps across blocks, not per block: the second block's steps read the "
        "schedule past its end and a past-schedule IndexError is predicted where none happens",
        "spec/block_diffusion.md BD7", (GOLDEN, CHECK),
    ),
    Mutant(
        "bd-cases-large-blocks-only",
        'testing/families/sdar.py',
        '    settings = {"gen_length": draw(st.integers(1, 8)), "block_length": '
        'draw(st.sampled_from(BLOCK_LENGTHS)),\n',
        '    settings = {"gen_length": draw(st.integers(1, 8)), "block_length": draw(st.sampled_from((4, 8))),\n',
        "cases draw blocks of 4 or 8 only: no prompt of 1-6 tokens has two whole blocks, so a candidate whose "
        "prefill lets a block see the next one is never exercised",
        "spec/block_diffusion.md BD9", (CHECK,),
    ),
    Mutant(
        "bd-knobs-confidence-threshold-missing",
        'testing/families/sdar.py',
        '                     "confidence_threshold": choices("confidence_threshold", CONFIDENCE_THRESHOLDS),\n',
        '',
        "confidence_threshold has no alternatives among SDAR's knobs: a candidate that ignores the threshold "
        "is never reported as a knob without effect",
        "spec/exactness.md EC7", (CHECK,),
    ),
]
