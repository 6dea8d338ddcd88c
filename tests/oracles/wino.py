"""Independent spec oracle for WINO (spec/wino.md, WN1-WN7).

Written from spec/wino.md, spec/notation.md and SQ1.4 of spec/sequential.md
alone. Plain Python lists, explicit loops, float64 via `math`. Every random
draw is an explicit input, so everything here is deterministic.

Ties always go to the lowest index (N5, `ties="lowest"`); `ties="torch"` is
not modelled.
"""

import math

INF = float("inf")


# ----------------------------------------------------------------- helpers


def _exp(x):
    # float64 exp that overflows to +inf as torch does instead of raising.
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def _div(num, den):
    # float64 division with IEEE results where Python would raise.
    if den == 0.0:
        # READING: (-log u)^T underflowing to 0 gives +inf (0/0 -> nan), as in torch.
        return INF if num > 0.0 else float("nan")
    return num / den


def _first_argmax(values):
    # Token argmax: first maximum (SQ0.4 / N5).
    best = 0
    for v in range(1, len(values)):
        if values[v] > values[best]:
            best = v
    return best


def _softmax(row):
    # N4 / N7: softmax in float64, max-subtracted.
    # READING: the denominator is summed with math.fsum (exactly rounded); rows are
    # assumed to have at least one finite logit.
    top = max(row)
    ex = [_exp(x - top) for x in row]
    total = math.fsum(ex)
    return [e / total for e in ex]


# ------------------------------------------------------------------- WN4.1


def max_accept(n: int) -> int:
    # WN4.1: min(max(floor(0.7 n), 5), 20), floor(7n/10) in exact integer arithmetic.
    return min(max((7 * n) // 10, 5), 20)


# --------------------------------------------------------------------- WN2


def forward_layout(prompt_len, gen_length, block_length, block):
    P, G, B = prompt_len, gen_length, block_length
    s = P + block * B  # WN1: s_k = P + kB
    L = P + G + B
    # WN2: positions 0..P+G-1 for prompt and generation, s_k..s_k+B-1 for the
    # verification block (slot j sits at the position of s_k + j).
    positions = [i for i in range(P + G)] + [s + j for j in range(B)]
    sees = [[False] * L for _ in range(L)]
    for q in range(L):
        for key in range(L):
            if q < P + G:
                # WN2: prompt/generation query sees every prompt/generation key, no verification key.
                sees[q][key] = key < P + G
            else:
                j = q - (P + G)
                if key >= P + G:
                    # WN2: verification query sees every verification key ...
                    sees[q][key] = True
                else:
                    # ... and every prompt/generation key except s_k + j.
                    sees[q][key] = key != s + j
    return positions, sees


# --------------------------------------------------------------------- WN4


def step(logits, canvas, candidates, verified, last, *, prompt_len, gen_length,
         block_length, block, threshold, threshold_back, temperature=0.0,
         gumbel_uniforms=None, mask_id):
    P, G, B = prompt_len, gen_length, block_length
    L = P + G + B
    s = P + block * B
    M = sorted(candidates)
    U = sorted(verified)
    if not M:
        raise ValueError("WN4 runs only while M is not empty")
    if temperature > 0 and gumbel_uniforms is None:
        raise ValueError("temperature > 0 needs gumbel_uniforms")

    # WN4.1
    cap = max_accept(len(M))

    # WN4.2: proposal x_hat = argmax g(l) over every position, first maximum.
    # SQ1.4: g(l) = l at T = 0; else exp(l) / (-log u)^T in float64.
    # READING: only the Gumbel-max of SQ1.4 applies; its EOS/EoT flags (steps 1, 3)
    # are not part of WINO and are not applied.
    x_hat = []
    for i in range(L):
        row = [float(x) for x in logits[i]]
        if temperature > 0:
            g = []
            for v in range(len(row)):
                u = float(gumbel_uniforms[i][v])
                g.append(_div(_exp(row[v]), (-math.log(u)) ** float(temperature)))
        else:
            g = row
        x_hat.append(_first_argmax(g))
    # WN4.2: each verified slot scores the committed token.
    for j in U:
        x_hat[P + G + j] = canvas[s + j]

    # WN4.3: q = softmax(float64(l))[x_hat] (un-tempered, as in SQ1.4 step 4).
    q = [_softmax([float(x) for x in logits[i]])[x_hat[i]] for i in range(L)]
    c = [-INF] * L
    for i in M:
        c[i] = q[i]
    b = [INF] * B
    for j in U:
        b[j] = q[P + G + j]

    # WN4.4: draft set, strict threshold.
    T = [i for i in M if c[i] > threshold]
    # READING: ties="lowest" only (N5); the official torch.topk order is not modelled.
    if len(T) > cap:
        # the max_accept largest c, ties to the lowest position (N5).
        T = sorted(T, key=lambda i: (-c[i], i))[:cap]
    if not T:
        # first maximum of c.
        # READING: searched over M only (c is -inf elsewhere and q >= 0 on M, so
        # this is the same first maximum as over all positions).
        best = M[0]
        for i in M:
            if c[i] > c[best]:
                best = i
        T = [best]
    a = len(T)
    new_canvas = list(canvas)
    committed = []
    for i in sorted(T, key=lambda i: (-c[i], i)):  # WN5 order
        new_canvas[i] = x_hat[i]
        committed.append((i, x_hat[i], c[i]))

    # WN4.5: revoke set (only slots in U, from the back confidences of this forward).
    R = []
    if a > 1:
        R = [j for j in U if b[j] < threshold_back]
        if len(R) >= last:
            # the last - 1 smallest b, ties to the lowest slot; none when last = 1.
            # READING: the smallest among the failing slots; the same as among all b,
            # since b = +inf off U and |R| >= last > last - 1.
            R = sorted(R, key=lambda j: (b[j], j))[:last - 1]
    revoked = []
    for j in sorted(R, key=lambda j: (b[j], j)):  # WN5 order
        revoked.append((s + j, new_canvas[s + j], b[j]))
        new_canvas[s + j] = mask_id

    # WN4.6: update M, U, last.
    T_set = set(T)
    R_set = set(R)
    new_M = sorted([i for i in M if i not in T_set] + [s + j for j in R])
    # READING: a block position committed with the mask token itself (WN6) still
    # enters U (it is in T); its slot then verifies m, and a revocation of it is a
    # no-op on the token (event old = new = m) that puts it back in M.
    new_U = set(U)
    for i in T:
        if s <= i < s + B:  # only block positions get a verification slot
            new_U.add(i - s)
    new_U = sorted(j for j in new_U if j not in R_set)
    return {
        "canvas": new_canvas,
        "candidates": new_M,
        "verified": new_U,
        "last": a,
        "committed": committed,
        "revoked": revoked,
        "max_accept": cap,
    }


# ------------------------------------------------------- WN1, WN3, WN4, WN6


def decode(forward, prompt, *, gen_length, block_length, threshold, threshold_back,
           mask_id, temperature=0.0, uniforms=None, max_forwards=None):
    P = len(prompt)
    G, B = gen_length, block_length
    # WN1: parameter ranges.
    if not (isinstance(B, int) and B > 0 and isinstance(G, int) and G > 0 and G % B == 0):
        raise ValueError("gen_length must be a positive multiple of block_length")
    if not 0 <= threshold <= 1:
        raise ValueError("threshold must lie in [0, 1]")
    if not 0 <= threshold_back <= 1:
        raise ValueError("threshold_back must lie in [0, 1]")
    if not temperature >= 0:
        raise ValueError("temperature must be >= 0")
    if temperature > 0 and uniforms is None:
        raise ValueError("temperature > 0 needs uniforms")
    # WN6: default cap 64 G.
    if max_forwards is None:
        max_forwards = 64 * G

    # WN1: canvas = prompt, G masks, B masks (verification block, never written).
    y = list(prompt) + [mask_id] * G + [mask_id] * B
    forwards = 0
    events = []
    for k in range(G // B):  # WN1: blocks left to right
        s = P + k * B
        positions, sees = forward_layout(P, G, B, k)  # WN2
        # WN3: block state.
        M = [i for i in range(s + B) if y[i] == mask_id]
        U = []
        last = 30
        while M:  # WN4
            # WN6 / READING: raise when one more forward would exceed max_forwards
            # (a decode that needs exactly max_forwards forwards returns).
            if forwards >= max_forwards:
                raise RuntimeError("stalled")
            logits = forward(list(y), list(positions), [list(r) for r in sees])
            gu = uniforms(forwards) if temperature > 0 else None
            r = step(logits, y, M, U, last, prompt_len=P, gen_length=G,
                     block_length=B, block=k, threshold=threshold,
                     threshold_back=threshold_back, temperature=temperature,
                     gumbel_uniforms=gu, mask_id=mask_id)
            # WN5: commits then revocations, step = forward index across blocks.
            for (i, tok, conf) in r["committed"]:
                events.append(("commit", forwards, i, mask_id, tok, conf))
            for (i, old, conf) in r["revoked"]:
                events.append(("revoke", forwards, i, old, mask_id, conf))
            forwards += 1
            y, M, U, last = r["canvas"], r["candidates"], r["verified"], r["last"]
    # WN4: the decode returns y[0, P + G) and the number of forwards.
    return {"canvas": y[:P + G], "forwards": forwards, "events": events}
