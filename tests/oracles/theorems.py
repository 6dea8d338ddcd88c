"""Independent spec oracle for spec/theorems.md (T1, T2, T2b, T2c, T2d, T3, T3b, T4, T5, TC1).

Written ONLY from spec/notation.md, spec/theorems.md and the LocalLeap paper (seed 002), never from the
production code.  Deliberately naive: loops over ``itertools.product``, exact ``fractions.Fraction``
wherever a quantity is rational, ``math.log`` / ``math.sqrt`` for the few irrational ones (KL, entropies,
``f_V``, L_r roots).  No torch, no numpy, nothing imported from veridec.

Conventions:

* A *joint* is a dict mapping n-tuples of symbols to Fractions summing to 1.  Keys may also be strings of
  digits (``"01"`` -> ``(0, 1)``).  Missing tuples have mass 0.  The symbol set ``V`` is given explicitly or
  inferred: integer symbols -> ``range(max(2, largest + 1))``; other symbols -> their sorted set.
  The order of ``V`` is the symbol *index* used for tie-breaking (N5: ties go to the lowest index).
* Sequences are ordered lexicographically by symbol index (``itertools.product(V, repeat=n)`` order);
  "lowest index" for a joint argmax means first in that order.
* ``x*`` defaults to the marginal argmaxes (lowest index on ties); any candidate may be passed instead.
* Every bound is returned as a record ``{value, bound, strict, holds, slack}`` with
  ``slack = bound - value``; a strict bound holds iff ``slack > 0``, a non-strict one iff ``slack >= 0``.
  ``violation`` = hypotheses hold and (conclusion or a bound the theorem claims) fails.
"""
from fractions import Fraction
import itertools
import math

from .data import load

F = Fraction


# --------------------------------------------------------------------------------------------------
# Basic objects
# --------------------------------------------------------------------------------------------------

def _key(k):
    if isinstance(k, str):
        return tuple(int(c) for c in k)
    return tuple(k)


def infer_symbols(joint):
    """The symbol set V (a list, in index order) of a joint given as a dict."""
    syms = set()
    for k in joint:
        for s in _key(k):
            syms.add(s)
    if all(isinstance(s, int) for s in syms):
        top = max(syms) if syms else 0
        return list(range(max(2, top + 1)))
    return sorted(syms)


def make_joint(mapping, V=None):
    """Canonical joint: (n, V, dict over ALL of V^n with Fraction values, zeros included).

    Raises ValueError if masses are negative, do not sum to exactly 1, or tuple lengths differ."""
    mapping = {_key(k): F(v) for k, v in mapping.items()}
    lengths = set(len(k) for k in mapping)
    if len(lengths) != 1:
        raise ValueError("all keys must have the same length n")
    n = lengths.pop()
    if V is None:
        V = infer_symbols(mapping)
    V = list(V)
    for k in mapping:
        for s in k:
            if s not in V:
                raise ValueError("symbol %r not in V" % (s,))
    full = {}
    for z in itertools.product(V, repeat=n):
        full[z] = mapping.get(z, F(0))
    total = F(0)
    for z in full:
        if full[z] < 0:
            raise ValueError("negative mass at %r" % (z,))
        total += full[z]
    if total != 1:
        raise ValueError("masses sum to %s, not 1" % total)
    return n, V, full


def marginal(full, n, V, j):
    """p_j as a dict symbol -> Fraction."""
    out = {v: F(0) for v in V}
    for z, pz in full.items():
        out[z[j]] += pz
    return out


def marginalize(full, positions):
    """Joint of the coordinates ``positions`` (in the order given)."""
    out = {}
    for z, pz in full.items():
        y = tuple(z[i] for i in positions)
        out[y] = out.get(y, F(0)) + pz
    return out


def argmax_dist(dist, order):
    """(lowest-index argmax, unique?, list of all maximisers) of a dict over ``order``."""
    best = None
    best_val = None
    for v in order:
        if best_val is None or dist[v] > best_val:
            best, best_val = v, dist[v]
    maxers = [v for v in order if dist[v] == best_val]
    return best, len(maxers) == 1, maxers


def product_of_marginals(full, n, V):
    """q(z) = prod_j p_j(z_j), exact."""
    margs = [marginal(full, n, V, j) for j in range(n)]
    q = {}
    for z in itertools.product(V, repeat=n):
        val = F(1)
        for j in range(n):
            val *= margs[j][z[j]]
        q[z] = val
    return q


def tv_distance(p, q):
    """TV(p, q) = 1/2 sum_z |p(z) - q(z)|, exact Fraction."""
    s = F(0)
    for z in p:
        s += abs(p[z] - q[z])
    return s / 2


def lr_power_sum(p, q, r):
    """sum_z |p(z) - q(z)|^r, exact for integer r >= 1 (Fraction), float otherwise."""
    s = F(0) if isinstance(r, int) else 0.0
    for z in p:
        d = abs(p[z] - q[z])
        s += d ** r if isinstance(r, int) else float(d) ** r
    return s


def lr_distance(p, q, r):
    """||p - q||_r = (sum |p - q|^r)^(1/r); Fraction for r = 1, float otherwise."""
    s = lr_power_sum(p, q, r)
    if r == 1:
        return s
    return float(s) ** (1.0 / r)


def kl_divergence(p, q):
    """KL(p || q) = sum_{p(z) > 0} p(z) ln(p(z) / q(z)) in nats (float); inf if q(z) = 0 < p(z).

    The ratio is formed exactly, so p = q gives exactly 0.0."""
    s = 0.0
    for z in p:
        if p[z] > 0:
            if q[z] == 0:
                return math.inf
            s += float(p[z]) * math.log(p[z] / q[z])
    return s


def entropy(dist):
    """Shannon entropy in nats (float), 0 ln 0 = 0."""
    h = 0.0
    for v in dist:
        if dist[v] > 0:
            h -= float(dist[v]) * math.log(dist[v])
    return h


def H_b(eps):
    """Binary entropy -eps ln eps - (1-eps) ln(1-eps) in nats, with 0 ln 0 = 0 (float)."""
    eps = F(eps)
    h = 0.0
    for t in (eps, 1 - eps):
        if t > 0:
            h -= float(t) * math.log(t)
    return h


def f_V(eps, V_size):
    """f_V(eps) = H_b(eps) + eps ln(|V| - 1) in nats (float).  Setting, spec/theorems.md."""
    eps = F(eps)
    return H_b(eps) + float(eps) * math.log(V_size - 1)


def float_tolerance(n, V_size):
    """TK1's float tolerance 8 (V^n + n)(1 + n ln V) 2^-53 for float-valued comparisons."""
    return 8 * (V_size ** n + n) * (1 + n * math.log(V_size)) * 2.0 ** -53


def _rec(value, bound, strict, tol=0.0):
    """A bound record: value (LHS), bound (RHS), strict?, holds, slack = bound - value, decided.

    Exact (Fraction/int) operands: holds = slack > 0 (strict) or slack >= 0 (non-strict), decided.
    Float operands (KL, entropies, f_V, L_r roots): a NON-strict bound holds when slack >= -tol
    (TK1 tolerance, so equality cases such as H(X_k) = f_V(e_k) at |V| = 2 are not flagged); a STRICT
    bound holds when slack > 0 (raw); 'decided' is False when |slack| <= tol (floats cannot decide
    the comparison) and 'holds_raw' is the comparison without tolerance."""
    slack = bound - value
    raw = (slack > 0) if strict else (slack >= 0)
    is_float = isinstance(slack, float)
    if is_float and not strict:
        holds = slack >= -tol
    else:
        holds = raw
    decided = (not is_float) or abs(slack) > tol
    return {"value": value, "bound": bound, "strict": strict, "holds": bool(holds), "slack": slack,
            "holds_raw": bool(raw), "decided": bool(decided)}


# --------------------------------------------------------------------------------------------------
# analyse
# --------------------------------------------------------------------------------------------------

def analyse(joint, x_star=None, V=None, lr_orders=(1, 2, 3)):
    """Every quantity of spec/theorems.md 'Setting' for one joint (exact where rational).

    Returns a dict with: n, V, V_size, p (full joint), marginals, marginal_argmax (lowest index),
    marginal_argmax_unique, marginal_maximisers, x_star, errors e_j = 1 - p_j(x*_j), S, e_max,
    p_star = p(x*), q (product of marginals), q_star = q(x*), q_star_product = prod(1 - e_j) (equal to
    q_star), argmax_p / argmax_p_unique / maximisers_p (lowest index = lexicographic first),
    same for q, x_star_unique_argmax_p, x_star_unique_argmax_q, best_alternative (max_{y != x*} p(y),
    0 when n = 0 alternatives) and its lowest-index witness, confidences c_j = p_j(x*_j), tv (Fraction),
    kl (float nats), kl_finite, entropies H(X_j) (float), joint_entropy H(X), total_correlation
    sum H(X_j) - H(X) (float; equals kl), lr[r] = ||p - q||_r for r in lr_orders (Fraction for r = 1),
    lr_power[r] = sum |p - q|^r (exact for integer r)."""
    n, V, p = make_joint(joint, V)
    margs = [marginal(p, n, V, j) for j in range(n)]
    m_arg, m_uniq, m_maxers = [], [], []
    for j in range(n):
        a, u, mx = argmax_dist(margs[j], V)
        m_arg.append(a)
        m_uniq.append(u)
        m_maxers.append(mx)
    if x_star is None:
        x_star = tuple(m_arg)
    else:
        x_star = _key(x_star)
        if len(x_star) != n:
            raise ValueError("x_star has the wrong length")
    errors = [1 - margs[j][x_star[j]] for j in range(n)]
    S = sum(errors, F(0))
    e_max = max(errors) if errors else F(0)
    p_star = p[x_star]
    q = product_of_marginals(p, n, V)
    q_star = q[x_star]
    q_star_product = F(1)
    for e in errors:
        q_star_product *= (1 - e)
    order = list(itertools.product(V, repeat=n))
    ap, apu, apm = argmax_dist(p, order)
    aq, aqu, aqm = argmax_dist(q, order)
    best_alt, best_alt_at = F(0), None
    for y in order:
        if y != x_star and (best_alt_at is None or p[y] > best_alt):
            best_alt, best_alt_at = p[y], y
    kl = kl_divergence(p, q)
    ents = [entropy(margs[j]) for j in range(n)]
    hx = entropy(p)
    out = {
        "n": n, "V": V, "V_size": len(V), "p": p,
        "marginals": margs,
        "marginal_argmax": tuple(m_arg), "marginal_argmax_unique": m_uniq,
        "marginal_maximisers": m_maxers,
        "x_star": x_star,
        "x_star_is_marginal_argmax": tuple(m_arg) == x_star,
        "confidences": [margs[j][x_star[j]] for j in range(n)],
        "errors": errors, "S": S, "e_max": e_max,
        "p_star": p_star, "q": q, "q_star": q_star, "q_star_product": q_star_product,
        "argmax_p": ap, "argmax_p_unique": apu, "maximisers_p": apm,
        "argmax_q": aq, "argmax_q_unique": aqu, "maximisers_q": aqm,
        "x_star_unique_argmax_p": apu and ap == x_star,
        "x_star_unique_argmax_q": aqu and aq == x_star,
        "best_alternative": best_alt, "best_alternative_at": best_alt_at,
        "tv": tv_distance(p, q),
        "kl": kl, "kl_finite": kl != math.inf,
        "entropies": ents, "joint_entropy": hx, "total_correlation": sum(ents) - hx,
        "lr": {}, "lr_power": {},
    }
    for r in lr_orders:
        out["lr"][r] = lr_distance(p, q, r)
        out["lr_power"][r] = lr_power_sum(p, q, r)
    return out


# --------------------------------------------------------------------------------------------------
# T1
# --------------------------------------------------------------------------------------------------

def t1(joint, x_star=None, V=None):
    """T1 (general certificate).

    hypotheses: S + e_max < 1  (STRICT; record 'certificate': value S + e_max, bound 1).
    conclusion: x* is the unique argmax of p AND every x*_j is the unique argmax of p_j AND (hence) x* is
                the unique argmax of q.
    bounds used by the proof, each valid for every joint (non-strict):
      'boole'            p* >= 1 - S           (value 1 - S, bound p*)
      'single_coord'     max_{y != x*} p(y) <= e_max
      'marginal_half'    2 e_max <= S + e_max  (i.e. e_max <= S)
    margins reported (strictly positive exactly when the conclusion's parts hold):
      'joint_margin'     p* - max_{y != x*} p(y)
      'marginal_margin'  min_j (p_j(x*_j) - max_{v != x*_j} p_j(v))
    slacks: {name: bound - value} for every record; 'slack' is the certificate slack 1 - (S + e_max)."""
    a = analyse(joint, x_star, V)
    n, V_ = a["n"], a["V"]
    cert = _rec(a["S"] + a["e_max"], F(1), strict=True)
    marg_margin = None
    for j in range(n):
        pj = a["marginals"][j]
        others = [pj[v] for v in V_ if v != a["x_star"][j]]
        mm = pj[a["x_star"][j]] - (max(others) if others else F(0))
        marg_margin = mm if marg_margin is None else min(marg_margin, mm)
    conclusion = (a["x_star_unique_argmax_p"] and all(
        a["marginal_argmax_unique"][j] and a["marginal_argmax"][j] == a["x_star"][j] for j in range(n))
        and a["x_star_unique_argmax_q"])
    bounds = {
        "certificate": cert,
        "boole": _rec(1 - a["S"], a["p_star"], strict=False),
        "single_coord": _rec(a["best_alternative"], a["e_max"], strict=False),
        "marginal_half": _rec(2 * a["e_max"], a["S"] + a["e_max"], strict=False),
    }
    hyp = cert["holds"]
    claimed = ["boole", "single_coord", "marginal_half"]
    return {
        "theorem": "T1", "hypotheses": hyp, "conclusion": conclusion,
        "violation": (hyp and not conclusion) or any(not bounds[k]["holds"] for k in claimed),
        "bounds": bounds, "slacks": {k: r["slack"] for k, r in bounds.items()},
        "slack": cert["slack"],
        "joint_margin": a["p_star"] - a["best_alternative"],
        "marginal_margin": marg_margin,
        "analysis": a,
    }


def t1_tightness_example():
    """T1 'Tightness': n = 2, p(00) = p(01) = 2/5, p(10) = 1/5, p(11) = 0, x* = 00;
    e = (1/5, 2/5), S + e_max = 1 (certificate fails by equality) and 01 ties with 00."""
    return {(0, 0): F(2, 5), (0, 1): F(2, 5), (1, 0): F(1, 5), (1, 1): F(0)}


# --------------------------------------------------------------------------------------------------
# T2, T2b, T2c, T2d
# --------------------------------------------------------------------------------------------------

def t2(joint, eps, x_star=None, V=None):
    """T2 (Fast-dLLM theorem) with its TV (T2c) and KL (T2d) bounds.

    hypotheses: p_j(x*_j) > 1 - eps for every j (STRICT) and (n + 1) eps <= 1 (NON-strict).
    conclusion: argmax p = argmax q = x*, uniquely.
    bounds (records, slack = bound - value); the theorem claims them when the hypotheses hold:
      T2c 'tv_published'      TV < (3n - 1) eps / 2           STRICT   (published; holds)
      T2c 'tv_tight'          TV <= 1 - min(p*, q*)            non-strict
      T2c 'tv_S'              1 - min(p*, q*) <= S             non-strict (value 1-min(p*,q*), bound S)
      T2c 'tv_n_eps'          S < n eps                       STRICT   (value S)
      T2c 'tv_chain'          TV < n eps                      STRICT   (the composed tighter bound)
      T2d 'kl_published'      KL < (n - 1) f_V(eps)           STRICT   (published; OFF at n = 1)
      T2d 'kl_corrected'      KL <= (n - 1) f_V(eps)          non-strict; 'kl_corrected_strict' (STRICT)
                              is claimed only for n >= 2
      T2d 'kl_chain'          KL <= sum_{k>=2} H(X_k)         non-strict (k in position order 2..n)
      T2d 'kl_fv'             sum_{k>=2} H(X_k) <= sum_{k>=2} f_V(e_k)   non-strict (equality at |V| = 2)
      T2  't1_certificate'    S + e_max < (n + 1) eps         STRICT   (the proof's step; then <= 1)
    hyp_slacks: 'confidence' = eps - e_max (> 0 needed), 'eps' = 1 - (n + 1) eps (>= 0 needed).
    KL quantities are floats (math.log); TV quantities are exact Fractions."""
    eps = F(eps)
    a = analyse(joint, x_star, V)
    n, Vs = a["n"], a["V_size"]
    conf_ok = all(a["confidences"][j] > 1 - eps for j in range(n))
    eps_ok = (n + 1) * eps <= 1
    hyp = conf_ok and eps_ok
    conclusion = a["x_star_unique_argmax_p"] and a["x_star_unique_argmax_q"]
    tv = a["tv"]
    mn = min(a["p_star"], a["q_star"])
    kl = a["kl"]
    fv = f_V(eps, Vs)
    chain = sum(a["entropies"][1:], 0.0)
    fv_sum = sum((f_V(e, Vs) for e in a["errors"][1:]), 0.0)
    tol = float_tolerance(n, Vs)
    bounds = {
        "tv_published": _rec(tv, F(3 * n - 1) * eps / 2, strict=True),
        "tv_tight": _rec(tv, 1 - mn, strict=False),
        "tv_S": _rec(1 - mn, a["S"], strict=False),
        "tv_n_eps": _rec(a["S"], n * eps, strict=True),
        "tv_chain": _rec(tv, n * eps, strict=True),
        "kl_published": _rec(kl, (n - 1) * fv, strict=True, tol=tol),
        "kl_corrected": _rec(kl, (n - 1) * fv, strict=False, tol=tol),
        "kl_corrected_strict": _rec(kl, (n - 1) * fv, strict=True, tol=tol),
        "kl_chain": _rec(kl, chain, strict=False, tol=tol),
        "kl_fv": _rec(chain, fv_sum, strict=False, tol=tol),
    }
    bounds["t1_certificate"] = _rec(a["S"] + a["e_max"], (n + 1) * eps, strict=True)
    claimed = ["tv_published", "tv_tight", "tv_S", "tv_n_eps", "tv_chain", "kl_corrected", "kl_chain",
               "kl_fv", "t1_certificate"] + (["kl_corrected_strict"] if n >= 2 else [])
    return {
        "theorem": "T2", "eps": eps, "hypotheses": hyp, "hyp_confidence": conf_ok, "hyp_eps": eps_ok,
        "hyp_slacks": {"confidence": eps - a["e_max"], "eps": 1 - (n + 1) * eps},
        "conclusion": conclusion,
        "violation": hyp and (not conclusion or any(not bounds[k]["holds"] for k in claimed)),
        "published_kl_fails": hyp and not bounds["kl_published"]["holds"],
        "published_tv_fails": hyp and not bounds["tv_published"]["holds"],
        "bounds": bounds, "slacks": {k: r["slack"] for k, r in bounds.items()},
        "f_V_eps": fv, "analysis": a,
    }


def epsilon_interval(joint, x_star=None, V=None):
    """TK1: the interval (e_max, 1/(n+1)] of eps for which T2's hypotheses hold (None if empty)."""
    a = analyse(joint, x_star, V)
    lo, hi = a["e_max"], F(1, a["n"] + 1)
    return (lo, hi) if lo < hi else None


def fastdllm_counterexample_as_published(n, eps):
    """T2b's construction EXACTLY as the spec writes it: delta = (1/(n+1) + min(eps, 1/2)) / 2,
    p(x*) = 1 - n delta, p(flip_k) = delta, x* = 0...0, binary symbols.

    Returns {'delta', 'joint' (may contain a NEGATIVE mass), 'valid' (all masses >= 0)}.
    Not a distribution for n >= 3 when min(eps, 1/2) > (n + 2) / (n (n + 1)), e.g. n = 3, eps = 1/2."""
    eps = F(eps)
    delta = (F(1, n + 1) + min(eps, F(1, 2))) / 2
    joint = {tuple([0] * n): 1 - n * delta}
    for k in range(n):
        z = [0] * n
        z[k] = 1
        joint[tuple(z)] = delta
    return {"delta": delta, "joint": joint, "valid": all(v >= 0 for v in joint.values())}


def fastdllm_counterexample(n, eps):
    """T2b, repaired: delta = (1/(n+1) + min(eps, 1/n, 1/2)) / 2 (equal to the published delta for
    n = 2 and whenever eps <= 1/n).  Returns the joint (dict) with p(0^n) = 1 - n delta > 0 and
    p(flip_k) = delta.  Requires n >= 2 and 1/(n+1) < eps <= 1."""
    eps = F(eps)
    if n < 2 or not (F(1, n + 1) < eps <= 1):
        raise ValueError("T2b needs n >= 2 and eps in (1/(n+1), 1]")
    delta = (F(1, n + 1) + min(eps, F(1, n), F(1, 2))) / 2
    joint = {tuple([0] * n): 1 - n * delta}
    for k in range(n):
        z = [0] * n
        z[k] = 1
        joint[tuple(z)] = delta
    return joint


def t2b(n, eps, as_published=False):
    """T2b (tightness): checks the counterexample for (n, eps), eps in (1/(n+1), 1].

    Claimed properties (all must be True for the construction to be a counterexample):
      'distribution'       all masses >= 0 (sum is 1 by construction)
      'confidence'         p_j(x*_j) > 1 - eps for all j (STRICT)
      'marginal_top1'      x*_j is the unique argmax of p_j (p_j(x*_j) > 1/2)
      'not_joint_argmax'   argmax p != x* (p(flip_k) = delta > p*)
    and 'hyp_eps' = (n + 1) eps <= 1 is False (that is what 'tight' means)."""
    eps = F(eps)
    if as_published:
        c = fastdllm_counterexample_as_published(n, eps)
        joint, delta = c["joint"], c["delta"]
        if not c["valid"]:
            return {"n": n, "eps": eps, "delta": delta, "joint": joint, "distribution": False,
                    "counterexample": False}
    else:
        joint = fastdllm_counterexample(n, eps)
        delta = joint[tuple([1] + [0] * (n - 1))]
    a = analyse(joint, x_star=tuple([0] * n), V=[0, 1])
    conf = all(c > 1 - eps for c in a["confidences"])
    top1 = all(a["marginal_argmax_unique"]) and a["marginal_argmax"] == a["x_star"]
    not_arg = a["argmax_p"] != a["x_star"]
    return {"n": n, "eps": eps, "delta": delta, "joint": joint, "distribution": True,
            "confidence": conf, "marginal_top1": top1, "not_joint_argmax": not_arg,
            "hyp_eps": (n + 1) * eps <= 1,
            "counterexample": conf and top1 and not_arg, "analysis": a}


# --------------------------------------------------------------------------------------------------
# T3, T3b
# --------------------------------------------------------------------------------------------------

def cluster_condition(kappa, tau, m):
    """T3's cluster certificate (1 - kappa) + m (1 - tau) < tau  (STRICT), exact."""
    kappa, tau = F(kappa), F(tau)
    return (1 - kappa) + m * (1 - tau) < tau


def realized_cluster(joint, x_star=None, V=None):
    """TK1's realized thresholds: anchor = most confident position (lowest index on ties),
    kappa = its confidence p_a(x*_a), tau = smallest other confidence, m = n - 1 (tau None if n = 1)."""
    a = analyse(joint, x_star, V)
    conf = a["confidences"]
    anchor = 0
    for j in range(a["n"]):
        if conf[j] > conf[anchor]:
            anchor = j
    others = [conf[j] for j in range(a["n"]) if j != anchor]
    return {"anchor": anchor, "kappa": conf[anchor], "tau": min(others) if others else None,
            "m": a["n"] - 1}


def t3(joint, kappa=None, tau=None, anchor=None, x_star=None, V=None):
    """T3 (LocalLeap cluster certificate).  ``joint`` is the cluster's joint (positions = anchor +
    m = n - 1 neighbours).  kappa/tau/anchor default to TK1's realized values.

    hypotheses (all required):
      'domain'        1/2 < tau < kappa < 1          (all STRICT)
      'm_ge_1'        m >= 1
      'anchor_conf'   p_a(x*_a) >= kappa             (NON-strict)
      'nbr_conf'      p_j(x*_j) >= tau for every neighbour (NON-strict)
      'condition'     (1 - kappa) + m (1 - tau) < tau   (STRICT)
    conclusion: x* (restricted to the cluster) is the unique argmax of the cluster's joint.
    bounds (claimed under the hypotheses):
      'S_plus_emax'   S + e_max <= (1 - kappa) + m (1 - tau) + (1 - tau)   NON-strict
      'certificate'   S + e_max < 1   STRICT  (T1's hypothesis; follows from the two above)"""
    a = analyse(joint, x_star, V)
    n = a["n"]
    real = realized_cluster(joint, x_star, V)
    if anchor is None:
        anchor = real["anchor"]
    if kappa is None:
        kappa = a["confidences"][anchor]
    if tau is None:
        others = [a["confidences"][j] for j in range(n) if j != anchor]
        tau = min(others) if others else None
    m = n - 1
    kappa = F(kappa)
    h = {}
    if tau is None:
        h = {"domain": False, "m_ge_1": False, "anchor_conf": a["confidences"][anchor] >= kappa,
             "nbr_conf": True, "condition": False}
        bounds = {"certificate": _rec(a["S"] + a["e_max"], F(1), strict=True)}
    else:
        tau = F(tau)
        h["domain"] = F(1, 2) < tau < kappa < 1
        h["m_ge_1"] = m >= 1
        h["anchor_conf"] = a["confidences"][anchor] >= kappa
        h["nbr_conf"] = all(a["confidences"][j] >= tau for j in range(n) if j != anchor)
        h["condition"] = cluster_condition(kappa, tau, m)
        bounds = {
            "S_plus_emax": _rec(a["S"] + a["e_max"], (1 - kappa) + m * (1 - tau) + (1 - tau), False),
            "certificate": _rec(a["S"] + a["e_max"], F(1), strict=True),
        }
    hyp = all(h.values())
    conclusion = a["x_star_unique_argmax_p"]
    return {
        "theorem": "T3", "kappa": kappa, "tau": tau, "anchor": anchor, "m": m,
        "hypotheses": hyp, "hyp_parts": h, "conclusion": conclusion,
        "violation": hyp and (not conclusion or any(not r["holds"] for r in bounds.values())),
        "bounds": bounds, "slacks": {k: r["slack"] for k, r in bounds.items()},
        "condition_slack": (tau - ((1 - kappa) + m * (1 - tau))) if tau is not None else None,
        "analysis": a,
    }


def t3b(joint, clusters, kappa, tau, x_star=None, V=None):
    """T3b (concatenation of clusters; OFF as published).

    ``clusters``: list of (anchor_position, [neighbour positions]) in the joint's coordinates,
    pairwise disjoint.  Published claim: if every cluster passes T3 (its own marginal joint, given
    anchor, kappa, tau), then the concatenation x* is the (unique) global argmax of the joint of the
    union of the clusters.  Corrected claim: if T1 holds on the union (sum of all errors + e_max < 1),
    the concatenation is the unique global argmax.
    Returns published_hypotheses, corrected_hypotheses, conclusion (concatenation is the unique argmax
    of the union's joint), published_fails = published_hypotheses and not conclusion,
    corrected_violation = corrected_hypotheses and not conclusion."""
    n, V_, full = make_joint(joint, V)
    a = analyse(joint, x_star, V_)
    xs = a["x_star"]
    union = []
    per = []
    for anc, nbrs in clusters:
        pos = [anc] + list(nbrs)
        union.extend(pos)
        sub = marginalize(full, pos)
        r = t3(sub, kappa=kappa, tau=tau, anchor=0, x_star=tuple(xs[i] for i in pos), V=V_)
        per.append(r)
    disjoint = len(set(union)) == len(union)
    ujoint = marginalize(full, union)
    ux = tuple(xs[i] for i in union)
    ua = analyse(ujoint, ux, V_)
    cert = _rec(ua["S"] + ua["e_max"], F(1), strict=True)
    pub_h = disjoint and all(r["hypotheses"] for r in per)
    conclusion = ua["x_star_unique_argmax_p"]
    return {
        "theorem": "T3b", "disjoint": disjoint, "clusters": per,
        "published_hypotheses": pub_h, "corrected_hypotheses": cert["holds"],
        "union_certificate": cert, "conclusion": conclusion,
        "published_fails": pub_h and not conclusion,
        "corrected_violation": cert["holds"] and not conclusion,
        "union_analysis": ua,
    }


def concatenation_counterexample():
    """T3b's exact counterexample: kappa = 9/10, tau = 3/5, m = 1, positions (a1, b1, a2, b2),
    x* = 0000, p(0001) = 2/5, p(0010) = 1/10, p(0100) = 2/5, p(1000) = 1/10 (zero elsewhere)."""
    return {
        "joint": {(0, 0, 0, 1): F(2, 5), (0, 0, 1, 0): F(1, 10), (0, 1, 0, 0): F(2, 5),
                  (1, 0, 0, 0): F(1, 10)},
        "kappa": F(9, 10), "tau": F(3, 5), "clusters": [(0, [1]), (2, [3])], "x_star": (0, 0, 0, 0),
        "V": [0, 1],
    }


# --------------------------------------------------------------------------------------------------
# T4
# --------------------------------------------------------------------------------------------------

def capacity_corrected(kappa, tau):
    """T4 (corrected): m_max = ceil(kappa / (1 - tau) - 1) - 1, the largest integer m with
    m < kappa/(1 - tau) - 1 (STRICT), i.e. the largest m with (1-kappa) + m(1-tau) < tau.
    Exact (Fraction); floats are taken at their exact binary value, strings like '0.9' as decimals.
    Stated for 1/2 < tau < kappa < 1 (result >= 0 there; 0 means no neighbour is admissible)."""
    kappa, tau = F(kappa), F(tau)
    return math.ceil(kappa / (1 - tau) - 1) - 1


def capacity_published(kappa, tau):
    """T4 (published, seed 002): m_max = floor(kappa / (1 - tau) - 1).  Off (one too large) exactly
    when kappa / (1 - tau) is an integer."""
    kappa, tau = F(kappa), F(tau)
    return math.floor(kappa / (1 - tau) - 1)


def capacity_by_search(kappa, tau, limit=100000):
    """Largest m >= 0 with (1 - kappa) + m (1 - tau) < tau, by counting up (naive cross-check).
    Returns -1 if even m = 0 fails (impossible inside the domain)."""
    kappa, tau = F(kappa), F(tau)
    if not cluster_condition(kappa, tau, 0):
        return -1
    m = 0
    while m < limit and cluster_condition(kappa, tau, m + 1):
        m += 1
    return m


def t4(kappa, tau):
    """T4 record: domain (1/2 < tau < kappa < 1), ratio kappa/(1-tau), corrected, published, search,
    integer_boundary (ratio is an integer), published_off (published != corrected), and whether the
    condition holds at m = published (it must not when published_off)."""
    kappa, tau = F(kappa), F(tau)
    ratio = kappa / (1 - tau)
    c, p, s = capacity_corrected(kappa, tau), capacity_published(kappa, tau), capacity_by_search(kappa, tau)
    return {"kappa": kappa, "tau": tau, "domain": F(1, 2) < tau < kappa < 1, "ratio": ratio,
            "corrected": c, "published": p, "search": s,
            "integer_boundary": ratio.denominator == 1, "published_off": p != c,
            "condition_at_published": cluster_condition(kappa, tau, p),
            "condition_at_corrected": cluster_condition(kappa, tau, c),
            "condition_at_corrected_plus_1": cluster_condition(kappa, tau, c + 1)}


def capacity_counterexample():
    """T4's exact counterexample: kappa = 4/5, tau = 3/5 (published m_max = 1, corrected 0);
    the joint p(00) = p(01) = 2/5, p(10) = 1/5 has anchor marginal 4/5, neighbour marginal 3/5,
    condition 1/5 + 2/5 = 3/5 = tau (equality), and a tie 00 / 01."""
    return {"kappa": F(4, 5), "tau": F(3, 5),
            "joint": {(0, 0): F(2, 5), (0, 1): F(2, 5), (1, 0): F(1, 5), (1, 1): F(0)},
            "anchor": 0, "x_star": (0, 0)}


# --------------------------------------------------------------------------------------------------
# T5
# --------------------------------------------------------------------------------------------------

def t5(joint, x_star=None, V=None, anchor=None, tau=None, lr_orders=(1, 2, 3)):
    """T5 (distance bounds).  All NON-strict.  Records (slack = bound - value):
      'p_star_low'   1 - S <= p*          'p_star_high'  p* <= 1 - e_max
      'q_star_low'   1 - S <= q*          'q_star_high'  q* <= 1 - e_max
      'pq_star'      |p* - q*| <= S - e_max
      'alt'          max_{z != x*} |p(z) - q(z)| <= S
      'lr_<r>'       ||p - q||_r <= ((S - e_max)^r + 2 S^r)^(1/r)   (reconstructed; exact for integer
                     r: compared as sum |p-q|^r <= (S - e_max)^r + 2 S^r)
      'tv_published' TV <= (3 S - e_max) / 2   (reconstructed)
      'tv_tight'     TV <= 1 - min(p*, q*)    'tv_S'  1 - min(p*, q*) <= S
      'kl_chain'     KL <= sum_{j != anchor} H(X_j)            (float)
      'kl_cluster'   sum_{j != anchor} H(X_j) <= m f_V(1 - tau)  (float; needs every neighbour
                     confidence >= tau AND f_V increasing up to 1 - tau, i.e. 1 - tau <= (|V|-1)/|V|:
                     reported in 'kl_cluster_hypotheses'; NOT universal for an arbitrary x*)
    anchor/tau default to TK1's realized values (most confident position; smallest other confidence).
    'violation' = a universal bound fails, or kl_cluster fails while kl_cluster_hypotheses hold."""
    a = analyse(joint, x_star, V, lr_orders=lr_orders)
    n, Vs = a["n"], a["V_size"]
    S, em, ps, qs = a["S"], a["e_max"], a["p_star"], a["q_star"]
    p, q = a["p"], a["q"]
    alt = F(0)
    for z in p:
        if z != a["x_star"]:
            alt = max(alt, abs(p[z] - q[z]))
    b = {
        "p_star_low": _rec(1 - S, ps, False), "p_star_high": _rec(ps, 1 - em, False),
        "q_star_low": _rec(1 - S, qs, False), "q_star_high": _rec(qs, 1 - em, False),
        "pq_star": _rec(abs(ps - qs), S - em, False),
        "alt": _rec(alt, S, False),
        "tv_published": _rec(a["tv"], (3 * S - em) / 2, False),
        "tv_tight": _rec(a["tv"], 1 - min(ps, qs), False),
        "tv_S": _rec(1 - min(ps, qs), S, False),
    }
    for r in lr_orders:
        if isinstance(r, int):
            b["lr_%d" % r] = _rec(a["lr_power"][r], (S - em) ** r + 2 * S ** r, False)
        else:
            b["lr_%s" % r] = _rec(a["lr"][r], (float(S - em) ** r + 2 * float(S) ** r) ** (1.0 / r), False,
                                  tol=float_tolerance(n, Vs))
    universal = list(b.keys())
    real = realized_cluster(joint, x_star, V)
    if anchor is None:
        anchor = real["anchor"]
    if tau is None:
        others = [a["confidences"][j] for j in range(n) if j != anchor]
        tau = min(others) if others else F(1)
    tau = F(tau)
    m = n - 1
    chain = sum((a["entropies"][j] for j in range(n) if j != anchor), 0.0)
    b["kl_chain"] = _rec(a["kl"], chain, False, tol=float_tolerance(n, Vs))
    universal.append("kl_chain")
    b["kl_cluster"] = _rec(chain, m * f_V(1 - tau, Vs), False, tol=float_tolerance(n, Vs))
    klh = (all(a["confidences"][j] >= tau for j in range(n) if j != anchor)
           and 1 - tau <= F(Vs - 1, Vs))
    return {
        "theorem": "T5", "anchor": anchor, "tau": tau, "m": m, "bounds": b,
        "slacks": {k: r["slack"] for k, r in b.items()},
        "kl_cluster_hypotheses": klh,
        "violation": any(not b[k]["holds"] for k in universal) or (klh and not b["kl_cluster"]["holds"]),
        "analysis": a,
    }


def t5_kl_cluster_counterexample():
    """T5's KL line is not 'hypothesis-free' for an arbitrary candidate x*: X0 = X1 ~ uniform bit,
    X2 independent with P(X2 = 0) = 1/10, x* = 000 (x*_2 is NOT the marginal argmax).  Realized
    anchor 0, tau = 1/10, m = 2: KL = ln 2 = 0.6931 > 2 f_2(9/10) = 2 H_b(1/10) = 0.6502."""
    return {(0, 0, 0): F(1, 20), (0, 0, 1): F(9, 20), (1, 1, 0): F(1, 20), (1, 1, 1): F(9, 20)}


# --------------------------------------------------------------------------------------------------
# TC1
# --------------------------------------------------------------------------------------------------

def certified_prefix(errors_in_rank_order):
    """TC1: length k of the longest prefix (in confidence order, i.e. errors ascending) with
    sum_{i<=k} e_(i) + max_{i<=k} e_(i) < 1 (STRICT; T1 on the prefix), and at least 1 (the top-1 is
    always committed).  Returns 0 only for an empty selection.  The prefix maximum is used, which equals
    e_(k) when the errors are in confidence order; the LHS is then nondecreasing in k, so the admissible
    k form an initial segment."""
    errs = [F(e) if not isinstance(e, float) else e for e in errors_in_rank_order]
    if not errs:
        return 0
    best = 1
    total = 0
    mx = None
    for k in range(1, len(errs) + 1):
        e = errs[k - 1]
        total = total + e
        mx = e if mx is None else max(mx, e)
        if total + mx < 1:
            best = k
        else:
            break
    return best


def confidence_order(confidences):
    """Positions sorted by confidence, descending, ties toward the lowest index (N5)."""
    idx = list(range(len(confidences)))
    idx.sort(key=lambda j: (-confidences[j], j))
    return idx


def tc1(joint, V=None):
    """TC1 on an enumerated oracle: ``joint`` is the true joint of the selected positions given the
    canvas.  Proposals x̂_j = marginal argmax (lowest index), confidences c_j = p_j(x̂_j), order by
    confidence (N5), errors e = 1 - c, k = certified_prefix.  Claim: whenever k >= 2 (a multi-token
    step) the committed positions' proposals are the unique argmax of the committed positions' joint.
    Returns order, errors (in order), k, committed positions, multi_token, conclusion, violation."""
    n, V_, full = make_joint(joint, V)
    a = analyse(joint, None, V_)
    order = confidence_order(a["confidences"])
    errs = [a["errors"][j] for j in order]
    k = certified_prefix(errs)
    committed = order[:k]
    sub = marginalize(full, committed)
    sa = analyse(sub, tuple(a["x_star"][j] for j in committed), V_)
    concl = sa["x_star_unique_argmax_p"]
    return {"order": order, "errors": errs, "k": k, "committed": committed, "multi_token": k >= 2,
            "conclusion": concl, "violation": k >= 2 and not concl}


# --------------------------------------------------------------------------------------------------
# Worked examples (data: examples/theorems.json)
# --------------------------------------------------------------------------------------------------

def worked_examples():
    """Worked examples as data (examples/theorems.json, read by ``data.load``): list of dicts {name, clause,
    inputs, expected}.  Expected values are exact (Fractions, ints, bools) except the KL / f_V ones, which are
    floats to compare with math.isclose(rel_tol=1e-12)."""
    return load(__file__)


__all__ = [
    "make_joint", "infer_symbols", "marginal", "marginalize", "argmax_dist", "product_of_marginals",
    "tv_distance", "float_tolerance", "lr_power_sum", "lr_distance", "kl_divergence", "entropy", "H_b", "f_V",
    "analyse",
    "t1", "t1_tightness_example", "t2", "epsilon_interval", "fastdllm_counterexample_as_published",
    "fastdllm_counterexample", "t2b", "cluster_condition", "realized_cluster", "t3", "t3b",
    "concatenation_counterexample", "capacity_corrected", "capacity_published", "capacity_by_search",
    "t4", "capacity_counterexample", "t5", "t5_kl_cluster_counterexample", "certified_prefix",
    "confidence_order", "tc1", "worked_examples",
]
