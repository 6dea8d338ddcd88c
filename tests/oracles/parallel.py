"""Independent spec oracle for veridec's parallel decoding rules.

Written ONLY from spec/notation.md, spec/parallel.md (P1-P11), spec/fastdllm.md (FD3), spec/theorems.md
(T1, TC1), spec/sequential.md (SQ0, SQ1.3, SQ1.4) and the seed papers (seed 002 LocalLeap; seed 000
Appendix B.2 and Table 2). Nothing here is imported from, or was read from, veridec.

Form: the most naive code possible. Plain nested Python lists, explicit loops, ``math`` in float64 and
``fractions.Fraction`` where a decision is a rational formula. No torch, no numpy. Every random draw is an
explicit input (``gumbel_uniforms``, ``remask_uniforms``), so everything here is deterministic.

Shapes (nested lists, outermost first):
  logits          [B][W][V]  float       token-aligned logits of the step's window (N3, N6)
  canvas          [B][W]     int         the window's tokens
  candidates      [B][W]     bool        positions the step may commit (P11: masks before the block end)
  gumbel_uniforms [B][W][V]  float       u in (0, 1), float64 (only read when temperature > 0)
  remask_uniforms [B][W]     float       u in [0, 1), rounded to float32 then widened (remasking="random")
  dependency      [B][W][W]  float       DAPD's symmetrized dependency (``dapd_dependency``)
  attentions      [layer][B][H][Q][K]    per-layer attention weights of one forward
Positions reported by ``step`` are canvas positions ``offset + i`` (the window's index ``i`` plus the
window's canvas offset; offset 0 for the reference, whose window is the canvas).

Readings of points the spec leaves open are marked ``READING:`` in comments, each stating the reading it
takes.
"""

import math
import struct
from fractions import Fraction

from .data import load

INF = float("inf")
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------------------------------------
# Numerics (N4, N5, N7)
# ---------------------------------------------------------------------------------------------------------


def to_float32(x):
    """Round a Python float to the nearest float32 and widen it back (P1.2 "random": float32, widened).

    x: float -> float. Idempotent on values that are already float32.
    """
    return struct.unpack("f", struct.pack("f", x))[0]


def softmax64(row):
    """N4/N7: p = softmax(row) in float64.

    row: list[float] of length V (may contain -inf; at least one entry finite) -> list[float] of length V.
    Max-subtracted; the normaliser is a correctly rounded sum (math.fsum), so the result does not depend
    on the order of the vocabulary (equal multisets of logits give bit-identical probabilities).
    READING: the spec fixes float64 but not the reduction order; production reductions may differ by a few
    ulp, so tests compare probabilities with a tolerance, never bit for bit (except designed exact cases).
    """
    m = NEG_INF
    for v in row:
        if math.isnan(v):
            raise ValueError("softmax64 got a nan logit")
        m = max(m, v)
    if m in (NEG_INF, INF):
        raise ValueError(
            f"softmax64 needs at least one finite logit and no +inf, got max {m!r}"
        )
    ex = []
    for v in row:
        ex.append(math.exp(v - m))
    s = math.fsum(ex)
    out = []
    for e in ex:
        out.append(e / s)
    return out


def entropy_nats(p):
    """P6: H = -sum_v p(v) log p(v), natural log, float64, with 0 log 0 = 0.

    p: list[float] (a distribution) -> float >= 0. Terms with p(v) == 0 are skipped (0 log 0 = 0); the
    sum is correctly rounded (math.fsum), so a permuted distribution has exactly the same entropy.
    """
    terms = []
    for q in p:
        if q > 0.0:
            terms.append(q * math.log(q))
    return 0.0 - math.fsum(terms)


def kl_divergence(p_now, p_prev, clamp=1e-300):
    """P7: KL(p_t || p_{t-1}) = sum_v p_t(v) (log p_t(v) - log p_{t-1}(v)), probabilities clamped at 1e-300
    inside the logs (not in the weight p_t(v)).

    p_now, p_prev: list[float] of equal length V -> float.
    """
    terms = []
    for v in range(len(p_now)):
        a = p_now[v]
        b = p_prev[v]
        terms.append(a * (math.log(max(a, clamp)) - math.log(max(b, clamp))))
    return math.fsum(terms)


def argmax_first(values):
    """N5/SQ0.4: index of the first maximum (ties to the lowest index). values: list[float] -> int."""
    best = 0
    for i in range(1, len(values)):
        if values[i] > values[best]:
            best = i
    return best


def gumbel_scores(logit_row, u_row, temperature):
    """P1.1/SQ1.4: LLaDA's Gumbel-max scores g(l) = exp(l) / (-log u)^T in float64.

    logit_row, u_row: list[float] of length V; temperature: float > 0 -> list[float] of length V.
    Computed literally as written (not in log space). exp overflow gives +inf (as float64 tensors do);
    u must lie in [0, 1); u == 0 gives g = 0 (exp(l) / inf).
    """
    out = []
    for v in range(len(logit_row)):
        u = u_row[v]
        if not (0.0 <= u < 1.0):
            raise ValueError(f"gumbel uniform must lie in [0, 1), got {u!r}")
        try:
            num = math.exp(logit_row[v])
        except OverflowError:
            num = INF
        if u == 0.0:
            out.append(0.0)
            continue
        den = (-math.log(u)) ** temperature
        out.append(num / den)
    return out


def ranking_of(scores, candidates_row):
    """P1.3: candidates by decreasing score, ties to the lowest position (a stable sort, N5).

    scores: list[float] length W; candidates_row: list[bool] length W -> list[int] window indices.
    """
    idx = []
    for i in range(len(scores)):
        if candidates_row[i]:
            idx.append(i)
    return sorted(idx, key=lambda i: (-scores[i], i))


# ---------------------------------------------------------------------------------------------------------
# Rules: parameters, defaults, validation (P2-P9, "Hyperparameter checks"), presets (P10), FD3
# ---------------------------------------------------------------------------------------------------------

_ALIASES = {
    "topk": "topk",
    "conf": "topk",
    "threshold": "threshold",
    "factor": "factor",
    "quota": "quota",
    "localleap": "localleap",
    "eb": "eb",
    "entropybounded": "eb",
    "entropy_bounded": "eb",
    "eb-sampler": "eb",
    "klass": "klass",
    "dapd": "dapd",
}

_DEFAULTS = {
    "topk": {},
    "threshold": {"inclusive": True, "certified": False},
    "factor": {"inclusive": True, "last_rank": "commit"},
    "quota": {},
    "localleap": {
        "kappa": 0.9,
        "radius": 4,
        "tau": 0.75,
        "inclusive": True,
        "certified": False,
    },
    "eb": {},
    "klass": {},
    "dapd": {
        "tau_min": 0.005,
        "tau_max": 0.05,
        "top_layers": 0.3,
        "late_confidence": 0.9,
    },
}

_REQUIRED = {
    "topk": ["k"],
    "threshold": ["threshold"],
    "factor": ["factor"],
    "quota": ["steps_per_block"],
    "localleap": [],
    "eb": ["gamma"],
    "klass": ["confidence", "kl_threshold", "history"],
    "dapd": ["scale"],
}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _check(name, value, ok, rng):
    if not ok:
        raise ValueError(f"{name} must lie in {rng}, got {value!r}")


def make_rule(rule):
    """Normalise and validate a rule dict ("Hyperparameter checks" table of spec/parallel.md).

    rule: dict with key "rule" in {topk, threshold, factor, quota, localleap, eb (entropy_bounded), klass,
    dapd} and the rule's parameters (spec names: k; threshold, inclusive, certified; factor, inclusive,
    last_rank; steps_per_block; kappa, radius, tau, inclusive, certified; gamma; confidence, kl_threshold,
    history; scale, tau_min, tau_max, top_layers, late_confidence) -> a new dict with defaults filled.
    Raises ValueError("<param> must lie in <range>, got <value>").
    """
    name = str(rule.get("rule", "")).lower()
    if name not in _ALIASES:
        raise ValueError(f"unknown rule {rule.get('rule')!r}")
    name = _ALIASES[name]
    out = dict(_DEFAULTS[name])
    for key, value in rule.items():
        if key != "rule":
            out[key] = value
    out["rule"] = name
    for key in _REQUIRED[name]:
        if key not in out:
            raise ValueError(f"{key} is required for rule {name}")
    if name == "topk":
        _check("k", out["k"], _is_int(out["k"]) and out["k"] >= 1, "[1, inf]")
    elif name == "threshold":
        t = out["threshold"]
        _check("threshold", t, 0 < t <= 1, "(0, 1]")
    elif name == "factor":
        f = out["factor"]
        _check("factor", f, 0 < f < INF, "(0, inf)")
        _check(
            "last_rank",
            out["last_rank"],
            out["last_rank"] in ("commit", "reject"),
            "{commit, reject}",
        )
    elif name == "quota":
        s = out["steps_per_block"]
        _check("steps_per_block", s, _is_int(s) and s >= 1, "[1, inf]")
    elif name == "localleap":
        _check("kappa", out["kappa"], 0 < out["kappa"] <= 1, "(0, 1]")
        _check("tau", out["tau"], 0 < out["tau"] <= 1, "(0, 1]")
        _check("kappa", out["kappa"], out["kappa"] >= out["tau"], "[tau, 1]")
        _check(
            "radius",
            out["radius"],
            _is_int(out["radius"]) and out["radius"] >= 0,
            "[0, inf]",
        )
    elif name == "eb":
        _check("gamma", out["gamma"], 0 <= out["gamma"] < INF, "[0, inf)")
    elif name == "klass":
        _check("confidence", out["confidence"], 0 <= out["confidence"] < 1, "[0, 1)")
        _check(
            "kl_threshold",
            out["kl_threshold"],
            0 <= out["kl_threshold"] < INF,
            "[0, inf)",
        )
        _check(
            "history",
            out["history"],
            _is_int(out["history"]) and out["history"] >= 1,
            "[1, inf]",
        )
    elif name == "dapd":
        _check("scale", out["scale"], 0 < out["scale"] < INF, "(0, inf)")
        _check("tau_min", out["tau_min"], 0 <= out["tau_min"] < INF, "[0, inf)")
        _check(
            "tau_max",
            out["tau_max"],
            out["tau_min"] <= out["tau_max"] < INF,
            "[tau_min, inf)",
        )
        _check("top_layers", out["top_layers"], 0 < out["top_layers"] <= 1, "(0, 1]")
        _check(
            "late_confidence",
            out["late_confidence"],
            0 <= out["late_confidence"] <= 1,
            "[0, 1]",
        )
    return out


PRESETS = {
    # P10, seed 000 Table 2 and seed 002 section 4.
    "sequential": {"rule": "topk", "k": 1},
    "conf-hq": {"rule": "topk", "k": 4},
    "conf-ht": {"rule": "topk", "k": 8},
    "fastdllm": {"rule": "threshold", "threshold": 0.9},
    "fastdllm-hq": {"rule": "threshold", "threshold": 0.8},
    "fastdllm-ht": {"rule": "threshold", "threshold": 0.6},
    "factor": {
        "rule": "factor",
        "factor": 1.0,
        "inclusive": True,
        "last_rank": "commit",
    },
    "klass-hq": {"rule": "klass", "confidence": 0.4, "kl_threshold": 1.5, "history": 1},
    "klass-ht": {
        "rule": "klass",
        "confidence": 0.25,
        "kl_threshold": 1.0,
        "history": 1,
    },
    "eb-hq": {"rule": "eb", "gamma": 4.0},
    "eb-ht": {"rule": "eb", "gamma": 16.0},
    "dapd-hq": {"rule": "dapd", "scale": 4.0},
    "dapd-ht": {"rule": "dapd", "scale": 16.0},
    "localleap": {"rule": "localleap", "kappa": 0.9, "radius": 4, "tau": 0.75},
    "localleap-dream": {"rule": "localleap", "kappa": 0.9, "radius": 4, "tau": 0.8},
    "fastdllm-certified": {"rule": "threshold", "threshold": 0.9, "certified": True},
    "fastdllm-ht-certified": {"rule": "threshold", "threshold": 0.6, "certified": True},
    "localleap-certified": {
        "rule": "localleap",
        "kappa": 0.9,
        "radius": 4,
        "tau": 0.75,
        "certified": True,
    },
}


def preset(name):
    """P10: the named operating point as a normalised rule dict; unknown names raise ValueError listing
    the names. name: str -> dict."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}"
        )
    return make_rule(PRESETS[name])


def fastdllm_rule(
    threshold=None,
    factor=None,
    steps_per_block=None,
    *,
    inclusive=True,
    last_rank="commit",
):
    """FD3: the rule Fast-dLLM's entry points use. factor given -> Factor (P4); threshold given ->
    Threshold (P3); neither -> Quota (P9, needs steps_per_block = steps / number of blocks); both ->
    ValueError (the official code silently ignores the threshold; ours refuses).

    threshold: float|None, factor: float|None, steps_per_block: int|None -> normalised rule dict.
    """
    if threshold is not None and factor is not None:
        raise ValueError("threshold and factor cannot be given together")
    if factor is not None:
        return make_rule(
            {
                "rule": "factor",
                "factor": factor,
                "inclusive": inclusive,
                "last_rank": last_rank,
            }
        )
    if threshold is not None:
        return make_rule(
            {"rule": "threshold", "threshold": threshold, "inclusive": inclusive}
        )
    if steps_per_block is None:
        raise ValueError("steps_per_block is required for the quota rule")
    return make_rule({"rule": "quota", "steps_per_block": steps_per_block})


# ---------------------------------------------------------------------------------------------------------
# Count rules on sorted confidences (P2, P3, P4, P9) and the certificate (TC1)
# ---------------------------------------------------------------------------------------------------------


def topk_count(n_candidates, k):
    """P2: k_b = min(k, N_b). n_candidates: int, k: int -> int."""
    return min(k, n_candidates)


def threshold_count(sorted_conf, threshold, inclusive=True):
    """P3/FD3: the top-1 and every other candidate with c >= tau (inclusive) or c > tau (strict):
    k_b = min(max(1, #{passing}), N_b).

    sorted_conf: list[float], the candidates' confidences in ranking order (non-increasing) -> int.
    Direct float64 comparison (no arithmetic: exact on the given floats).
    """
    n = len(sorted_conf)
    passing = 0
    for c in sorted_conf:
        if (c >= threshold) if inclusive else (c > threshold):
            passing += 1
    return min(max(1, passing), n)


def factor_tau(n, factor, exact=False):
    """P4: tau_n = 1 - f/(n + 1) for the 1-based rank n.

    READING: evaluated literally in float64 (fl(1 - fl(f/(n+1)))) by default, as the official formula
    reads; exact=True gives the rational value (Fraction of the float f), i.e. the paper's
    (n + 1)(1 - c_n) <= f / < f evaluated exactly. They differ at n = 2, f = 1 (tau_2 is 2/3, not a float).
    """
    if exact:
        return 1 - Fraction(factor) / (n + 1)
    return 1.0 - factor / (n + 1)


def factor_count(sorted_conf, factor, inclusive=True, last_rank="commit", exact=False):
    """P4: Fast-dLLM's factor rule (get_transfer_index_dynamic).

    sorted_conf: list[float] non-increasing (ranks 1..N); factor: float > 0; inclusive: c_n >= tau_n
    (else >); last_rank: "commit" (official: when the first failing rank is the last rank N >= 2, all N
    commit) or "reject" (k = N - 1 there). Rank 1 is forced. k = n* - 1 for the first failing rank n*,
    N when none fails. -> int.
    """
    n_total = len(sorted_conf)
    if n_total == 0:
        return 0
    first_fail = None
    for n in range(2, n_total + 1):
        c = sorted_conf[n - 1]
        tau_n = factor_tau(n, factor, exact)
        cc = Fraction(c) if exact else c
        passes = (cc >= tau_n) if inclusive else (cc > tau_n)
        if not passes:
            first_fail = n
            break
    if first_fail is None:
        return n_total
    if first_fail == n_total and last_rank == "commit":
        return n_total
    return first_fail - 1


def quota_count(masks_at_block_start, steps_per_block, block_step, n_candidates):
    """P9/SQ1.3/FD3: LLaDA's quota k = min(floor(M/S) + [i' < M mod S], N) with i' = min(i, S - 1).

    masks_at_block_start (M): int, the row's masks inside the block at its start; steps_per_block (S):
    int >= 1; block_step (i): int, 0-based step index within the block (READING: 0-based, as LLaDA's
    ``num_transfer_tokens[:, i]``); n_candidates (N): int -> int (can be 0).
    Past the schedule the last quota floor(M/S) + [S-1 < M mod S] = floor(M/S) repeats (0 when M < S).
    """
    m = masks_at_block_start
    s = steps_per_block
    i_eff = min(block_step, s - 1)
    q = m // s
    if i_eff < m % s:
        q += 1
    return min(q, n_candidates)


def certified_prefix_length(probs_in_order):
    """TC1 (spec/theorems.md, T1): the longest prefix, in the rule's commit order, whose realized errors
    e_j = 1 - p_j(x_hat_j) satisfy sum_{i<=k} e_(i) + max_{i<=k} e_(i) < 1 (strict), and at least 1.

    probs_in_order: list[float], the model's (un-tempered) probability of each selected position's
    proposed token, in commit order -> int in [min(1, n), n].
    Evaluated exactly with Fractions of the float64 probabilities. (For p >= 1/2, 1 - p and every partial
    sum below 1 are exact in float64 (Sterbenz; multiples of 2^-53), and p < 1/2 fails anyway, so a float64
    evaluation gives the same answer.)
    READING: the spec writes "+ e_(k)" ("in confidence order e_(k) is the prefix's largest error"); that is
    only the largest error when the order is by p itself. With remasking="random" (order by random scores)
    or any order not by p, we use the prefix's maximum error, which is what T1 needs.
    """
    n = len(probs_in_order)
    if n == 0:
        return 0
    best = 0
    total = Fraction(0)
    largest = Fraction(0)
    for j in range(n):
        e = 1 - Fraction(probs_in_order[j])
        total += e
        largest = max(largest, e)
        if total + largest < 1:
            best = j + 1
    return max(best, 1)


# ---------------------------------------------------------------------------------------------------------
# Set rules (P5-P8)
# ---------------------------------------------------------------------------------------------------------


def localleap_select(ranking, conf, kappa, radius, tau, inclusive=True, offset=0):
    """P5 (seed 002 section 3): anchors = candidates with c >= kappa; neighbours = candidates with c >= tau
    within |i - a| <= radius canvas positions of some anchor; commit anchors, neighbours and the top-1.
    inclusive=False uses > for both comparisons.

    ranking: list[int] window indices of the candidates in ranking order; conf: list[float] length W;
    offset: the window's canvas offset (distances are canvas distances, so committed positions between
    two candidates count; the offset cancels in |i - a|) -> list[int] selected window indices in ranking
    order. Empty ranking -> [].
    """
    if not ranking:
        return []

    def ge(c, t):
        return (c >= t) if inclusive else (c > t)

    anchors = []
    for i in ranking:
        if ge(conf[i], kappa):
            anchors.append(i)
    selected = []
    for i in ranking:
        take = False
        if i == ranking[0]:
            take = True
        if ge(conf[i], kappa):
            take = True
        if ge(conf[i], tau):
            for a in anchors:
                if abs((offset + i) - (offset + a)) <= radius:
                    take = True
        if take:
            selected.append(i)
    return selected


def eb_count(sorted_entropies, gamma):
    """P6: EB-Sampler's count on the candidates' entropies sorted increasing: the j-th commits when
    H_(1) + ... + H_(j-1) <= gamma (the prefix's sum excluding its largest entry, which is its last);
    the lowest-entropy candidate always commits.

    sorted_entropies: list[float] non-decreasing (nats); gamma: float >= 0 -> int.
    The running sum is a plain float64 left-to-right sum in entropy order (a cumulative sum).
    """
    n = len(sorted_entropies)
    if n == 0:
        return 0
    k = 1
    running = 0.0
    for j in range(2, n + 1):
        running = running + sorted_entropies[j - 2]
        if running <= gamma:
            k = j
        else:
            break
    return k


def klass_new_state(batch, length):
    """P7: KLASS's per-decode memory, one entry per canvas position of every row.

    batch: int B, length: int L -> dict {"prev": [B][L] list[float]|None (p_{t-1}), "counter": [B][L]
    int, "seen": [B][L] bool}. Mutated in place by ``step`` (rule klass).
    """
    prev = []
    counter = []
    seen = []
    for _ in range(batch):
        prev.append([None] * length)
        counter.append([0] * length)
        seen.append([False] * length)
    return {"prev": prev, "counter": counter, "seen": seen}


def klass_update(state, b, position, p_now, kl_threshold):
    """P7: update one canvas position's history with this step's distribution.

    state: from klass_new_state; b: row; position: canvas position; p_now: list[float] length V (the
    model's un-tempered distribution, P1.3); kl_threshold: eps. counter <- counter + 1 when the position
    was seen before and KL(p_t || p_{t-1}) < eps (strict), else 0; then p_{t-1} <- p_t, seen <- True.
    -> the KL (float) or None on the first observation.
    """
    kl = None
    if state["seen"][b][position]:
        kl = kl_divergence(p_now, state["prev"][b][position])
        if kl < kl_threshold:
            state["counter"][b][position] = state["counter"][b][position] + 1
        else:
            state["counter"][b][position] = 0
    else:
        state["counter"][b][position] = 0
    state["prev"][b][position] = list(p_now)
    state["seen"][b][position] = True
    return kl


def klass_select(ranking, conf, counters, confidence, history):
    """P7: candidates with c > c0 (strict) and counter >= h commit, in ranking order; if none qualifies,
    the top-1 alone.

    ranking: list[int] window indices; conf: list[float] length W; counters: list[int] length W (this
    step's counters, after the update, by window index) -> list[int] window indices in ranking order.
    READING: when some candidate qualifies the top-1 is NOT added unless it qualifies itself (P7 and seed
    000 B.2: "if no token qualifies, the single most confident token is unmasked"); P1's "(its top-ranked
    one)" could be read as forcing it; we follow P7.
    """
    if not ranking:
        return []
    out = []
    for i in ranking:
        if conf[i] > confidence and counters[i] >= history:
            out.append(i)
    if not out:
        out = [ranking[0]]
    return out


def dapd_num_layers(num_layers, top_layers, reading="float"):
    """P8: the number of deepest layers DAPD reads, max(1, ceil(top_layers * num_layers)).

    num_layers: int; top_layers: float in (0, 1]; reading:
      "float"   ceil of the float64 product (what ``math.ceil(top_layers * num_layers)`` computes; default),
      "decimal" ceil of the exact product with top_layers read as its shortest decimal (0.28 -> 28/100),
      "binary"  ceil of the exact product with the float's binary value (0.1 -> 0.1000000000000000055...).
    READING: the three differ (0.28 * 25: 8 / 7 / 8; 0.1 * 10: 1 / 1 / 2); they agree for 0.3 (the
    preset). -> int.
    """
    if reading == "float":
        n = math.ceil(top_layers * num_layers)
    elif reading == "decimal":
        n = math.ceil(Fraction(repr(top_layers)) * num_layers)
    elif reading == "binary":
        n = math.ceil(Fraction(top_layers) * num_layers)
    else:
        raise ValueError(f"reading must be float, decimal or binary, got {reading!r}")
    return max(1, n)


def dapd_dependency(
    attentions,
    num_layers,
    top_layers,
    query_of_token,
    key_of_token=None,
    *,
    layers_reading="float",
):
    """P8: DAPD's dependency matrix, symmetrized.

    attentions: [layer][B][H][Q][K] float (the forward's per-layer attention weights, layer 0 shallowest);
    num_layers: int (= len(attentions)); top_layers: float; query_of_token: [W] or [B][W] int, the query
    row that scores window token i (i - logit_shift; Dream's first real token uses its own position, N6);
    key_of_token: [W] or [B][W] int, the key column of token k's query position (default: query_of_token,
    as in a full forward where queries and keys index the same canvas) -> [B][W][W] float.
    The deepest n = dapd_num_layers(...) layers (the last n entries) are averaged over layers and all heads
    in float64 (one mean over the n*H matrices, correctly rounded sum); A[i][k] = mean attention from token
    i's query to the key at token k's query position; returned S = (A + A^T) / 2.
    """
    if num_layers is None:
        num_layers = len(attentions)
    if len(attentions) != num_layers:
        raise ValueError(
            f"attentions has {len(attentions)} layers, num_layers is {num_layers}"
        )
    n_sel = dapd_num_layers(num_layers, top_layers, layers_reading)
    layers = list(range(num_layers - n_sel, num_layers))
    batch = len(attentions[0])
    out = []
    for b in range(batch):
        q_of = (
            query_of_token[b]
            if isinstance(query_of_token[0], (list, tuple))
            else query_of_token
        )
        kk = query_of_token if key_of_token is None else key_of_token
        k_of = kk[b] if isinstance(kk[0], (list, tuple)) else kk
        w = len(q_of)
        a = []
        for i in range(w):
            row = []
            for k in range(w):
                vals = []
                for layer in layers:
                    for head in attentions[layer][b]:
                        vals.append(float(head[q_of[i]][k_of[k]]))
                row.append(math.fsum(vals) / len(vals))
            a.append(row)
        sym = []
        for i in range(w):
            row = []
            for k in range(w):
                row.append((a[i][k] + a[k][i]) / 2)
            sym.append(row)
        out.append(sym)
    return out


def dapd_threshold(scale, tau_min, tau_max, block_masks, block_length, exact=False):
    """P8: tau_b = s * (tau_min + (tau_max - tau_min) * progress_b), progress_b = 1 - block_masks_b /
    block_length (masks left in the current block before this step; READING: progress per block).

    Floats in, float64 evaluated literally in that order (exact=True: Fractions of the inputs) -> float
    (or Fraction).
    """
    if exact:
        progress = 1 - Fraction(block_masks, block_length)
        return Fraction(scale) * (
            Fraction(tau_min) + (Fraction(tau_max) - Fraction(tau_min)) * progress
        )
    progress = 1.0 - block_masks / block_length
    return scale * (tau_min + (tau_max - tau_min) * progress)


def dapd_select(
    ranking, conf, dependency_row, tau_b, late_confidence, block_masks, block_length
):
    """P8: greedy independent set in ranking order, then the late rule.

    ranking: list[int] window indices; conf: list[float] W; dependency_row: [W][W] float (symmetrized; it
    is symmetrized again here, which is the identity on a symmetric matrix); tau_b: float. An edge joins
    two distinct candidates when (d[i][j] + d[j][i]) / 2 > tau_b (strict). Walking the ranks, a candidate
    joins when it has no edge to one already selected (the top-1 always joins). Late rule: when
    2 * block_masks < block_length, every candidate with c > late_confidence (strict) commits too.
    READING: the late candidates are added after the walk; they do not block others during the walk.
    -> list[int] window indices in ranking order.
    """
    selected = []
    for i in ranking:
        free = True
        for j in selected:
            if i != j and (dependency_row[i][j] + dependency_row[j][i]) / 2 > tau_b:
                free = False
        if free:
            selected.append(i)
    chosen = set(selected)
    if 2 * block_masks < block_length:
        for i in ranking:
            if conf[i] > late_confidence:
                chosen.add(i)
    out = []
    for i in ranking:
        if i in chosen:
            out.append(i)
    return out


# ---------------------------------------------------------------------------------------------------------
# The step (P1) and the decoders' candidate set (P11)
# ---------------------------------------------------------------------------------------------------------


def proposal_and_confidence(
    logits,
    canvas,
    candidates,
    *,
    temperature=0.0,
    remasking="low_confidence",
    gumbel_uniforms=None,
    remask_uniforms=None,
):
    """P1.1-P1.3 (FD2, SQ1.4): proposal, confidence, the un-tempered distribution and choice logits.

    logits [B][W][V] float; canvas [B][W] int; candidates [B][W] bool; temperature >= 0; remasking in
    {"low_confidence", "random"}; gumbel_uniforms [B][W][V] (required when temperature > 0; drawn for every
    position, candidate or not); remask_uniforms [B][W] (required for "random").
    -> dict with "proposal" [B][W] int (x_hat; = canvas off the candidates), "confidence" [B][W] float
    (-inf off the candidates), "p" [B][W][V] (softmax of float64 logits, un-tempered), "choice_logits"
    [B][W] (l[x_hat] at T = 0, log g(l)[x_hat] otherwise; off-candidate entries are those of the argmax,
    not of the canvas token).
    """
    if temperature < 0:
        raise ValueError(f"temperature must lie in [0, inf), got {temperature!r}")
    if remasking not in ("low_confidence", "random"):
        raise ValueError(
            f"remasking must lie in {{low_confidence, random}}, got {remasking!r}"
        )
    batch = len(logits)
    proposal, confidence, probs, choice = [], [], [], []
    for b in range(batch):
        prow, crow, pr, chrow = [], [], [], []
        for i in range(len(logits[b])):
            l = [float(v) for v in logits[b][i]]
            if temperature == 0:
                g = l
                tok = argmax_first(g)
                chosen_logit = l[tok]
            else:
                if gumbel_uniforms is None:
                    raise ValueError(
                        "gumbel_uniforms are required when temperature > 0"
                    )
                g = gumbel_scores(l, gumbel_uniforms[b][i], temperature)
                tok = argmax_first(g)
                chosen_logit = math.log(g[tok]) if g[tok] > 0 else NEG_INF
            p = softmax64(l)
            if remasking == "low_confidence":
                c = p[tok]
            else:
                if remask_uniforms is None:
                    raise ValueError(
                        "remask_uniforms are required for remasking='random'"
                    )
                c = to_float32(float(remask_uniforms[b][i]))
            if not candidates[b][i]:
                tok = canvas[b][i]
                c = NEG_INF
            prow.append(tok)
            crow.append(c)
            pr.append(p)
            chrow.append(chosen_logit)
        proposal.append(prow)
        confidence.append(crow)
        probs.append(pr)
        choice.append(chrow)
    return {
        "proposal": proposal,
        "confidence": confidence,
        "p": probs,
        "choice_logits": choice,
    }


def step_details(
    rule,
    logits,
    canvas,
    candidates,
    *,
    temperature=0.0,
    remasking="low_confidence",
    gumbel_uniforms=None,
    remask_uniforms=None,
    block_step=0,
    block_masks_at_start=None,
    block_masks=None,
    block_length=1,
    dependency=None,
    state=None,
    offset=0,
    mask_id=None,
    exact=False,
):
    """P1: one parallel step, with everything it computed.

    Same arguments as ``step``. Returns a dict:
      "commits"    [B] list of (canvas position, token, score) in commit order,
      "selected"   [B] list[int] window indices in commit order (before any mask_id filtering),
      "ranking"    [B] list[int] window indices of the candidates by decreasing confidence,
      "order_scores" [B][W] the rule's ranking score (c; -H for EB; -inf off candidates),
      "gap"        [B] float, the selection gap (SQ0.1): weakest committed score minus strongest score of a
                   candidate left uncommitted (+inf when none is left; None when nothing was committed),
      "canvas"     [B][W] the window after the commits,
      plus "proposal", "confidence", "p", "choice_logits" from proposal_and_confidence, and "klass_kl"
      [B][W] (KL per window position, None on a first observation) for KLASS.
    """
    r = make_rule(rule)
    view = proposal_and_confidence(
        logits,
        canvas,
        candidates,
        temperature=temperature,
        remasking=remasking,
        gumbel_uniforms=gumbel_uniforms,
        remask_uniforms=remask_uniforms,
    )
    xhat = view["proposal"]
    conf = view["confidence"]
    probs = view["p"]
    batch = len(logits)
    name = r["rule"]
    if name == "dapd" and dependency is None:
        raise ValueError("DAPD needs the dependency matrix (dapd_dependency)")
    if name == "klass" and state is None:
        raise ValueError("KLASS needs its per-decode state (klass_new_state)")
    if name in ("quota",) and block_masks_at_start is None:
        raise ValueError("Quota needs block_masks_at_start")
    if name == "dapd" and block_masks is None:
        raise ValueError("DAPD needs block_masks")

    klass_kl = None
    if name == "klass":
        # P7: first update every window position (committed or not), then select; a row without any
        # candidate takes no step (its block is done while the batch decodes others, P11): not updated.
        klass_kl = []
        for b in range(batch):
            row = []
            if any(candidates[b]):
                for i in range(len(logits[b])):
                    row.append(
                        klass_update(state, b, offset + i, probs[b][i], r["kl_threshold"])
                    )
            klass_kl.append(row)

    all_commits, all_selected, all_rankings, all_scores, gaps, new_canvas = (
        [],
        [],
        [],
        [],
        [],
        [],
    )
    for b in range(batch):
        w = len(logits[b])
        ranking = ranking_of(conf[b], candidates[b])
        order_scores = list(conf[b])
        if name == "topk":
            sel = ranking[: topk_count(len(ranking), r["k"])]
        elif name == "threshold":
            sorted_c = [conf[b][i] for i in ranking]
            sel = ranking[: threshold_count(sorted_c, r["threshold"], r["inclusive"])]
            if r["certified"]:
                sel = sel[
                    : certified_prefix_length([probs[b][i][xhat[b][i]] for i in sel])
                ]
        elif name == "factor":
            sorted_c = [conf[b][i] for i in ranking]
            sel = ranking[
                : factor_count(
                    sorted_c, r["factor"], r["inclusive"], r["last_rank"], exact
                )
            ]
        elif name == "quota":
            sel = ranking[
                : quota_count(
                    block_masks_at_start[b],
                    r["steps_per_block"],
                    block_step,
                    len(ranking),
                )
            ]
        elif name == "localleap":
            sel = localleap_select(
                ranking,
                conf[b],
                r["kappa"],
                r["radius"],
                r["tau"],
                r["inclusive"],
                offset,
            )
            if r["certified"]:
                sel = sel[
                    : certified_prefix_length([probs[b][i][xhat[b][i]] for i in sel])
                ]
        elif name == "eb":
            ent = [NEG_INF] * w
            for i in range(w):
                if candidates[b][i]:
                    ent[i] = entropy_nats(probs[b][i])
            by_entropy = sorted(
                [i for i in range(w) if candidates[b][i]], key=lambda i: (ent[i], i)
            )
            sel = by_entropy[: eb_count([ent[i] for i in by_entropy], r["gamma"])]
            order_scores = [
                (-ent[i] if candidates[b][i] else NEG_INF) for i in range(w)
            ]
        elif name == "klass":
            counters = [state["counter"][b][offset + i] for i in range(w)]
            sel = klass_select(
                ranking, conf[b], counters, r["confidence"], r["history"]
            )
        elif name == "dapd":
            tau_b = dapd_threshold(
                r["scale"],
                r["tau_min"],
                r["tau_max"],
                block_masks[b],
                block_length,
                exact,
            )
            dep = dependency[b]
            if exact:
                dep = [[Fraction(v) for v in row] for row in dep]
            sel = dapd_select(
                ranking,
                conf[b],
                dep,
                tau_b,
                r["late_confidence"],
                block_masks[b],
                block_length,
            )
        else:
            raise AssertionError(name)
        commits = []
        for i in sel:
            tok = xhat[b][i]
            if mask_id is not None and tok == mask_id:
                continue  # proposed the mask token: stays masked, not a mask->token change (SQ0.1)
            commits.append((offset + i, tok, order_scores[i]))
        chosen = set(sel)
        left = [
            order_scores[i] for i in range(w) if candidates[b][i] and i not in chosen
        ]
        if not sel:
            gap = None
        elif not left:
            gap = INF
        else:
            gap = min(order_scores[i] for i in sel) - max(left)
        row_canvas = list(canvas[b])
        for i in sel:
            row_canvas[i] = xhat[b][i]
        all_commits.append(commits)
        all_selected.append(sel)
        all_rankings.append(ranking)
        all_scores.append(order_scores)
        gaps.append(gap)
        new_canvas.append(row_canvas)
    out = dict(view)
    out.update(
        {
            "commits": all_commits,
            "selected": all_selected,
            "ranking": all_rankings,
            "order_scores": all_scores,
            "gap": gaps,
            "canvas": new_canvas,
            "klass_kl": klass_kl,
        }
    )
    return out


def step(rule, logits, canvas, candidates, **options):
    """P1: one parallel decoding step; returns per row the commits in commit order. The keyword options and
    their defaults are ``step_details``'s.

    rule: dict (see make_rule), e.g. {"rule": "threshold", "threshold": 0.9, "inclusive": True,
      "certified": False};
    logits [B][W][V] float; canvas [B][W] int; candidates [B][W] bool;
    temperature: float >= 0; remasking: "low_confidence" | "random";
    gumbel_uniforms [B][W][V] float (T > 0); remask_uniforms [B][W] float ("random");
    block_step: int (0-based step within the block; Quota); block_masks_at_start [B] int (Quota's M_b);
    block_masks [B] int (masks left in the block before this step; DAPD); block_length: int (DAPD);
    dependency [B][W][W] float (DAPD, from dapd_dependency); state: klass_new_state(B, L) (KLASS; mutated);
    offset: int, the window's canvas offset; mask_id: int|None (when given, a selected position whose
    proposal is the mask token is left out: it stays masked); exact: bool (Fraction evaluation of the
    factor rule's tau_n and DAPD's threshold and edges).
    -> [B] list of (position, token, score): canvas position, proposed token, the rule's ranking score
    (the confidence c; -H for EB-Sampler), in the rule's commit order.
    """
    return step_details(rule, logits, canvas, candidates, **options)["commits"]


def decoder_candidates(canvas, mask_id, block_end, attention_mask=None):
    """P11 (SQ1.4.5-6, FD1): the decoders' candidates: every masked position before the block's end
    (prompt masks and leftovers of earlier blocks included), padding excluded (N2).

    canvas [B][L] int; mask_id: int; block_end: int (e, exclusive); attention_mask [B][L] 0/1 or None
    -> [B][L] bool.
    """
    out = []
    for b in range(len(canvas)):
        row = []
        for i in range(len(canvas[b])):
            real = attention_mask is None or attention_mask[b][i] == 1
            row.append(bool(real and canvas[b][i] == mask_id and i < block_end))
        out.append(row)
    return out


def count_masks(row, mask_id, start, end, attention_mask_row=None):
    """Masks of one canvas row in [start, end) (padding excluded). row: list[int] -> int."""
    n = 0
    for i in range(start, end):
        if row[i] == mask_id and (
            attention_mask_row is None or attention_mask_row[i] == 1
        ):
            n += 1
    return n


def run_steps(rule, steps, batch, length):
    """Replays several P1 steps sharing one KLASS state (P7: the state persists across steps and blocks).

    rule: dict; steps: list of dicts of ``step`` keyword arguments (each with logits, canvas, candidates
    and any other keyword); batch, length: the state's shape -> list (per step) of ``step`` results.
    """
    state = klass_new_state(batch, length)
    out = []
    for kw in steps:
        kw = dict(kw)
        logits = kw.pop("logits")
        canvas = kw.pop("canvas")
        candidates = kw.pop("candidates")
        out.append(step(rule, logits, canvas, candidates, state=state, **kw))
    return out


def decode_reference(
    model,
    prompt,
    *,
    rule,
    gen_length,
    block_length,
    mask_id,
    attention_mask=None,
    temperature=0.0,
    remasking="low_confidence",
    draw=None,
    logit_shift=0,
):
    """P11 reference decoder, naive: one full forward of the canvas per step, blocks left to right.

    model: callable(canvas [B][L], attention_mask [B][L]) -> logits [B][L][V] (token-aligned), or a tuple
      (logits, attentions [layer][B][H][L][L]) (DAPD needs the attentions);
    prompt [B][P] int (left-padded; attention_mask [B][P] 0/1, None = all real);
    draw: callable(kind, shape) -> nested lists of uniforms; kind "gumbel" shape (B, L, V) when
      temperature > 0, then kind "remask" shape (B, L) for remasking="random" (READING: that order, LLaDA's);
    logit_shift: 0 (LLaDA) or 1 (Dream; DAPD's query of token i is max(i - 1, f_b)).
    -> (canvas [B][P + gen_length], trace, counters): trace is a list of steps, each [B] list of
    (position, token, score) that went from mask to token; counters {"full_forwards", "query_positions"}.
    Stall (P11): before each forward, a block that still has a mask after more steps than its budget (max over
    rows of the masks before e at its start, + steps_per_block for Quota) raises RuntimeError: at most
    budget + 1 forwards, and a block finishing on the last of them completes.
    """
    r = make_rule(rule)
    if not (_is_int(gen_length) and gen_length >= 1):
        raise ValueError(f"gen_length must lie in [1, inf], got {gen_length!r}")
    if not (_is_int(block_length) and block_length >= 1) or gen_length % block_length:
        raise ValueError(
            f"block_length must be an integer >= 1 dividing gen_length, got {block_length!r}"
        )
    batch = len(prompt)
    p_len = len(prompt[0])
    canvas = [list(row) + [mask_id] * gen_length for row in prompt]
    if attention_mask is None:
        am = [[1] * (p_len + gen_length) for _ in range(batch)]
    else:
        am = [list(a) + [1] * gen_length for a in attention_mask]
    length = p_len + gen_length
    first_real = []
    for b in range(batch):
        f = 0
        while f < length and am[b][f] == 0:
            f += 1
        first_real.append(f)
    state = klass_new_state(batch, length) if r["rule"] == "klass" else None
    trace = []
    counters = {"full_forwards": 0, "query_positions": 0}
    for blk in range(gen_length // block_length):
        s = p_len + blk * block_length
        e = s + block_length
        at_start = [count_masks(canvas[b], mask_id, s, e, am[b]) for b in range(batch)]
        budget = max(count_masks(canvas[b], mask_id, 0, e, am[b]) for b in range(batch))
        if r["rule"] == "quota":
            budget += r["steps_per_block"]
        steps = 0
        while any(
            count_masks(canvas[b], mask_id, s, e, am[b]) > 0 for b in range(batch)
        ):
            if steps > budget:
                raise RuntimeError("stalled: the model predicts the mask token")
            out = model(canvas, am)
            if isinstance(out, tuple):
                logits, attentions = out
            else:
                logits, attentions = out, None
            counters["full_forwards"] += 1
            counters["query_positions"] += batch * length
            vocab = len(logits[0][0])
            cands = decoder_candidates(canvas, mask_id, e, am)
            for b in range(batch):  # P11: a row whose block is done has no candidate (takes no step)
                if count_masks(canvas[b], mask_id, s, e, am[b]) == 0:
                    cands[b] = [False] * length
            dependency = None
            if r["rule"] == "dapd":
                if attentions is None:
                    raise ValueError(
                        "DAPD needs a model that returns attention weights"
                    )
                q_of = [
                    [max(i - logit_shift, first_real[b]) for i in range(length)]
                    for b in range(batch)
                ]
                dependency = dapd_dependency(
                    attentions, len(attentions), r["top_layers"], q_of
                )
            gumbel = draw("gumbel", (batch, length, vocab)) if temperature > 0 else None
            remask = draw("remask", (batch, length)) if remasking == "random" else None
            masks_now = [
                count_masks(canvas[b], mask_id, s, e, am[b]) for b in range(batch)
            ]
            det = step_details(
                r,
                logits,
                canvas,
                cands,
                temperature=temperature,
                remasking=remasking,
                gumbel_uniforms=gumbel,
                remask_uniforms=remask,
                block_step=steps,
                block_masks_at_start=at_start,
                block_masks=masks_now,
                block_length=block_length,
                dependency=dependency,
                state=state,
                mask_id=mask_id,
            )
            row_trace = []
            for b in range(batch):
                rt = []
                for pos, tok, score in det["commits"][b]:
                    if canvas[b][pos] == mask_id and tok != mask_id:
                        rt.append((pos, tok, score))
                    canvas[b][pos] = tok
                row_trace.append(rt)
            trace.append(row_trace)
            steps += 1
    return canvas, trace, counters


# ---------------------------------------------------------------------------------------------------------
# Worked examples (data: examples/parallel.json) and their replay
# ---------------------------------------------------------------------------------------------------------


def worked_examples():
    """Worked examples as data (examples/parallel.json, read by ``data.load``): list of dicts {"name", "clause",
    "fn", "args", "expected", "why"}.

    ``fn`` names a function of this module, ``args`` its keyword arguments (plain JSON-like data, with
    float("-inf") where a logit is -inf), ``expected`` its output with tuples written as lists. Replay with
    ``replay(example)`` and compare with ``same(actual, expected)`` (floats to 1e-12 relative).
    """
    return load(__file__)


def _toy_model_prompt_mask(canvas, attention_mask):
    # Tokens {0, 1}, mask 2. Position 0: c = 0.5 for token 0. Other positions: c = 0.95 when the row's
    # position 1 holds 1, else 0.5.
    out = []
    for row in canvas:
        hi = row[1] == 1
        r = []
        for i in range(len(row)):
            if i == 0:
                r.append([0.0, 0.0, -1e9])
            else:
                r.append([3.0, 0.0, -1e9] if hi else [0.0, 0.0, -1e9])
        out.append(r)
    return out


def _toy_model_klass_history(canvas, attention_mask):
    # Row with position 1 == 1: every position stable at c = 0.95. Otherwise: position 0 at c = 0.98,
    # the rest at c = 0.5 (constant logits: KL 0 between steps).
    out = []
    for row in canvas:
        a = row[1] == 1
        r = []
        for i in range(len(row)):
            if a:
                r.append([3.0, 0.0, -1e9])
            else:
                r.append([4.0, 0.0, -1e9] if i == 0 else [0.0, 0.0, -1e9])
        out.append(r)
    return out


_TOY_MODELS = {
    "prompt_mask": _toy_model_prompt_mask,
    "klass_history": _toy_model_klass_history,
}


def toy_decode(model_name, prompts, rule, gen_length, block_length, mask_id):
    """Worked-example helper: decode_reference with a named toy model at temperature 0 ->
    [canvas, trace as (position, token) pairs]."""
    canvas, trace, _ = decode_reference(
        _TOY_MODELS[model_name],
        prompts,
        rule=rule,
        gen_length=gen_length,
        block_length=block_length,
        mask_id=mask_id,
    )
    return [canvas, [[[(p, t) for (p, t, _s) in row] for row in st] for st in trace]]


def quota_sequence(masks_at_block_start, steps_per_block, n_steps, n_candidates):
    """P9 helper for the worked examples: the quota at block_step 0 .. n_steps - 1 -> list[int]."""
    out = []
    for i in range(n_steps):
        out.append(quota_count(masks_at_block_start, steps_per_block, i, n_candidates))
    return out


def fastdllm_rule_names(cases):
    """FD3 helper for the worked examples: cases [[threshold, factor, steps_per_block], ...] -> the rule
    names, "ValueError" where refused."""
    out = []
    for threshold, factor, spb in cases:
        try:
            out.append(fastdllm_rule(threshold, factor, spb)["rule"])
        except ValueError:
            out.append("ValueError")
    return out


def _plain(x):
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def replay(example):
    """Run one worked example: example dict -> its actual output (tuples turned into lists)."""
    fn = globals()[example["fn"]]
    return _plain(fn(**example["args"]))


def same(a, b, rel=1e-12):
    """Recursive equality with floats compared to a relative tolerance (ints, strings, bools exactly)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool):
            return False
        if a == b:
            return True
        return abs(a - b) <= rel * max(abs(a), abs(b))
    return a == b


def check_worked_examples():
    """Replays every worked example -> list of (name, actual, expected) that disagree (empty when all pass)."""
    bad = []
    for e in worked_examples():
        got = replay(e)
        if not same(got, e["expected"]):
            bad.append((e["name"], got, e["expected"]))
    return bad
