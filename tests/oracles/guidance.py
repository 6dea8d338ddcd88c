"""Spec oracle for reward guidance, FastGuide and speculative draft trees / packing / acceptance.

Written ONLY from spec/notation.md, spec/guidance.md, spec/speculative.md and the two seed papers
(seed 000 FastGuide, seed 001 trajectory-level speculative decoding).  Nothing here is imported from
veridec, and nothing uses torch or numpy: plain lists, loops, ``math`` and ``fractions.Fraction``.

Conventions
-----------
* A "row of logits" is ``list[float]`` of length V (the model vocabulary, mask token included, N1).
  ``-math.inf`` marks a token the model rules out.
* Nested shapes are written ``[B][G][V]`` etc. and mean nested Python lists.
* Every argmax / top-k / sort over tokens or positions breaks ties toward the LOWEST index (N5).
* Randomness is never drawn here: a random choice is either returned as a distribution
  (``list`` of probabilities over V) or taken as an explicit input (a ``draw`` callable, a permutation).
* Probabilities are float64 (``float``) where they come from a softmax; functions whose decisions are
  purely order/threshold comparisons also accept ``Fraction`` so boundary cases can be checked exactly.

Readings chosen where the spec is open are marked ``# READING:`` where they are made, each stating the
reading it takes.
"""

import math
from fractions import Fraction

from .data import load

NEG_INF = -math.inf

ADAM_BETAS = (0.9, 0.999)  # torch.optim.Adam defaults
ADAM_EPS = 1e-8            # torch.optim.Adam default
GUIDANCE_DEFAULTS = {"steps": 3, "lr": 0.5, "temperature": 0.7, "top_p": 0.95}   # G4 GuidanceParams
FASTGUIDE_DEFAULTS = {"k": 8, "tau": 0.5, "window": 2, "temperature": 0.7, "top_p": 0.95,
                      "greedy": False, "order": "confidence"}                      # GF1 FastGuideParams


# ---------------------------------------------------------------------------------------------------
# Small helpers (N4, N5)
# ---------------------------------------------------------------------------------------------------

def exclude_token(logits_row, token_id):
    """Return a copy of ``logits_row`` ([V] floats) with ``token_id`` set to -inf (None: unchanged).

    Used for "the mask token excluded" (G6, GF1).
    # READING: "excluded" means the mask token's logit is removed BEFORE the softmax (the remaining
    # probabilities are renormalised), not "softmax over all V, then max over v != mask".
    """
    row = list(logits_row)
    if token_id is not None:
        row[token_id] = NEG_INF
    return row


def softmax(logits_row, temperature=1.0):
    """softmax(logits_row / temperature) in float64 (N4, N7).

    logits_row: [V] floats, -inf allowed (probability exactly 0.0).  temperature: float > 0.
    Returns [V] floats.  Raises ValueError if every entry is -inf (the distribution is undefined).
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    scaled = []
    for x in logits_row:
        if x == NEG_INF:
            scaled.append(NEG_INF)
        else:
            scaled.append(float(x) / temperature)
    mx = NEG_INF
    for x in scaled:
        if x > mx:
            mx = x
    if mx == NEG_INF:
        raise ValueError("every logit is -inf: softmax undefined")
    exps = []
    for x in scaled:
        if x == NEG_INF:
            exps.append(0.0)
        else:
            exps.append(math.exp(x - mx))
    total = 0.0
    for e in exps:
        total += e
    out = []
    for e in exps:
        out.append(e / total)
    return out


def argmax_lowest(values):
    """Index of the largest entry of ``values`` ([n] numbers), ties to the lowest index (N5)."""
    best = 0
    for i in range(1, len(values)):
        if values[i] > values[best]:
            best = i
    return best


def entropy(probs):
    """Shannon entropy in nats, -sum p log p with 0 log 0 = 0.  probs: [V] floats summing to 1."""
    h = 0.0
    for p in probs:
        if p > 0:
            h -= p * math.log(p)
    return h


def order_tokens_by_probability(probs):
    """Token ids sorted by decreasing probability, ties to the lowest id (N5).  probs: [V] numbers."""
    ids = list(range(len(probs)))
    # stable sort on the negated probability keeps equal probabilities in increasing id order
    ids.sort(key=lambda v: -probs[v])
    return ids


def top_p_keep(probs, top_p):
    """The token ids the nucleus (top-p) keeps, in decreasing-probability order.

    probs: [V] floats or Fractions summing to 1; top_p: number in (0, 1].
    Rule: walk tokens by decreasing probability (ties: lowest id first, N5) and keep a token iff the
    mass of the tokens kept BEFORE it is strictly below top_p; i.e. the smallest prefix whose mass is
    >= top_p (Holtzman et al.'s nucleus).  So the token whose probability makes the running mass reach
    or cross top_p IS kept, and a token that would start after the mass already equals top_p is NOT.
    # READING: the spec only says "top-p(...)". Alternatives: Dream's code keeps a token iff the mass
    # before it is <= top_p (keeps one more token at exact equality).  Zero-probability tokens are never
    # kept (they cannot change the distribution anyway).
    """
    if not (0 < top_p <= 1):
        raise ValueError("top_p must be in (0, 1]")
    kept = []
    before = 0
    for v in order_tokens_by_probability(probs):
        if probs[v] == 0:
            break
        if before < top_p:
            kept.append(v)
            before = before + probs[v]
        else:
            break
    return kept


def top_p_distribution(probs, top_p):
    """The top-p distribution: probs restricted to ``top_p_keep`` and renormalised.

    probs: [V] floats or Fractions; returns [V] of the same kind (exact when given Fractions).
    """
    kept = top_p_keep(probs, top_p)
    mass = 0
    for v in kept:
        mass = mass + probs[v]
    out = [0 * probs[0]] * len(probs) if isinstance(probs[0], Fraction) else [0.0] * len(probs)
    for v in kept:
        out[v] = probs[v] / mass
    return out


# ---------------------------------------------------------------------------------------------------
# G4: guidance (EntRGi / Expectation / APS) with a linear reward (G2)
# ---------------------------------------------------------------------------------------------------

def mixing_weight(phi_row, temperature, method):
    """G4 mixing weight w for one masked slot.

    phi_row: [V] floats (the current logits phi at that slot, -inf allowed); temperature: T > 0;
    method: "entrgi" | "expectation" | "aps".
    EntRGi: w = H(softmax(phi / T)) / log|V|, the entropy of the TEMPERED distribution (spec G4,
    "the entropy in w is of the tempered distribution"), |V| = len(phi_row), the full logit width,
    the mask token and -inf tokens included.  Expectation: 0.  APS: 1.
    # READING: |V| is the full width V of the logits (N1), not the number of finite logits.
    """
    if method == "expectation":
        return 0.0
    if method == "aps":
        return 1.0
    if method != "entrgi":
        raise ValueError("method must be entrgi, expectation or aps")
    n = len(phi_row)
    if n < 2:
        raise ValueError("log|V| = 0: need at least two tokens")
    return entropy(softmax(phi_row, temperature)) / math.log(n)


def expected_embedding(probs, embedding):
    """e_tilde = probs @ E.  probs: [V] floats; embedding E: [V][D] floats.  Returns [D] floats."""
    d = len(embedding[0])
    out = [0.0] * d
    for v in range(len(probs)):
        if probs[v] == 0:
            continue  # 0 * E[v] (also avoids 0 * inf if an embedding row were infinite)
        for j in range(d):
            out[j] += probs[v] * embedding[v][j]
    return out


def guidance_sample_distribution(phi_row, temperature, top_p):
    """Distribution of the token x sampled for e_bar = E[x] in G4: top-p(softmax(phi / T)).

    phi_row: [V] floats.  Returns [V] floats.
    # READING: the mask token is NOT excluded here (G4 does not say so; the mask token is an ordinary
    # entry of V for the reward's vocabulary map, usually a zero embedding).
    """
    return top_p_distribution(softmax(phi_row, temperature), top_p)


def soft_embedding_value(phi_row, embedding, sampled_token, temperature, method):
    """G4 forward VALUE of e_hat at a masked slot, given the sampled token x.

    e_hat = e_tilde + sg(w * (e_bar - e_tilde)),  e_tilde = softmax(phi/T) @ E,  e_bar = E[x],
    w = mixing_weight(phi_row, T, method).  The stop-gradient does not change the value:
    e_hat = e_tilde + w * (e_bar - e_tilde), computed literally in that order (so for APS the value is
    E[x] only up to one rounding of float64).
    phi_row: [V]; embedding: [V][D]; sampled_token: int.  Returns [D] floats.
    """
    probs = softmax(phi_row, temperature)
    e_tilde = expected_embedding(probs, embedding)
    e_bar = embedding[sampled_token]
    w = mixing_weight(phi_row, temperature, method)
    out = []
    for j in range(len(e_tilde)):
        out.append(e_tilde[j] + w * (e_bar[j] - e_tilde[j]))
    return out


def reward_input_embeddings(phi, tokens, masked, embedding, sampled_tokens, temperature, method):
    """G4: the response embeddings fed to the reward for one batch row.

    phi: [G][V]; tokens: [G] ints (canvas tokens of the response); masked: [G] bools;
    embedding: [V][D]; sampled_tokens: [G] ints (x at masked slots, ignored elsewhere).
    Masked slot: soft_embedding_value(...).  Unmasked slot: E[tokens[g]] (its own embedding).
    Returns [G][D].
    """
    out = []
    for g in range(len(tokens)):
        if masked[g]:
            out.append(soft_embedding_value(phi[g], embedding, sampled_tokens[g], temperature, method))
        else:
            out.append(list(embedding[tokens[g]]))
    return out


def linear_reward(response_embeddings, weight):
    """G2: r(e) = sum_g <w, e_g>.  response_embeddings: [G][D]; weight: [D].  Returns float."""
    total = 0.0
    for e in response_embeddings:
        for j in range(len(weight)):
            total += weight[j] * e[j]
    return total


def token_scores(embedding, weight):
    """s_v = <w, E[v]> for every token.  embedding: [V][D]; weight: [D].  Returns [V] floats."""
    out = []
    for row in embedding:
        s = 0.0
        for j in range(len(weight)):
            s += weight[j] * row[j]
        out.append(s)
    return out


def linear_loss_gradient(phi_row, embedding, weight, temperature):
    """Gradient of the loss -r w.r.t. phi at ONE masked slot, for the linear reward (G2, G4).

    Only e_tilde = softmax(phi/T) @ E carries gradient (the sg term, including w and the sample x,
    carries none), so for every method (EntRGi, Expectation, APS) and every sampled x:
        d(-r)/d phi_u = -(1/T) * pi_u * (s_u - sum_v pi_v s_v),  pi = softmax(phi/T), s_v = <w, E[v]>.
    Tokens at -inf have pi_u = 0, hence gradient exactly 0.
    phi_row: [V]; embedding: [V][D]; weight: [D].  Returns [V] floats.
    """
    pi = softmax(phi_row, temperature)
    s = token_scores(embedding, weight)
    mean = 0.0
    for v in range(len(pi)):
        if pi[v] != 0:
            mean += pi[v] * s[v]
    grad = []
    for u in range(len(pi)):
        if pi[u] == 0:
            grad.append(0.0)
        else:
            grad.append(-(1.0 / temperature) * pi[u] * (s[u] - mean))
    return grad


def adam_update(param, grad, m, v, step, lr, betas=ADAM_BETAS, eps=ADAM_EPS):
    """One torch.optim.Adam step (weight_decay 0, amsgrad False, maximize False), elementwise.

    param, grad, m, v: [n] floats (m, v are the running moments, updated in place); step: 1-based
    step count.  Returns the new param list.  Follows torch's formula:
        m = b1 m + (1-b1) g ;  v = b2 v + (1-b2) g^2
        denom = sqrt(v) / sqrt(1 - b2^step) + eps
        param = param - (lr / (1 - b1^step)) * m / denom
    (torch computes m with lerp; the two agree to the last bit or so.)  -inf params stay -inf when
    their gradient is 0 (the update is exactly 0).
    """
    b1, b2 = betas
    bc1 = 1.0 - b1 ** step
    bc2 = 1.0 - b2 ** step
    step_size = lr / bc1
    out = []
    for i in range(len(param)):
        g = grad[i]
        m[i] = b1 * m[i] + (1.0 - b1) * g
        v[i] = b2 * v[i] + (1.0 - b2) * g * g
        denom = math.sqrt(v[i]) / math.sqrt(bc2) + eps
        upd = step_size * m[i] / denom
        if upd == 0.0:
            out.append(param[i])          # keeps -inf at -inf (never -inf - 0.0 issues)
        else:
            out.append(param[i] - upd)
    return out


def guidance_vector_linear(phi0, masked, embedding, weight, steps=3, lr=0.5, temperature=0.7,
                           betas=ADAM_BETAS, eps=ADAM_EPS):
    """G4 guidance vector r = phi_M - phi_0 for the LINEAR reward of G2, by hand.

    phi0: [B][G][V] floats (dLLM logits of the response slots, -inf allowed); masked: [B][G] bools;
    embedding E: [V][D]; weight w: [D].  A fresh Adam (betas, eps, lr) per call on phi initialised at
    phi0; ``steps`` = M steps minimising -sum_b r(e_hat_b).  The loss is a SUM over the batch and over
    the slots; each (b, g) slot's gradient depends only on its own phi row (linear_loss_gradient), and
    Adam is elementwise, so rows are computed independently.  The result is the same for EntRGi,
    Expectation and APS and does not depend on the sampled tokens (linear reward).
    Unmasked slots: gradient 0 -> r = 0 there.  Entries with phi0 = -inf: r = 0.0 there (so the guided
    logit phi0 + r stays -inf).
    # READING: the spec writes r = phi_M - phi_0, which is NaN at -inf entries in float arithmetic;
    # this oracle returns 0.0 there and tests should compare the GUIDED logits (-inf) at such entries.
    Returns r: [B][G][V] floats.
    """
    out = []
    for b in range(len(phi0)):
        row_b = []
        for g in range(len(phi0[b])):
            V = len(phi0[b][g])
            if not masked[b][g]:
                row_b.append([0.0] * V)
                continue
            phi = list(phi0[b][g])
            m = [0.0] * V
            v = [0.0] * V
            for t in range(1, steps + 1):
                grad = linear_loss_gradient(phi, embedding, weight, temperature)
                phi = adam_update(phi, grad, m, v, t, lr, betas, eps)
            r = []
            for u in range(V):
                if phi0[b][g][u] == NEG_INF:
                    r.append(0.0)
                else:
                    r.append(phi[u] - phi0[b][g][u])
            row_b.append(r)
        out.append(row_b)
    return out


def guided_logits(phi0, r):
    """phi0 + r elementwise for one row [V] (or nested lists of rows); -inf + anything = -inf."""
    if isinstance(phi0, list) and phi0 and isinstance(phi0[0], list):
        return [guided_logits(a, b) for a, b in zip(phi0, r)]
    out = []
    for a, b in zip(phi0, r):
        out.append(NEG_INF if a == NEG_INF else a + b)
    return out


def expected_linear_reward(logits, tokens, masked, embedding, weight, temperature=1.0):
    """G5 helper: the expected linear reward of one batch row under independent slot distributions.

    logits: [G][V]; tokens: [G]; masked: [G]; embedding [V][D]; weight [D].
    Masked slot g contributes sum_v softmax(logits[g]/temperature)_v * s_v; an unmasked slot contributes
    s_{tokens[g]}.  Returns float.
    # READING: G5 does not say at which temperature (or with top-p) "the guided distribution's expected
    # reward" is taken; the caller chooses.  For M = 1 Adam step and temperature == the guidance
    # temperature the increase is a theorem: Adam's first step moves logit u by lr g_u / (|g_u| + eps)
    # against the gradient g_u = -(1/T) pi_u (s_u - mean s), so every token scoring above the mean
    # gains, every one below loses, and the reweighted mean cannot fall below the old one (slots are
    # independent).  For M = 3 it is an empirical claim.
    """
    s = token_scores(embedding, weight)
    total = 0.0
    for g in range(len(tokens)):
        if masked[g]:
            p = softmax(logits[g], temperature)
            for v in range(len(p)):
                if p[v] != 0:
                    total += p[v] * s[v]
        else:
            total += s[tokens[g]]
    return total


# ---------------------------------------------------------------------------------------------------
# G6: one step of sequential guided decoding
# ---------------------------------------------------------------------------------------------------

def confidence(logits_row, mask_id=None):
    """Probability confidence max_v softmax(logits_row)_v (N4), UNTEMPERED, mask token excluded.

    logits_row: [V]; mask_id: int or None.  Returns float.
    """
    return max(softmax(exclude_token(logits_row, mask_id)))


def select_slot(guided, masked, mask_id=None):
    """G6 position choice: the masked slot most confident under softmax(guided) (no temperature),
    mask token excluded, ties to the lowest slot.

    guided: [G][V] floats (phi0 + r); masked: [G] bools (at least one True).  Returns slot index.
    """
    best = None
    best_c = None
    for g in range(len(masked)):
        if not masked[g]:
            continue
        c = confidence(guided[g], mask_id)
        if best is None or c > best_c:
            best, best_c = g, c
    if best is None:
        raise ValueError("no masked slot")
    return best


def token_distribution(guided_row, temperature, top_p, mask_id=None):
    """G6 / GF1 sampling distribution: top-p(softmax(guided_row / T)).

    guided_row: [V]; returns [V] floats.  Temperature is applied FIRST, top-p to the tempered
    distribution.
    # READING: the mask token is excluded from the sampled distribution too (a committed mask token
    # would leave the slot masked); pass mask_id=None for the literal unexcluded formula.
    """
    return top_p_distribution(softmax(exclude_token(guided_row, mask_id), temperature), top_p)


def sequential_guided_step(guided, masked, temperature=0.7, top_p=0.95, mask_id=None):
    """G6: one step of sequential guided decoding (after guidance was computed).

    guided: [G][V] (phi0 + r; unguided: phi0); masked: [G] bools.
    Returns (slot, distribution [V] floats): the slot unmasked this step and the law of its token.
    """
    slot = select_slot(guided, masked, mask_id)
    return slot, token_distribution(guided[slot], temperature, top_p, mask_id)


# ---------------------------------------------------------------------------------------------------
# GF1-GF4: FastGuide
# ---------------------------------------------------------------------------------------------------

def fastguide_candidates(guided, masked, k, order="confidence", mask_id=None, permutation=None):
    """GF1 candidates a_1..a_k in VERIFICATION order.

    guided: [G][V] (l0 + r0); masked: [G] bools; k >= 1.
    The candidate SET is the min(k, #masked) masked slots most confident under softmax(guided)
    (untempered, mask token excluded), ranked by decreasing confidence, ties to the lowest slot.
    order: "confidence" (that ranking), "reverse-confidence" (that ranking reversed),
    "left-to-right" (increasing slot), "random" (``permutation``: a list of indices into the
    confidence ranking, explicit input standing for the decode's generator).
    The first slot returned is the one committed from l0.
    # READING: fewer than k masked slots -> all of them.  "reverse-confidence" is the literal reverse
    # of the confidence ranking, so among tied confidences the HIGHER slot comes first.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    conf = []
    for g in range(len(masked)):
        if masked[g]:
            conf.append((g, confidence(guided[g], mask_id)))
    # decreasing confidence, ties to the lowest slot (the list is already in slot order: stable sort)
    conf.sort(key=lambda gc: -gc[1])
    ranked = [g for g, _ in conf[:k]]
    if order == "confidence":
        return ranked
    if order == "reverse-confidence":
        return list(reversed(ranked))
    if order == "left-to-right":
        return sorted(ranked)
    if order == "random":
        if permutation is None or sorted(permutation) != list(range(len(ranked))):
            raise ValueError("random order needs a permutation of range(len(candidates))")
        return [ranked[i] for i in permutation]
    raise ValueError("order must be confidence, reverse-confidence, left-to-right or random")


def fastguide_gamma(phi_row, mask_id=None):
    """GF1 / seed 000 Eq. 7: gamma_j = max softmax(phi_j), UNTEMPERED (no /T), mask excluded.

    phi_row: [V] (l_j + r0 at slot a_j).  Returns float.
    # READING: mask token excluded here as for the candidate confidence (Eq. 7 maxes over all of V).
    """
    return confidence(phi_row, mask_id)


def fastguide_commit_flags(gammas, tau):
    """GF1 confidence deferral: which candidates (in verification order) commit.

    gammas: [k] numbers (gammas[0] is ignored and may be None: the first candidate always commits);
    tau: number.  Candidate j >= 2 commits iff gamma_j >= tau (NON-strict, seed 000 Eq. 7 / Alg. 1).
    Returns [k] bools.
    """
    flags = []
    for j in range(len(gammas)):
        if j == 0:
            flags.append(True)
        else:
            flags.append(gammas[j] >= tau)
    return flags


def fastguide_token_distribution(phi_row, index_in_order, temperature=0.7, top_p=0.95, greedy=False,
                                 mask_id=None):
    """GF1: the law of the token proposed for the candidate at 0-based ``index_in_order``.

    index 0 (a_1, from l0 + r0): always top-p(softmax(phi/T)), even when greedy=True.
    later candidates: greedy -> point mass on argmax phi (ties lowest id, mask excluded);
    otherwise top-p(softmax(phi_j/T)).
    # READING: greedy applies only to a_2..a_k (spec GF1 sentence structure, seed 000 D.7
    # "each candidate after the first").
    Returns [V] floats.
    """
    if greedy and index_in_order > 0:
        row = exclude_token(phi_row, mask_id)
        out = [0.0] * len(row)
        out[argmax_lowest(row)] = 1.0
        return out
    return token_distribution(phi_row, temperature, top_p, mask_id)


def fastguide_hybrid_step_exact(canvas, logits_fn, r0, mask_id, draw, k=8, tau=0.5, temperature=0.7,
                                top_p=0.95, greedy=False, order="confidence", permutation=None):
    """GF1 + GF2: one hybrid step with EXACT recomputation (every l_j a full forward).

    canvas: [L] ints (mask_id at masked positions); logits_fn(canvas) -> [L][V] token-aligned logits
    (N3, deterministic); r0: [L][V] guidance computed from the step's full pass (0 where unmasked);
    draw(distribution [V], position) -> token id: the explicit randomness (called once per candidate,
    deferred ones included, in verification order, after the greedy rule is applied -- for a greedy
    candidate it receives the point mass).
    # READING: a deferred candidate still consumes a draw (Alg. 1 samples c_j before the gamma test).
    Returns dict: canvas (new [L]), commits [(position, token)] in order, deferred [positions],
    candidates [positions in verification order], gammas [k] (None for the first),
    full_forwards (1 + number of recomputations).
    """
    masked = [t == mask_id for t in canvas]
    l0 = logits_fn(list(canvas))
    guided0 = [guided_logits(l0[i], r0[i]) for i in range(len(canvas))]
    cands = fastguide_candidates(guided0, masked, k, order, mask_id, permutation)
    cur = list(canvas)
    commits, deferred, gammas = [], [], []
    forwards = 1
    for j, a in enumerate(cands):
        if j == 0:
            phi = guided0[a]
            gammas.append(None)
        else:
            lj = logits_fn(list(cur))
            forwards += 1
            phi = guided_logits(lj[a], r0[a])
            gammas.append(fastguide_gamma(phi, mask_id))
        dist = fastguide_token_distribution(phi, j, temperature, top_p, greedy, mask_id)
        tok = draw(dist, a)
        if j == 0 or gammas[j] >= tau:
            cur[a] = tok
            commits.append((a, tok))
        else:
            deferred.append(a)
    return {"canvas": cur, "commits": commits, "deferred": deferred, "candidates": cands,
            "gammas": gammas, "full_forwards": forwards}


def query_position(a_j, layout, first_real=0):
    """GF3 / N6: the position whose query scores token a_j.  LLaDA: a_j.  Dream: max(a_j - 1, f_b)."""
    if layout == "llada":
        return a_j
    if layout == "dream":
        return max(a_j - 1, first_real)
    raise ValueError("layout must be llada or dream")


def window(center, radius, lo, hi):
    """Positions {center-radius .. center+radius} clipped to [lo, hi] (inclusive), sorted list."""
    return [p for p in range(center - radius, center + radius + 1) if lo <= p <= hi]


def sparse_window_positions(a_prev, a_j, w, length, layout, first_real=0):
    """GF3 unpadded window union for one row: radius-w windows around the last committed position
    a_prev (centred AT a_prev in both families: its K/V changed) and around the query scoring a_j
    (LLaDA: a_j; Dream: a_j - 1), clipped to the row's real positions [first_real, length-1].
    # READING: windows are clipped to real positions (left padding excluded, canvas end excluded).
    Returns sorted list of positions.
    """
    q = query_position(a_j, layout, first_real)
    hi = length - 1
    u = set(window(a_prev, w, first_real, hi)) | set(window(q, w, first_real, hi))
    return sorted(u)


def sparse_window_batch(rows, w, length, layout, target="max"):
    """GF3: every row's recomputed positions, padded to one count.

    rows: [B] tuples (a_prev, a_j) or (a_prev, a_j, first_real); w: radius; length: canvas length L.
    Each row starts from sparse_window_positions; rows with fewer positions than the target get the
    next-nearest positions to the row's QUERY (distance |p - q|; equal distances: lower position
    first, N5) among its real positions not yet included.  Returned sorted.
    target: "max" -> the largest union size in the batch (the fewest positions making rows equal);
            "nominal" -> 2 * (2w + 1), capped by each row's number of real positions.
    # READING: the spec says only "padded ... so every row recomputes the same number of positions";
    # "max" is the default here.
    Returns [B][N] sorted position lists.
    """
    unions, queries, los = [], [], []
    for row in rows:
        a_prev, a_j = row[0], row[1]
        f = row[2] if len(row) > 2 else 0
        unions.append(sparse_window_positions(a_prev, a_j, w, length, layout, f))
        queries.append(query_position(a_j, layout, f))
        los.append(f)
    if target == "max":
        n = max(len(u) for u in unions)
    elif target == "nominal":
        n = 2 * (2 * w + 1)
    else:
        raise ValueError("target must be max or nominal")
    out = []
    for u, q, f in zip(unions, queries, los):
        want = min(n, length - f)
        have = set(u)
        extra = [p for p in range(f, length) if p not in have]
        extra.sort(key=lambda p: (abs(p - q), p))
        i = 0
        while len(have) < want:
            have.add(extra[i])
            i += 1
        out.append(sorted(have))
    return out


# ---------------------------------------------------------------------------------------------------
# SPD1 / SPD2: draft trees
# ---------------------------------------------------------------------------------------------------

def rank_positions(confidences, positions):
    """SPD1 ranking: ``positions`` (the block's masked positions of S') sorted by decreasing
    confidences[p] (from l(S), one step stale), ties to the lowest position.

    confidences: dict or list indexed by position; positions: [n] ints.  Returns sorted list.
    """
    ps = sorted(positions)
    ps.sort(key=lambda p: -confidences[p])
    return ps


def draft_tree_node_count(width, depth):
    """SPD1: sum_{i<W} (D - i).  W1D1 -> 1, W2D2 -> 3, W3D3 -> 6."""
    validate_draft_tree(width, depth)
    total = 0
    for i in range(width):
        total += depth - i
    return total


def validate_draft_tree(width, depth, block_length=None):
    """SPD2 shape checks: width >= 1, depth >= 1, width <= depth, depth <= block_length - 1."""
    if width < 1:
        raise ValueError("width must be >= 1")
    if depth < 1:
        raise ValueError("depth must be >= 1")
    if width > depth:
        raise ValueError("width must be <= depth")
    if block_length is not None and depth > block_length - 1:
        raise ValueError("depth must be <= block_length - 1")


def draft_tree_nodes(ranked_positions, ranked_tokens, width, depth, alternatives="position"):
    """SPD1 draft tree nodes.

    ranked_positions: [n] positions, already ranked (rank_positions).
    ranked_tokens: dict position -> [tokens by decreasing probability] (order_tokens_by_probability).
    width W, depth D; alternatives: "position" | "token".
    Alternative i (0-based, i < W) is a chain of depth D - i:
      "position": depth-1 node commits (r_i, top-1 token of r_i);
      "token":    depth-1 node commits (r_0, (i+1)-th token of r_0);
    then each deeper node adds, with its top-1 token, the highest-ranked position the chain does not
    hold yet (spec SPD1 as clarified: a position alternative i >= 1 continues r_0, r_1, ... skipping r_i;
    a token alternative continues r_1, r_2, ...); when fewer positions (or fewer than i+1 tokens) exist,
    chains are truncated / alternatives dropped.
    Returns list of nodes, alternative by alternative, each chain by depth; a node is a dict
    {"alternative": i, "depth": d, "parent": index of parent node or -1 for S', "commits":
    [(position, token), ...] cumulative commits on top of S'}.
    """
    validate_draft_tree(width, depth)
    if alternatives not in ("position", "token"):
        raise ValueError("alternatives must be position or token")
    n = len(ranked_positions)
    nodes = []
    for i in range(width):
        if alternatives == "position":
            if i >= n:
                break
            start = i
            p0 = ranked_positions[i]
            first = (p0, ranked_tokens[p0][0])
        else:
            if n == 0:
                break
            start = 0
            p0 = ranked_positions[0]
            if i >= len(ranked_tokens[p0]):
                break
            first = (p0, ranked_tokens[p0][i])
        commits = [first]
        nodes.append({"alternative": i, "depth": 1, "parent": -1, "commits": list(commits)})
        rest = [r for r in range(n) if r != start]  # the ranks the chain does not hold yet, in rank order
        for d in range(2, depth - i + 1):
            if d - 2 >= len(rest):
                break
            p = ranked_positions[rest[d - 2]]
            commits.append((p, ranked_tokens[p][0]))
            nodes.append({"alternative": i, "depth": d, "parent": len(nodes) - 1,
                          "commits": list(commits)})
    return nodes


def apply_commits(state, commits):
    """A draft's canvas: ``state`` ([L] ints) with each (position, token) of ``commits`` written."""
    out = list(state)
    for p, t in commits:
        out[p] = t
    return out


# ---------------------------------------------------------------------------------------------------
# SPV1: the packing visibility mask
# ---------------------------------------------------------------------------------------------------

def packing_visibility(cache_length, window_positions, branches, lookahead_from=None, cache_valid=None):
    """SPV1 (and SP4's lookahead_from): which keys each packed query may attend to.

    cache_length: L cached entries (canvas positions 0..L-1); window_positions: [Q] cache positions the
    window recomputes (LLaDA: s .. s+Q-1; Dream: starting at s-1, as given); branches: K.
    Packed keys: [cache 0..L-1 | branch 0 (Q) | ... | branch K-1 (Q)]; packed queries: the K*Q branch
    tokens, branch-major (row k*Q + q is branch k, window index q).
    Without lookahead_from, query (k, q) sees: cache column c iff c is not a window slot (and
    cache_valid[c]); new column (k', q') iff k' == k (its own branch, bidirectionally, itself included).
    With lookahead_from = t (an index into the window, 0 <= t <= Q): window indices < t are the block's
    own queries, >= t the next blocks'.  A block query sees what R's dual step sees: the cache except
    window slots < t (so the stale cache at the lookahead slots), and only its branch's new keys with
    index < t.  A lookahead query sees the cache except all window slots, and all of its branch's new
    keys.
    # READING: lookahead_from is an offset into the window (the spec names it without a signature).
    cache_valid: [L] bools (attention mask of the row; False = left padding, never visible), default all.
    Returns [K*Q][L + K*Q] bools.
    """
    Q = len(window_positions)
    if cache_valid is None:
        cache_valid = [True] * cache_length
    t = Q if lookahead_from is None else lookahead_from
    if not (0 <= t <= Q):
        raise ValueError("lookahead_from must be in [0, Q]")
    in_block_slots = set(window_positions[:t])
    all_slots = set(window_positions)
    rows = []
    for k in range(branches):
        for q in range(Q):
            is_block_query = q < t
            row = []
            for c in range(cache_length):
                hidden = in_block_slots if is_block_query else all_slots
                row.append(bool(cache_valid[c]) and c not in hidden)
            for k2 in range(branches):
                for q2 in range(Q):
                    if k2 != k:
                        row.append(False)
                    elif is_block_query:
                        row.append(q2 < t)
                    else:
                        row.append(True)
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------
# SP2 / SP3: the acceptance walk
# ---------------------------------------------------------------------------------------------------

def acceptance_walk(root_state, node_states, node_parents, step_fn):
    """SP2: follow valid edges from S' through the draft tree.

    root_state: S' ([L] ints); node_states: [N] draft canvases; node_parents: [N] ints (-1 = S');
    step_fn(state) -> next state: R's deterministic step applied to the state's VERIFIED logits.
    An edge parent -> child is valid iff child == step_fn(parent) exactly; any verified node may be the
    child (spec SP2 as clarified: a state is a canvas, whatever alternative built it).  From the current
    node (starting at S'), the first node (in node order) equal to step_fn(current) is followed; the walk
    stops when no node matches or when the step commits nothing (step_fn(current) == current).
    Returns the followed node indices in order ([] when even S' -> first node fails); the decoder then
    continues from the last followed node (or S') with its verified logits.
    """
    followed = []
    state = root_state
    while True:
        target = step_fn(list(state))
        if list(target) == list(state):  # a step that commits nothing ends the walk (SP2)
            return followed
        nxt = None
        for i in range(len(node_states)):
            if list(node_states[i]) == list(target):
                nxt = i
                break
        if nxt is None:
            return followed
        followed.append(nxt)
        state = node_states[nxt]


def speculative_run(state, step_fn, build_tree, is_done, max_rounds=1000):
    """SP3 reference loop (one block, abstract): record R's transitions via speculation.

    state: S_0; step_fn(S) -> S' (R's step with l(S)); build_tree(S, S') -> (node_states, node_parents);
    is_done(S) -> bool (block has no mask).  Each round: S' = step(S) (recorded), stop if done, build the
    tree, walk it, record followed nodes, continue from the last one.  Returns (recorded states,
    rounds = number of verification rounds).  By SP3 the recorded states equal R's run S_1, S_2, ...
    """
    recorded = []
    rounds = 0
    while not is_done(state) and rounds < max_rounds:
        s1 = step_fn(state)
        recorded.append(s1)
        if is_done(s1):
            break
        nodes, parents = build_tree(state, s1)
        rounds += 1
        followed = acceptance_walk(s1, nodes, parents, step_fn)
        for i in followed:
            recorded.append(nodes[i])
        state = nodes[followed[-1]] if followed else s1
    return recorded, rounds


# ---------------------------------------------------------------------------------------------------
# Worked examples (data: examples/guidance.json)
# ---------------------------------------------------------------------------------------------------

def worked_examples():
    """Worked examples as data (examples/guidance.json, read by ``data.load``): list of dicts {name, clause,
    inputs, expected, note}.

    Every computed "expected" value was produced by the naive functions above (the data file's "#computed"
    names each call); exact values (Fractions, integers, position lists) are exact, floats are rounded to 6
    decimals for display only (tests should recompute them with a tolerance).
    """
    return load(__file__)
