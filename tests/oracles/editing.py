"""Spec oracle for token editing (LLaDA2.1's block sampler with edits), spec/editing.md ED1-ED6.

Written from spec/editing.md, spec/notation.md and spec/wino.md WN5 alone, in the most naive form: plain
nested lists, explicit loops, ``math`` in float64 (N7), ties to the lowest index (N5). Nothing imported from
``veridec`` or from other test files. Deterministic.

Events have the form ``(kind, step, position, old, new, confidence)``: WN5's tuple without the row (one row,
ED1).
"""

import math


# ---------------------------------------------------------------------------------------------------------
# ED2. Block-causal attention.
# ---------------------------------------------------------------------------------------------------------

def sees(window_len, block_size):
    """ED2: sees[query][key] is True when the key's block is <= the query's block (bidirectional inside a
    block, causal across blocks)."""
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    out = []
    for query in range(window_len):
        row = []
        query_block = query // block_size
        for key in range(window_len):
            key_block = key // block_size
            row.append(key_block <= query_block)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------------------
# ED3. Proposal distribution for one position.
# ---------------------------------------------------------------------------------------------------------

def _softmax(values):
    """Float64 softmax; -inf entries get probability 0 (N4, N7)."""
    values = [float(v) for v in values]
    top = -math.inf
    for v in values:
        if v > top:
            top = v
    if top == -math.inf:
        raise ValueError("softmax of a row with no finite entry")
    exps = []
    for v in values:
        if v == -math.inf:
            exps.append(0.0)
        else:
            exps.append(math.exp(v - top))
    total = 0.0
    for e in exps:
        total += e
    return [e / total for e in exps]


def _order_descending(values):
    """Indices sorted by decreasing value, ties to the lowest index (N5)."""
    indices = list(range(len(values)))
    # Explicit key: larger value first, then lower index.
    indices.sort(key=lambda i: (-values[i], i))
    return indices


def filtered_probs(logits_row, temperature, top_k, top_p):
    """ED3: the proposal law of one position, in float64.

    T = 0: plain softmax of the logits. T > 0: l / T, then top-k, then top-p, then softmax.
    """
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    row = [float(v) for v in logits_row]
    if temperature == 0:
        # ED3, T = 0: p = softmax(l); no filtering.
        # READING: top_k / top_p are ignored at T = 0 (ED3 lists them only under T > 0).
        return _softmax(row)

    # ED3, T > 0: l / T.
    row = [v / temperature for v in row]
    vocab = len(row)

    # ED3, top-k: logits below the k-th largest become -inf; ties at the k-th value are kept.
    if top_k is not None:
        if top_k < 1:
            raise ValueError("top_k must be >= 1 or None")
        # READING: top_k larger than the vocabulary keeps every token (k clamped to V).
        k = min(top_k, vocab)
        order = _order_descending(row)
        kth_value = row[order[k - 1]]
        filtered = []
        for v in row:
            if v < kth_value:
                filtered.append(-math.inf)
            else:
                filtered.append(v)
        row = filtered

    # ED3, top-p: sorted descending, the cumulative softmax; a token is dropped when the cumulative mass
    # before it already exceeds top_p (strictly); the first token always stays.
    if top_p is not None:
        if not (0 < top_p <= 1):
            raise ValueError("top_p must be in (0, 1] or None")
        probs = _softmax(row)
        # READING: equal logits are ordered by lowest token index (N5) when accumulating the mass; with
        # ties this decides which of the tied tokens a cut falls on.
        order = _order_descending(row)
        cumulative_before = 0.0
        keep = [False] * vocab
        for rank in range(vocab):
            token = order[rank]
            if rank == 0:
                keep[token] = True
            elif cumulative_before > top_p:
                keep[token] = False
            else:
                keep[token] = True
            cumulative_before += probs[token]
        filtered = []
        for token in range(vocab):
            if keep[token]:
                filtered.append(row[token])
            else:
                filtered.append(-math.inf)
        row = filtered

    # ED3: p = softmax of the filtered logits (the filtered law).
    return _softmax(row)


# ---------------------------------------------------------------------------------------------------------
# ED4. One step on one block.
# ---------------------------------------------------------------------------------------------------------

def _argmax_first(values):
    """First maximum (ED3 'first maximum', N5)."""
    best = 0
    for i in range(1, len(values)):
        if values[i] > values[best]:
            best = i
    return best


def step(block_logits, block_tokens, is_prompt, *, mask_id, temperature=0.0, top_k=None, top_p=None,
         threshold, editing_threshold, num_to_transfer, drawn=None):
    """ED4: one step on a block of b positions."""
    b = len(block_tokens)
    if len(block_logits) != b or len(is_prompt) != b:
        raise ValueError("block_logits, block_tokens and is_prompt must have the block's length")
    if num_to_transfer < 1:
        raise ValueError("num_to_transfer must be >= 1")

    # ED3: proposal x_hat_i and confidence q_i at every position of the block.
    proposal = []
    confidence = []
    for i in range(b):
        probs = filtered_probs(block_logits[i], temperature, top_k, top_p)
        if temperature == 0:
            # ED3, T = 0: x_hat = argmax p (first maximum), q = p[x_hat].
            token = _argmax_first(probs)
        else:
            # ED3, T > 0: x_hat is the caller's draw, q its probability under the filtered law.
            if drawn is None:
                raise ValueError("temperature > 0 needs the drawn tokens")
            token = int(drawn[i])
        proposal.append(token)
        confidence.append(probs[token])

    old = [int(t) for t in block_tokens]

    # ED4: A = the block's masked positions before the step.
    # READING: A is every position whose token is the mask, prompt or not (a mask inside the prompt would be
    # transferred like any other); only the edit set excludes prompt positions.
    masked = []
    for i in range(b):
        if old[i] == mask_id:
            masked.append(i)
    had_masks = len(masked) > 0

    # ED4.1: transfer (only if A is non-empty).
    transfer = []
    if had_masks:
        high = []
        for i in masked:
            if confidence[i] > threshold:  # strict
                high.append(i)
        if len(high) >= num_to_transfer:
            transfer = high
        else:
            # Fallback: the min(num_to_transfer, |A|) positions of A with the largest q, ties lowest (N5).
            count = min(num_to_transfer, len(masked))
            ranked = sorted(masked, key=lambda i: (-confidence[i], i))
            transfer = ranked[:count]

    # ED4.2: edit set, from the tokens before the step: not in A, not a prompt position, q > editing_threshold
    # (strict), proposal differs from the old token.
    edit = []
    for i in range(b):
        if old[i] == mask_id:
            continue
        if is_prompt[i]:
            continue
        if confidence[i] > editing_threshold and proposal[i] != old[i]:
            edit.append(i)

    # ED4.3: write x_i := x_hat_i on the transfer set and on E (the mask token may be written).
    new_tokens = list(old)
    for i in transfer:
        new_tokens[i] = proposal[i]
    for i in edit:
        new_tokens[i] = proposal[i]

    # ED4 events order: commits by decreasing q (ties lowest offset), edits by increasing offset.
    transfer_sorted = sorted(transfer, key=lambda i: (-confidence[i], i))
    transferred = [(i, proposal[i], confidence[i]) for i in transfer_sorted]
    edited = [(i, old[i], proposal[i], confidence[i]) for i in sorted(edit)]
    return {"tokens": new_tokens, "transferred": transferred, "edited": edited, "had_masks": had_masks}


# ---------------------------------------------------------------------------------------------------------
# ED1, ED2, ED4, ED5, ED6. The decode at temperature 0.
# ---------------------------------------------------------------------------------------------------------

def decode(forward, prompt, *, max_new_tokens, block_size, threshold, editing_threshold, max_post_steps,
           num_to_transfer, mask_id, eos_id=None, eos_early_stop=False, max_forwards=None):
    """ED1-ED6 at temperature 0. ``forward(tokens, positions, sees)`` returns logits [len(window)][V]."""
    # ED1: ranges.
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    if num_to_transfer < 1:
        raise ValueError("num_to_transfer must be >= 1")
    if max_post_steps < 0:
        raise ValueError("max_post_steps must be >= 0")
    if not (0 <= threshold <= 1) or not (0 <= editing_threshold <= 1):
        raise ValueError("thresholds must be in [0, 1]")
    if mask_id is None:
        raise ValueError("mask_id is required")
    if eos_early_stop and eos_id is None:
        # READING: eos_early_stop needs an EOS token to look for; without one it is an error, not a no-op.
        raise ValueError("eos_early_stop needs eos_id")

    b = block_size
    P = len(prompt)
    # ED1: L = ceil((P + max_new_tokens) / b) * b; the prompt, then masks.
    L = ((P + max_new_tokens + b - 1) // b) * b
    canvas = [int(t) for t in prompt] + [mask_id] * (L - P)

    # ED6: the per-block forward cap, default 4 b + max_post_steps.
    if max_forwards is None:
        max_forwards = 4 * b + max_post_steps

    events = []
    total_forwards = 0

    # ED1: blocks floor(P / b) .. L / b - 1 in order (blocks the prompt fills are skipped).
    for k in range(P // b, L // b):
        start = k * b
        end = (k + 1) * b
        block_forwards = 0
        # ED5: post = 0 once per block.
        # READING: post is never reset inside a block, even when an edit to the mask token makes A non-empty
        # again; it counts every step taken with A empty.
        post = 0
        while True:
            # ED5: A as in ED4.
            masked_now = False
            for i in range(start, end):
                if canvas[i] == mask_id:
                    masked_now = True
            if not masked_now:
                post += 1
            # ED5: if post > max_post_steps, stop the block before any forward.
            if post > max_post_steps:
                break
            # ED6: at most max_forwards forwards per block.
            # READING: the stall is raised only when the loop would run forward number max_forwards + 1 of
            # the block; a block that stops (either ED5 condition) right at the cap does not stall.
            if block_forwards >= max_forwards:
                err = RuntimeError("stalled")
                err.events = events
                err.canvas = canvas
                err.forwards = total_forwards
                raise err

            # ED2: the window x[0, (k+1) b), positions 0 .. (k+1) b - 1, block-causal attention.
            window = canvas[:end]
            positions = list(range(end))
            logits = forward(list(window), positions, sees(end, b))
            step_index = total_forwards
            total_forwards += 1
            block_forwards += 1

            # ED2: the step reads the logits of the block's b positions.
            block_logits = [list(logits[i]) for i in range(start, end)]
            block_tokens = canvas[start:end]
            is_prompt = [i < P for i in range(start, end)]

            # ED4: one step at temperature 0.
            result = step(block_logits, block_tokens, is_prompt, mask_id=mask_id, temperature=0.0,
                          threshold=threshold, editing_threshold=editing_threshold,
                          num_to_transfer=num_to_transfer)
            for i in range(b):
                canvas[start + i] = result["tokens"][i]

            # ED4 / WN5 events: commits by decreasing q, then edits by position; new = mask is a revoke.
            for offset, token, q in result["transferred"]:
                # READING: a transfer that writes the mask token is still a 'commit' event with new = mask
                # (ED4: 'each transferred position is a commit').
                events.append(("commit", step_index, start + offset, mask_id, token, q))
            for offset, old_token, new_token, q in result["edited"]:
                kind = "revoke" if new_token == mask_id else "edit"
                events.append((kind, step_index, start + offset, old_token, new_token, q))

            # ED5: if A was empty and E is empty, stop the block.
            if not result["had_masks"] and len(result["edited"]) == 0:
                break

        # ED5: with eos_early_stop, after a block: no mask left in x[P, (k+1) b) and EOS there -> stop.
        if eos_early_stop:
            any_mask = False
            any_eos = False
            for i in range(P, end):
                if canvas[i] == mask_id:
                    any_mask = True
                if canvas[i] == eos_id:
                    any_eos = True
            if not any_mask and any_eos:
                break

    return {"canvas": canvas, "forwards": total_forwards, "events": events}
