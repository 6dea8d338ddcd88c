"""spec/theorems.md T1-T5 as checks on a batch of joints (an ``Analysis``), vectorized over the batch.

Each check returns a ``TheoremResult``: per case whether the hypotheses hold, whether the conclusion holds,
and the slack of each bound (bound minus value; a strict bound needs slack > 0, a non-strict one >= 0).
Float64 comparisons allow a derived rounding slack (``rounding_for``); exact batches (Fractions) allow
nothing. A claim marked ``published`` is quoted from a paper and may be off: spec/theorems.md says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .joints import Analysis, analyse


@dataclass
class TheoremResult:
    name: str
    statement: str
    hypotheses: np.ndarray  # [N] bool
    conclusion: np.ndarray  # [N] bool (argmax claims; True for pure bounds)
    slacks: dict[str, np.ndarray] = field(default_factory=dict)  # bound - value, [N] each
    strict: dict[str, bool] = field(default_factory=dict)
    published: bool = False
    rounding: float = 0.0

    def bound_holds(self) -> np.ndarray:
        """Exact batches decide strictness; float batches only flag slacks below -rounding (a strict bound met
        with equality cannot be told from rounding there)."""
        ok = np.ones(len(self.hypotheses), dtype=bool)
        for name, slack in self.slacks.items():
            if self.rounding:
                ok &= slack.astype(float) > -self.rounding
            else:
                ok &= (slack > 0 if self.strict[name] else slack >= 0).astype(bool)
        return ok

    @property
    def violations(self) -> np.ndarray:
        """[N] cases whose hypotheses hold and whose conclusion or a bound fails."""
        return self.hypotheses & ~(self.conclusion & self.bound_holds())

    def summary(self) -> dict:
        """Counts, the tightest slack (bound - value) and the tightest margin from failing: slack + the float
        rounding allowance, never below 0 while no case fails (exact batches: the slack itself)."""
        held = self.hypotheses
        tightest = margin = None
        if held.any() and self.slacks:
            tightest = float(min(np.min(s[held].astype(float)) for s in self.slacks.values()))
            margin = tightest + self.rounding
        return {"theorem": self.name, "statement": self.statement, "published": self.published,
                "cases": int(len(held)), "hypotheses_held": int(held.sum()),
                "violations": int(self.violations.sum()), "tightest_slack": tightest, "tightest_margin": margin}


def rounding_for(a: Analysis) -> float:
    """Float64 slack tolerance: every compared quantity is a sum of at most V**n + n terms of size <= 1, or an
    entropy <= n ln V; 8 such quantities at most enter one slack. Exact batches: 0."""
    if a.exact:
        return 0.0
    terms, scale = a.num_symbols**a.length + a.length, 1 + a.length * math.log(a.num_symbols)
    return 8 * terms * scale * 2.0**-53


def f_v(eps, symbols: int):
    """H_b(eps) + eps ln(|V| - 1), nats; 0 at eps = 0."""
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        hb = -np.where(eps > 0, eps * np.log(np.where(eps > 0, eps, 1)), 0.0) \
             - np.where(eps < 1, (1 - eps) * np.log(np.where(eps < 1, 1 - eps, 1)), 0.0)
    return hb + eps * math.log(symbols - 1) if symbols > 2 else hb


def _marginal_top1_unique(a: Analysis) -> np.ndarray:
    """Every x*_j is the unique argmax of its marginal."""
    top = np.take_along_axis(a.marginals, a.x_star[..., None], axis=2)[..., 0]
    others = a.marginals.copy()
    np.put_along_axis(others, a.x_star[..., None], -1, axis=2)
    return (top > others.max(axis=2)).all(axis=1)


def general_certificate(a: Analysis) -> TheoremResult:
    """T1: S + e_max < 1 => x* is the unique argmax of p and of q."""
    hyp = a.total_error + a.max_error < 1
    return TheoremResult("T1 general certificate", "S + e_max < 1 => x* unique argmax of p and q", hyp,
                         a.unique_argmax & _marginal_top1_unique(a), {"p* - max other": a.p_star - a.best_other},
                         {"p* - max other": True}, rounding=rounding_for(a))


def fastdllm_hypotheses(a: Analysis, eps) -> np.ndarray:
    confidence = 1 - a.errors
    return (confidence > 1 - np.asarray(eps)[:, None]).all(axis=1) & ((a.length + 1) * np.asarray(eps) <= 1)


def fastdllm_theorem(a: Analysis, eps) -> TheoremResult:
    """T2: p_j(x*_j) > 1 - eps for all j and (n+1) eps <= 1 => argmax p = argmax q = x*."""
    return TheoremResult("T2 Fast-dLLM argmax", "p_j(x*_j) > 1-eps, (n+1) eps <= 1 => argmax p = argmax q = x*",
                         fastdllm_hypotheses(a, eps), a.unique_argmax & _marginal_top1_unique(a),
                         {"p* - max other": a.p_star - a.best_other}, {"p* - max other": True},
                         rounding=rounding_for(a))


def fastdllm_tv(a: Analysis, eps, published: bool) -> TheoremResult:
    """T2c: TV < (3n-1) eps / 2 (published); TV <= 1 - min(p*, q*) <= S < n eps (this library)."""
    eps = np.asarray(eps)
    hyp = fastdllm_hypotheses(a, eps)
    true = np.ones_like(hyp)
    if published:
        return TheoremResult("T2c Fast-dLLM TV (published)", "TV < (3n-1) eps / 2", hyp, true,
                             {"TV": (3 * a.length - 1) * eps / 2 - a.tv}, {"TV": True}, True, rounding_for(a))
    tight = 1 - np.minimum(a.p_star, a.q_star)
    return TheoremResult("T2c Fast-dLLM TV (tighter)", "TV <= 1 - min(p*, q*) <= S < n eps", hyp, true,
                         {"1-min(p*,q*)": tight - a.tv, "S": a.total_error - tight,
                          "n eps": a.length * eps - a.total_error},
                         {"1-min(p*,q*)": False, "S": False, "n eps": True}, rounding=rounding_for(a))


def fastdllm_kl(a: Analysis, eps, published: bool) -> TheoremResult:
    """T2d: KL(p||q) < (n-1) f_V(eps) (published; off at n = 1) or <= (corrected; strict for n >= 2)."""
    if a.kl is None:
        raise ValueError("KL needs a float64 batch (exact batches carry no logarithms)")
    eps = np.asarray(eps, dtype=float)
    bound = (a.length - 1) * f_v(eps, a.num_symbols)
    strict = published or a.length >= 2
    name = "T2d Fast-dLLM KL (published)" if published else "T2d Fast-dLLM KL (corrected)"
    statement = "KL < (n-1) f_V(eps)" if published else "KL <= (n-1) f_V(eps), strict for n >= 2"
    # n = 1: q is p itself, KL and the bound are exact zeros, so strictness is decidable without rounding
    rounding = 0.0 if a.length == 1 else rounding_for(a)
    return TheoremResult(name, statement, fastdllm_hypotheses(a, eps), np.ones(len(eps), dtype=bool),
                         {"KL": bound - a.kl}, {"KL": strict}, published, rounding)


def cluster_parameters(a: Analysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(anchor index, kappa, tau) per case: the most confident position is the anchor (lowest on ties),
    kappa its confidence, tau the smallest confidence among the others (the realized thresholds); exact
    batches keep Fractions, so T3's strict comparisons are decided exactly."""
    confidence = 1 - a.errors  # [N, n], Fractions in exact batches
    anchor = np.argmax(confidence, axis=1)
    kappa = confidence.max(axis=1)
    others = confidence.copy()
    np.put_along_axis(others, anchor[:, None], np.inf, axis=1)
    return anchor, kappa, others.min(axis=1)


def cluster_certificate(a: Analysis) -> TheoremResult:
    """T3: anchor >= kappa, m = n-1 neighbours >= tau, 1/2 < tau < kappa < 1, (1-kappa) + m(1-tau) < tau =>
    x* unique argmax."""
    _, kappa, tau = cluster_parameters(a)
    m = a.length - 1
    if m < 1:  # a cluster needs a neighbour
        hyp = np.zeros(len(kappa), dtype=bool)
    else:
        hyp = ((0.5 < tau) & (tau < kappa) & (kappa < 1) & ((1 - kappa) + m * (1 - tau) < tau)).astype(bool)
    return TheoremResult("T3 LocalLeap cluster certificate", "(1-kappa) + m(1-tau) < tau => x* unique argmax",
                         hyp, a.unique_argmax, {"p* - max other": a.p_star - a.best_other},
                         {"p* - max other": True}, rounding=rounding_for(a))


def concatenation_claim(a: Analysis, clusters: list[list[int]]) -> TheoremResult:
    """T3b (published, off): every cluster certified on its own (T3 on its marginal joint) => the
    concatenation of cluster argmaxes is the unique global argmax."""
    shape = [a.num_symbols] * a.length
    joints = a.joints.reshape(-1, *shape)
    certified = np.ones(len(joints), dtype=bool)
    for cluster in clusters:
        drop = tuple(1 + j for j in range(a.length) if j not in cluster)
        certified &= cluster_certificate(analyse(joints.sum(axis=drop))).hypotheses
    return TheoremResult("T3b concatenation of clusters (published)",
                         "each cluster certified => concatenation is the global argmax", certified, a.unique_argmax,
                         published=True)


def distance_bounds(a: Analysis) -> TheoremResult:
    """T5 (no hypotheses): |p*-q*| <= S - e_max, L2 <= ((S-e_max)^2 + 2 S^2)^(1/2), TV <= (3S - e_max)/2,
    TV <= 1 - min(p*, q*); KL <= sum over non-anchor positions of H(X_j) <= m f_V(1 - tau) when tau >= 1/2."""
    s, e_max = a.total_error.astype(float), a.max_error.astype(float)
    slacks = {"|p*-q*|": (s - e_max) - np.abs((a.p_star - a.q_star).astype(float)),
              "L2": np.sqrt((s - e_max) ** 2 + 2 * s**2) - a.lp_distance(2),
              "TV (3S-e_max)/2": (3 * s - e_max) / 2 - a.tv.astype(float),
              "TV 1-min(p*,q*)": 1 - np.minimum(a.p_star, a.q_star).astype(float) - a.tv.astype(float)}
    if a.kl is not None:
        anchor, _, tau = cluster_parameters(a)  # a float batch: KL needs logs
        entropies = a.entropies.copy()
        np.put_along_axis(entropies, anchor[:, None], 0.0, axis=1)
        neighbour_entropy = entropies.sum(axis=1)
        slacks["KL <= sum H"] = neighbour_entropy - a.kl
        cap = np.where(tau >= 0.5, (a.length - 1) * f_v(np.clip(1 - tau, 0, 1), a.num_symbols), np.inf)
        slacks["sum H <= m f_V(1-tau)"] = cap - neighbour_entropy
    return TheoremResult("T5 distance bounds", "Lp / TV / KL bounds of p vs q", np.ones(len(s), dtype=bool),
                         np.ones(len(s), dtype=bool), slacks, {k: False for k in slacks}, rounding=rounding_for(a))
