"""Spec oracle for SDAR / TraDo's block diffusion decode, spec/block_diffusion.md BD2-BD6.

Written from spec/block_diffusion.md, spec/notation.md, spec/models.md M10 and spec/sequential.md SQ0.4 alone, in
the most naive form: one row, plain Python lists and loops, ``math`` in float64 (N7). Torch appears in three
places only, each one the spec names: the model's full block-causal forward ``model(x, block_size=b).logits``
(BD1), the draw ``torch.multinomial(p, 1, generator=...)`` over the block's ``[b, V]`` rows (BD4: it must consume
the random stream exactly as the decoder does), and ``torch.topk`` for ``ties="torch"`` (BD6.5). Nothing imported
from ``veridec``.

``decode`` returns ``Decode(canvas, writes, steps_per_block)``: the canvas as a list of ``T`` ints; per denoising
forward, the ``(position, token)`` pairs the step wrote, by position (a drawn mask token is written and leaves its
position masked, BD6.2); and the number of denoising forwards of each decoded block. ``committed(writes, mask_id)``
keeps, per step, the positions that left the mask.
"""

import math
from typing import NamedTuple

import torch


class Decode(NamedTuple):
    canvas: list
    writes: list
    steps_per_block: list


def committed(writes, mask_id):
    """Per step, the canvas positions whose mask the step replaced by a token (BD6.2: a drawn mask is no commit)."""
    return [[position for position, token in step if token != mask_id] for step in writes]

STRATEGIES = ("sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded")


# ---------------------------------------------------------------------------------------------------------
# BD2. Settings.
# ---------------------------------------------------------------------------------------------------------

def check_settings(gen_length, block_length, denoising_steps, temperature, top_k, top_p, remasking_strategy,
                   confidence_threshold, eb_threshold, stopping_criteria_idx, ties):
    """BD2: the settings veridec refuses, each a ValueError naming it."""
    if gen_length < 1:
        raise ValueError("gen_length must be >= 1")
    if block_length < 1:
        raise ValueError("block_length must be >= 1")
    if denoising_steps < 1:
        raise ValueError("denoising_steps must be >= 1")
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    if top_k < 0:
        raise ValueError("top_k must be >= 0")
    if not (0 < top_p <= 1):
        raise ValueError("top_p must be in (0, 1]")
    if not math.isfinite(confidence_threshold):
        raise ValueError("confidence_threshold must be finite")
    if remasking_strategy not in STRATEGIES:
        raise ValueError("remasking_strategy unknown")
    if remasking_strategy == "entropy_bounded" and (eb_threshold is None or not eb_threshold > 0):
        raise ValueError("eb_threshold must be > 0 with entropy_bounded")
    if stopping_criteria_idx is not None and not isinstance(stopping_criteria_idx, list):
        raise ValueError("stopping_criteria_idx must be None or a list of token ids")
    if ties not in ("lowest", "torch"):
        raise ValueError("ties must be 'lowest' or 'torch'")


# ---------------------------------------------------------------------------------------------------------
# BD3. The transfer schedule.
# ---------------------------------------------------------------------------------------------------------

def schedule(b, S):
    """BD3: n_s = floor(b / S) + [s < b mod S], s = 0 .. S - 1."""
    out = []
    for s in range(S):
        n = b // S
        if s < b % S:
            n += 1
        out.append(n)
    return out


# ---------------------------------------------------------------------------------------------------------
# BD4. Sampling: temperature, top-k, top-p, softmax.
# ---------------------------------------------------------------------------------------------------------

def softmax(values):
    """Float64 softmax; -inf entries get probability 0."""
    top = -math.inf
    for v in values:
        if v > top:
            top = v
    if top == -math.inf:
        raise ValueError("a row with no finite logit")
    exps = []
    for v in values:
        exps.append(0.0 if v == -math.inf else math.exp(v - top))
    total = 0.0
    for e in exps:
        total += e
    return [e / total for e in exps]


def filtered_law(row, temperature, top_k, top_p):
    """BD4 for one position: l / T (skipped at T = 1), top-k, top-p, softmax. Returns the filtered law."""
    row = [float(v) for v in row]
    vocab = len(row)
    if temperature != 1:
        row = [v / temperature for v in row]
    if top_k > 0:
        # Logits below the k-th largest become -inf; ties at the k-th value are kept.
        # READING: a top_k above the vocabulary keeps every token.
        k = min(top_k, vocab)
        ordered = sorted(row, reverse=True)
        kth = ordered[k - 1]
        row = [-math.inf if v < kth else v for v in row]
    if top_p < 1:
        # Sorted descending, cumulative softmax; a token is dropped when the mass before it already exceeds
        # top_p (strictly), so the first token and the one that crosses top_p stay.
        probs = softmax(row)
        order = sorted(range(vocab), key=lambda t: (-row[t], t))
        before = 0.0
        keep = [False] * vocab
        for rank, token in enumerate(order):
            keep[token] = rank == 0 or not before > top_p
            before += probs[token]
        row = [row[t] if keep[t] else -math.inf for t in range(vocab)]
    return softmax(row)


def argmax_first(values):
    """The first maximum (lowest id on ties, SQ0.4)."""
    best = 0
    for i in range(1, len(values)):
        if values[i] > values[best]:
            best = i
    return best


def entropy(law):
    """BD6.4: -sum_v p_v log p_v (0 log 0 = 0)."""
    total = 0.0
    for p in law:
        if p > 0:
            total -= p * math.log(p)
    return total


# ---------------------------------------------------------------------------------------------------------
# BD5 / BD6. One step's selection.
# ---------------------------------------------------------------------------------------------------------

def largest(conf, masked, n, ties):
    """The n largest confidences among the masked positions of the block (BD5.2 static, BD6.5 ties)."""
    if n <= 0:
        return []
    if ties == "lowest":
        ranked = sorted(masked, key=lambda i: (-conf[i], i))
        return ranked[:n]
    # ties="torch": torch.topk on the block's [b] confidences, -inf outside the masked positions.
    c = [-math.inf] * len(conf)
    for i in masked:
        c[i] = conf[i]
    return [int(i) for i in torch.topk(torch.tensor(c, dtype=torch.float64), n).indices.tolist()]


def select(strategy, conf, laws, masked, n_s, past_schedule, confidence_threshold, eb_threshold, ties):
    """BD5.2 with BD6.2-BD6.5: the block positions that take their draw this step."""
    if past_schedule:
        return list(masked)  # BD6.2: every mask left.
    n = min(n_s, len(masked))  # BD6.3
    if strategy == "sequential":
        return masked[:n]  # BD6.3: the first n masked positions.
    if strategy == "low_confidence_static":
        return largest(conf, masked, n, ties)
    if strategy == "low_confidence_dynamic":
        high = [i for i in masked if conf[i] > confidence_threshold]  # strict
        if len(high) >= n:
            return high
        return largest(conf, masked, n, ties)
    if strategy == "entropy_bounded":
        # BD6.4: masked positions by increasing entropy (lowest position on ties), the first k of them,
        # k = max(1, |{j : sum_{i <= j} H_i < eb_threshold}|).
        ent = {i: entropy(laws[i]) for i in masked}
        ranked = sorted(masked, key=lambda i: (ent[i], i))
        count, running = 0, 0.0
        for i in ranked:
            running += ent[i]
            if running < eb_threshold:
                count += 1
        k = max(1, count)
        return ranked[:k]
    raise ValueError(f"remasking_strategy {strategy!r} unknown")


# ---------------------------------------------------------------------------------------------------------
# BD2 / BD5. The decode.
# ---------------------------------------------------------------------------------------------------------

def decode(model, prompt, mask_id, gen_length=128, block_length=8, denoising_steps=8, temperature=1.0, top_k=0,
           top_p=1.0, remasking_strategy="low_confidence_dynamic", confidence_threshold=0.85, eb_threshold=None,
           stopping_criteria_idx=None, ties="lowest", generator=None):
    """BD2-BD6 for one row. ``prompt``: a list of ints."""
    check_settings(gen_length, block_length, denoising_steps, temperature, top_k, top_p, remasking_strategy,
                   confidence_threshold, eb_threshold, stopping_criteria_idx, ties)
    b, S = block_length, denoising_steps
    P = len(prompt)
    T = -(-(P + gen_length) // b) * b  # BD2: ceil((P + G) / b) * b
    x = [int(t) for t in prompt] + [mask_id] * (T - P)
    n = schedule(b, S)
    writes, steps_per_block = [], []

    for block in range(P // b, T // b):  # BD2: the prompt's whole blocks are prefilled, then decode in order.
        start, end = block * b, (block + 1) * b
        s = 0
        while any(x[i] == mask_id for i in range(start, end)):  # BD5: while the block holds a mask
            past = s >= S  # BD6.2
            # BD5.1: the block's logits from the block-causal forward of the canvas up to the block's end.
            with torch.no_grad():
                logits = model(torch.tensor([x[:end]], dtype=torch.long), block_size=b).logits[0, start:end]
            rows = [[float(v) for v in logits[j].tolist()] for j in range(b)]
            if past:
                for row in rows:
                    row[mask_id] = -math.inf  # BD6.2: banned before BD4's filters
            drawn, conf, laws = [], [], []
            if temperature == 0:
                # BD6.1: greedy, lowest id on ties; q = softmax(l)[x_hat], unscaled and unfiltered.
                for row in rows:
                    if all(v == -math.inf for v in row):
                        raise ValueError("a position with no finite logit")
                    law = softmax(row)
                    token = argmax_first(row)
                    drawn.append(token)
                    conf.append(law[token])
                    # READING: entropy_bounded's law at T = 0 is the unfiltered softmax(l) (BD6.1).
                    laws.append(law)
            else:
                for row in rows:
                    laws.append(filtered_law(row, temperature, top_k, top_p))
                # BD4: one multinomial call over the block's [b, V] rows.
                p = torch.tensor(laws, dtype=torch.float64)
                sample = torch.multinomial(p, 1, generator=generator)[:, 0].tolist()
                for j in range(b):
                    drawn.append(int(sample[j]))
                    conf.append(laws[j][int(sample[j])])
            masked = [j for j in range(b) if x[start + j] == mask_id]  # A
            chosen = select(remasking_strategy, conf, laws, masked, n[s] if s < S else 0, past,
                            confidence_threshold, eb_threshold, ties)
            step = []
            for j in sorted(chosen):  # BD5.3, BD6.3: only masked positions are written.
                x[start + j] = drawn[j]  # BD6.2: a drawn mask leaves its position masked.
                step.append((start + j, drawn[j]))
            writes.append(step)
            s += 1
        steps_per_block.append(s)
        # BD5.4: the store. BD5.5: stop when a stop id occurs in x[P:].
        if stopping_criteria_idx is not None and any(t in stopping_criteria_idx for t in x[P:]):
            break
    return Decode(x, writes, steps_per_block)
