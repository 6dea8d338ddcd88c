"""Spec oracle for confidence-ranked sampled steps (TD3).

Written only from the text of spec/theorems.md, clause TD3; no production,
reference or test code was consulted.

Readings chosen where the clause is open (marked `# READING:` in the code):
  * Exact arithmetic: q is returned as Fractions when T == 1 and every entry of
    p is an int or Fraction (q = p / sum p); otherwise floats, computed as
    (p/max p)**(1/T) normalised (same value, no underflow).
  * q is normalised even if p does not sum to 1; an all-zero p raises ValueError.
  * Confidence comparisons (B, B-bar, the tau test) use the untempered p values
    as given, never the float q values.
  * Threshold: "c >= tau passes"; the passing set is every candidate whose
    confidence is >= tau; only if that set is empty does the top-1 commit.
  * decode_law: a None inside the prompt is rejected (the clause assumes no
    masks in the prompt); conditionals(canvas) returns one distribution per
    canvas position; candidates are the masked generated positions ascending.
"""
import itertools
import math
from fractions import Fraction


def _is_exact(p):
    return all(isinstance(x, (int, Fraction)) and not isinstance(x, bool) for x in p)


def proposal_law(p, T):
    """q(w) = p(w)^(1/T) / sum_u p(u)^(1/T); zero where p is zero."""
    if not T > 0:
        raise ValueError("temperature must be > 0")
    if any(x < 0 for x in p):
        raise ValueError("negative probability")
    # READING: exact Fractions only at T == 1 with exact (int/Fraction) inputs.
    if T == 1 and _is_exact(p):
        total = sum(Fraction(x) for x in p)
        if total == 0:
            raise ValueError("all-zero distribution")
        return [Fraction(x) / total for x in p]
    top = max(float(x) for x in p)
    if top == 0.0:
        raise ValueError("all-zero distribution")
    inv_t = 1.0 / float(T)
    # (p/top)^(1/T) == p^(1/T) / top^(1/T); the common factor cancels.
    w = [0.0 if x == 0 else math.exp(inv_t * math.log(float(x) / top)) for x in p]
    total = math.fsum(w)
    return [x / total for x in w]


def _below(p, q, t):
    """B(t) = q({w : p(w) < t})."""
    return sum((q[w] for w in range(len(p)) if p[w] < t), 0)


def _below_eq(p, q, t):
    """B-bar(t) = q({w : p(w) <= t})."""
    return sum((q[w] for w in range(len(p)) if p[w] <= t), 0)


def _weight(ps, qs, i, t):
    """W_i(t) = prod_{j<i} B_j(t) * prod_{j>i} B-bar_j(t)."""
    out = 1
    for j in range(len(ps)):
        if j < i:
            out = out * _below(ps[j], qs[j], t)
        elif j > i:
            out = out * _below_eq(ps[j], qs[j], t)
    return out


def topk1_step_law(ps, T):
    """Law of the single (candidate index, token) committed by TopK(1), per (a)."""
    qs = [proposal_law(p, T) for p in ps]
    law = {}
    for i, (p, q) in enumerate(zip(ps, qs)):
        for v in range(len(p)):
            if q[v] == 0:
                continue
            prob = q[v] * _weight(ps, qs, i, p[v])
            if prob != 0:
                law[(i, v)] = prob
    return law


def threshold_step_law(ps, T, tau):
    """Law of (committed candidate indices, their tokens) under Threshold(tau), per (b)."""
    qs = [proposal_law(p, T) for p in ps]
    below_tau = [_below(p, q, tau) for p, q in zip(ps, qs)]
    # Each candidate either passes with a token v (p(v) >= tau) or falls below tau.
    options = []
    for p, q in zip(ps, qs):
        # READING: "c >= tau passes" -- the comparison is on untempered p.
        opts = [None] + [v for v in range(len(p)) if p[v] >= tau and q[v] != 0]
        options.append(opts)
    law = {}
    for choice in itertools.product(*options):
        if all(c is None for c in choice):
            continue  # nothing passed: handled by the fallback below
        prob = 1
        for j, c in enumerate(choice):
            prob = prob * (below_tau[j] if c is None else qs[j][c])
        if prob != 0:
            idx = tuple(j for j, c in enumerate(choice) if c is not None)
            law[(idx, tuple(choice[j] for j in idx))] = prob
    # Fallback: nothing passed, the top-1 commits a token with p_i(v) < tau.
    for (i, v), prob in topk1_step_law(ps, T).items():
        if ps[i][v] < tau:
            law[((i,), (v,))] = prob
    return law


def sharpening(ps, T, i):
    """(E[p_i(x_i) | i committed by TopK(1)], E_{x~q_i}[p_i(x)]), per (c)."""
    qs = [proposal_law(p, T) for p in ps]
    p, q = ps[i], qs[i]
    masses = [q[v] * _weight(ps, qs, i, p[v]) for v in range(len(p))]
    z = sum(masses, 0)
    if z == 0:
        raise ValueError("candidate %d cannot be committed (Z_i = 0)" % i)
    given = sum((m * p[v] for v, m in enumerate(masses)), 0) / z
    plain = sum((q[v] * p[v] for v in range(len(p))), 0)
    return given, plain


def decode_law(conditionals, prompt, gen_length, T, rule):
    """Law of the generated tokens of a whole one-block decode, per (d)."""
    prompt = tuple(prompt)
    # READING: the clause assumes no masks in the prompt; reject them.
    if any(s is None for s in prompt):
        raise ValueError("masked slot in the prompt")
    if rule[0] == "topk1":
        step = lambda ps: {((k,), (v,)): pr for (k, v), pr in topk1_step_law(ps, T).items()}
    elif rule[0] == "threshold":
        tau = rule[1]
        step = lambda ps: threshold_step_law(ps, T, tau)
    else:
        raise ValueError("unknown rule %r" % (rule,))
    start = len(prompt)
    memo = {}

    def law_from(canvas):
        if canvas in memo:
            return memo[canvas]
        masked = [k for k in range(start, len(canvas)) if canvas[k] is None]
        if not masked:
            result = {canvas[start:]: 1}
        else:
            dists = conditionals(canvas)
            ps = [list(dists[k]) for k in masked]
            result = {}
            for (idx, toks), prob in step(ps).items():
                nxt = list(canvas)  # uncommitted slots stay masked
                for c, v in zip(idx, toks):
                    nxt[masked[c]] = v
                for key, sub in law_from(tuple(nxt)).items():
                    result[key] = result.get(key, 0) + prob * sub
        memo[canvas] = result
        return result

    return dict(law_from(prompt + (None,) * gen_length))
