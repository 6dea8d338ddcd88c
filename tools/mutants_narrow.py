# ruff: noqa: E501  (a mutant's original and mutated texts are verbatim source lines)
"""A mutation catalogue for narrowed logits (spec/models.md M5.1, spec/parallel.md P11 "Narrowed logits"): the
transformer's ``logit_rows`` (``scoring_rows``: the queries a - shift .. b - 1 extended to each row's
first real position; ``realign_shifted``'s token window: their realignment; ``raw_forward``'s last layer only; ``Block.forward``'s query
rows and ``bias_rows``; ``forward_cached``'s pass-through; the ``logit_rows`` slice validation and the ``output_attentions``
exclusion; the ``narrow_logits`` declaration), ``Attention.project``'s query rows (RoPE selected with them), the optimized
parallel decoder (``can_narrow_logits``, the ``narrow_logits`` flag, ``refresh``'s token window and its ``Window``,
``cached_forward``'s logit rows), the compiled wrapper's and Fast-dLLM's pass-through, the check targets that keep
the whole window, and the host-share tool's variants.

Written from the spec and the production code alone: nothing under tests/ and no other catalogue was read.

    python -m tools.mutation --catalogue tools/mutants_narrow.py --list
"""

from __future__ import annotations

from tools.mutants import Mutant

NARROW = "tests/test_narrow_logits.py"
MODEL_CACHE = "tests/test_model_cache.py"
DECODERS = "tests/test_parallel_decoders.py"
FASTDLLM = "tests/test_fastdllm.py"
FASTDLLM_CACHE = "tests/test_fastdllm_cache.py"
COMPILED = "tests/test_compiled.py"
HOSTILE = "tests/test_hostile_inputs.py"
CHECK = "tests/test_check.py"
HOST_SHARE = "tests/test_host_share.py"

TRANSFORMER = "veridec/models/transformer.py"
INTERFACE = "veridec/models/interface.py"
LAYERS = "veridec/models/layers.py"
PARALLEL = "optimized/parallel.py"
COMPILED_CODE = "optimized/compiled.py"
FASTDLLM_CODE = "optimized/fastdllm.py"
TARGETS = "testing/targets.py"
HOST_SHARE_TOOL = "tools/host_share.py"

M5_1 = "spec/models.md M5.1"
P11 = "spec/parallel.md P11"

MUTANTS: list[Mutant] = [
    # --- veridec/models/transformer.py: scoring_rows ---
    Mutant(
        "narrow-rows-start-ignores-shift",
        TRANSFORMER,
        "        return torch.arange(max(0, logit_rows.start - self.logit_shift), stop, device=mask.device)  # [R]\n",
        "        return torch.arange(logit_rows.start, stop, device=mask.device)  # [R]\n",
        "the scoring rows start at a, not a - shift: Dream's query scoring token a (at a - 1) is not run, every narrowed Dream logit comes from the wrong query (or past the rows)",
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-first-real-extension-dropped",
        TRANSFORMER,
        "        if self.logit_shift:  # a row's first real token may lie at or after b (a window inside its padding)\n"
        "            stop = max(stop, int(first_real_position(mask).max()) + 1)\n",
        "",
        "the rows are not extended to each row's first real position: a Dream window inside a row's "
        'padding (its first real token at or after b) gathers a query that was never run',
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-scored-empty-accepted",
        TRANSFORMER,
        " and 0 <= logit_rows.start < logit_rows.stop <= length):\n",
        " and 0 <= logit_rows.start <= logit_rows.stop <= length):\n",
        "the validation accepts an empty slice (start == stop) instead of raising ValueError naming logit_rows",
        M5_1,
        (NARROW, HOSTILE),
    ),
    # --- veridec/models/interface.py: realign_shifted's token window ---
    Mutant(
        "narrow-aligned-offset-unshifted",
        INTERFACE,
        "    source = source - max(0, tokens.start - 1)  # raw_logits' rows start at the query scoring token a\n",
        "    source = source - tokens.start  # raw_logits' rows start at the query scoring token a\n",
        'the realignment reads the narrowed rows as starting at token a, not at its scoring query a '
        "- 1: every Dream token takes its successor's logits",
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-aligned-offset-unclamped",
        INTERFACE,
        "    source = source - max(0, tokens.start - 1)  # raw_logits' rows start at the query scoring token a\n",
        "    source = source - (tokens.start - 1)  # raw_logits' rows start at the query scoring token a\n",
        "a window starting at token 0 is read one row late: its rows start at query 0 (no query -1), not at a - 1",
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-aligned-scored-ignored",
        INTERFACE,
        "    tokens = slice(0, raw_logits.shape[1]) if logit_rows is None else logit_rows\n",
        "    tokens = slice(0, raw_logits.shape[1])\n",
        "the realignment ignores the token window and realigns the narrowed rows as if they were the canvas from position 0",
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    # --- veridec/models/transformer.py: forward_cached, raw_forward, Block ---
    Mutant(
        "narrow-forward-cached-rows-dropped",
        TRANSFORMER,
        "                                padded=cache.padded, logit_rows=logit_rows)\n",
        "                                padded=cache.padded)\n",
        "forward_cached drops logit_rows: it returns every query's logits [B, Q, V] instead of the "
        'rows asked [B, R, V]',
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-rows-with-attentions-accepted",
        TRANSFORMER,
        "        if logit_rows is not None and output_attentions:\n"
        '            raise ValueError("logit_rows and output_attentions exclude each other: the last '
        'layer would return the "\n'
        "                             \"weights of its logit rows only\")\n",
        "",
        "logit_rows with output_attentions is not refused: the last layer's weights silently cover the logit rows only",
        M5_1,
        (NARROW, HOSTILE),
    ),
    Mutant(
        "narrow-rows-every-layer",
        TRANSFORMER,
        "                               logit_rows if i == last else None)\n",
        "                               logit_rows)\n",
        'every layer keeps only the logit rows, not the last one alone: later layers lose the other '
        "positions' keys and values",
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-block-bias-unselected",
        TRANSFORMER,
        "            h, bias = h.index_select(1, rows), bias_rows(bias, rows)  # [B, R, hidden], [.., R|1, Lk]\n",
        "            h = h.index_select(1, rows)  # [B, R, hidden]\n",
        'the selected queries keep the whole per-query bias [.., Q, Lk] (block-causal, a cached '
        'attn_bias): it no longer matches their R rows',
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    Mutant(
        "narrow-not-narrowable",
        TRANSFORMER,
        "    narrow_logits = True  # every forward takes ``logit_rows`` (M5.1): a token slice, or raw_forward's query rows\n",
        "    narrow_logits = False  # every forward takes ``logit_rows`` (M5.1): a token slice, or raw_forward's query rows\n",
        "the transformer does not say it takes logit_rows: the optimized decoder never narrows (P11's default lost)",
        M5_1,
        (NARROW, DECODERS),
    ),
    # --- veridec/models/layers.py: Attention.project ---
    Mutant(
        "narrow-rope-first-rows",
        LAYERS,
        "cos.index_select(2, rows), sin.index_select(2, rows)",
        "cos[:, :, :len(rows)], sin[:, :, :len(rows)]",
        "the selected queries are rotated with the first R positions' angles, not their own rows' "
        '(right only when the rows start at 0)',
        M5_1,
        (NARROW, MODEL_CACHE),
    ),
    # --- optimized/parallel.py: can_narrow_logits and decode's flag ---
    Mutant(
        "narrow-on-for-whole-window",
        PARALLEL,
        "    return takes_narrow_logits(run.model) and not (run.reads_whole_window or run.needs_attention)\n",
        "    return takes_narrow_logits(run.model) and not run.needs_attention\n",
        "the forwards narrow when the step reads the whole window too (KLASS's history, temperature > 0, random remasking): the draws lose the reference's shapes",
        P11,
        (NARROW, DECODERS, FASTDLLM, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-on-for-attention",
        PARALLEL,
        "    return takes_narrow_logits(run.model) and not (run.reads_whole_window or run.needs_attention)\n",
        "    return takes_narrow_logits(run.model) and not run.reads_whole_window\n",
        "the forwards narrow when the rule reads attention weights (DAPD): logit_rows meet output_attentions",
        P11,
        (NARROW, DECODERS),
    ),
    Mutant(
        "narrow-flag-ignored",
        PARALLEL,
        "    run.narrow_logits = narrow_logits and can_narrow_logits(run)\n",
        "    run.narrow_logits = can_narrow_logits(run)\n",
        "narrow_logits=False is ignored: the forwards narrow whenever the rule allows it",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-decode-default-off",
        PARALLEL,
        '           hook: LoopHook | None = None, compile: bool | dict = False, narrow_logits: bool '
        '= True) -> Decoded:\n',
        '           hook: LoopHook | None = None, compile: bool | dict = False, narrow_logits: bool '
        '= False) -> Decoded:\n',
        "decode's narrow_logits defaults to False: the optimized decoder computes the whole window "
        "unless asked (P11's default is True)",
        P11,
        (NARROW, DECODERS),
    ),
    # --- optimized/parallel.py: refresh and cached_forward ---
    Mutant(
        "narrow-refresh-window-at-zero",
        PARALLEL,
        "    return out.logits, out.attentions, Window(window.start, query, query), kv\n",
        "    return out.logits, out.attentions, Window(0, query, query), kv\n",
        "the refresh's Window starts at 0, not at the token window's start: the step reads its columns as if they began at the canvas's first position",
        P11,
        (NARROW, DECODERS, FASTDLLM, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-refresh-from-block-start",
        PARALLEL,
        "    window = slice(block.first, block.end) if run.narrow_logits else slice(0, x.shape[1])\n",
        "    window = slice(block.start, block.end) if run.narrow_logits else slice(0, x.shape[1])\n",
        "the refresh scores the block from its start, not from block.first: prompt masks left of the block (SQ1.3) get no logits and never compete",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-prefill-unscored",
        PARALLEL,
        "        out, kv = run.model.prefill(x, run.attention_mask, **options)\n",
        "        out, kv = run.model.prefill(x, run.attention_mask, output_attentions=run.needs_attention)\n",
        "the cached refresh (prefill) is not asked for logit_rows: it returns the whole canvas's logits while its Window says they start at block.first",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-refresh-counter-narrowed",
        PARALLEL,
        "    run.trace.counters.add_forward(rows=x.shape[0], queries=x.shape[1])\n",
        "    run.trace.counters.add_forward(rows=x.shape[0], queries=out.logits.shape[1])\n",
        "the refresh counts the narrowed logits' columns as its queries, not the canvas it fed: "
        "counters lose the reference's meaning",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-cached-rows-shifted",
        PARALLEL,
        "    options = {\"logit_rows\": torch.arange(width, device=x.device)} if narrow else {}\n",
        "    options = {\"logit_rows\": torch.arange(shift, width + shift, device=x.device)} if narrow else {}\n",
        "the cached step's logit rows are offset by the shift: for Dream (fed from s - 1) the "
        "block's token j takes query j + 1's logits",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-cached-ignores-run-flag",
        PARALLEL,
        "    narrow = run.narrow_logits and fed.shape[1] > width  # (a LLaDA dual step feeds the block alone: nothing to cut)\n",
        "    narrow = fed.shape[1] > width  # (a LLaDA dual step feeds the block alone: nothing to cut)\n",
        "the cached step cuts its logit rows whenever it feeds more than the block, whatever run.narrow_logits says (narrow_logits=False, KLASS, sampled steps, DAPD's attention)",
        P11,
        (NARROW, DECODERS, FASTDLLM_CACHE),
    ),
    # --- optimized/compiled.py ---
    Mutant(
        "narrow-compiled-prefill-unscored",
        COMPILED_CODE,
        "                                  output_attentions=output_attentions, logit_rows=logit_rows)\n",
        "                                  output_attentions=output_attentions)\n",
        "the compiled wrapper's prefill drops logit_rows: a compiled narrowed refresh returns the whole canvas's logits under a window starting at block.first",
        M5_1,
        (NARROW, COMPILED),
    ),
    # --- optimized/fastdllm.py ---
    Mutant(
        "narrow-fastdllm-default-off",
        FASTDLLM_CODE,
        "              compile: bool | dict = False, narrow_logits: bool = True):\n",
        "              compile: bool | dict = False, narrow_logits: bool = False):\n",
        "the Fast-dLLM decoders' narrow_logits defaults to False: they never narrow unless asked",
        P11,
        (NARROW, FASTDLLM, FASTDLLM_CACHE),
    ),
    Mutant(
        "narrow-fastdllm-flag-dropped",
        FASTDLLM_CODE,
        "                  hook=hook, compile=compile, narrow_logits=narrow_logits)\n",
        "                  hook=hook, compile=compile)\n",
        "the Fast-dLLM decoders do not pass narrow_logits on: narrow_logits=False still narrows (veridec check's cached targets with it)",
        P11,
        (NARROW, FASTDLLM, FASTDLLM_CACHE, CHECK),
    ),
    # --- testing/targets.py ---
    Mutant(
        "narrow-dual-target-narrows",
        TARGETS,
        "_veridec(fast.generate_with_dual_cache, **WHOLE)",
        "_veridec(fast.generate_with_dual_cache)",
        "veridec check's current dual-cache Fast-dLLM target narrows its logits (thresholds drawn at "
        'exact confidences may flip), though its reproducer says narrow_logits=False',
        P11,
        (NARROW, CHECK),
    ),
    Mutant(
        "narrow-reproducer-unfixed",
        TARGETS,
        "FIXED = \"narrow_logits=False, \"\n",
        "FIXED = \"\"\n",
        "the cached Fast-dLLM targets' reproducer calls omit narrow_logits=False: the printed call "
        'is not the one the check ran',
        P11,
        (NARROW, CHECK),
    ),
    # --- tools/host_share.py ---
    Mutant(
        "narrow-host-share-variant-ignored",
        HOST_SHARE_TOOL,
        "        decoded = DECODERS[cache](timed, prompt, narrow_logits=variant == \"after\", **settings)\n",
        "        decoded = DECODERS[cache](timed, prompt, **settings)\n",
        "the host-share tool's before variant narrows too: it no longer measures the whole-window forwards of f53ad8f",
        P11,
        (NARROW, HOST_SHARE),
    ),
]
