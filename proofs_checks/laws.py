"""Exact output laws of sampled parallel decoders on oracle models (spec/theorems.md TD1).

A decode at temperature T proposes, at each candidate mask, a token drawn from softmax(logits / T) (LLaDA's
Gumbel-max, SQ1.4), independently; the rule then commits some proposals, a deterministic function of the
proposals and their confidences (``low_confidence`` remasking). So every stochastic branch of a decode is a
choice of proposals, and the probability of an output is a finite sum: each state's V^m proposal rows (m
candidates) go through the production rule in one batch (``rules.step.decide``), rows that give the same canvas
merge, and the states recurse, memoized on (canvas, step in block). Float64 throughout.

    law = decoder_law(oracle, TopK(1), prompt=[], gen_length=4, temperature=1.0)   # {sequence: probability}
    total_variation(law, joint_law(oracle, [], 4))
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from time import perf_counter

import torch

from ..checks import check_integer
from ..rules.parallel import Threshold, TopK, new_state
from ..rules.step import decide

MAX_PROPOSALS = 4096  # proposal rows per state (V^m); larger states are refused


def decoder_law(oracle, rule, prompt: list[int], gen_length: int, temperature: float,
                block_length: int | None = None) -> dict[tuple, float]:
    """P(generated tokens) of ``rule``'s decode of ``prompt`` on ``oracle`` at ``temperature`` (0: the point mass
    of the greedy decode), in blocks of ``block_length`` (default one block), ties to the lowest index. A rule
    with memory across steps (KLASS) carries it along each branch (part of the memo key)."""
    block_length = gen_length if block_length is None else block_length
    _check(oracle, rule, prompt, gen_length, temperature, block_length)
    mask_id, start = oracle.special.mask_id, len(prompt)
    canvas = tuple(prompt) + (mask_id,) * gen_length

    @lru_cache(maxsize=None)
    def law_from(canvas: tuple, block_step: int, memory: Memory) -> tuple[tuple[tuple, float], ...]:
        if mask_id not in canvas[start:]:
            return ((canvas[start:], 1.0),)
        law: dict[tuple, float] = {}
        end = _block_end(canvas, start, block_length, mask_id)
        following, after = _step(oracle, rule, canvas, block_step, end, block_length, temperature, memory)
        for next_canvas, weight in following:
            done = mask_id not in next_canvas[end - block_length:end]
            for output, p in law_from(next_canvas, 0 if done else block_step + 1, after):
                law[output] = law.get(output, 0.0) + weight * p
        return tuple(law.items())

    return dict(law_from(canvas, 0, Memory(new_state(rule, 1, len(canvas), "cpu"))))


class Memory:
    """A rule's state across steps (KLASS: its last predictions and stable-step counts; {} for the others) for
    one decode path, hashable by its contents so equal states share a memo entry."""

    def __init__(self, state: dict):
        self.state = state
        self.key = tuple((name, None if t is None else (str(t.dtype), tuple(t.shape), t.numpy().tobytes()))
                         for name, t in sorted(state.items()))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, Memory) and self.key == other.key

    def expanded(self, rows: int) -> dict:
        """The state for ``rows`` proposal rows decided in one batch (each row its own copy)."""
        return {name: None if t is None else t.expand(rows, *t.shape[1:]).clone() for name, t in self.state.items()}


def _step(oracle, rule, canvas: tuple, block_step: int, end: int, block_length: int, temperature: float,
          memory: Memory):
    """The canvases one step leads to from ``canvas`` (its open block ends at ``end``), each with its
    probability, and the rule's memory after the step (it must not depend on the proposals: KLASS's reads the
    predictions only)."""
    mask_id, symbols = oracle.special.mask_id, oracle.num_symbols
    x = torch.tensor([canvas], dtype=torch.long, device="cpu")  # [1, L]
    positions = torch.arange(len(canvas), device="cpu")  # [L]
    candidates = (x == mask_id) & (positions < end)[None]  # [1, L]
    where = candidates[0].nonzero().flatten()  # [m]
    logits = oracle(x).logits  # [1, L, V + 1] float64
    rows, weights = _proposals(logits[0, where, :symbols], temperature)  # [K, m], [K]
    count = rows.shape[0]
    tokens = x.repeat(count, 1)  # [K, L] (non-candidates keep their token; they are never committed)
    tokens[:, where] = rows
    block_masks = (x[:, end - block_length:end] == mask_id).sum(dim=1)  # [1]
    state = memory.expanded(count)
    result = decide(rule, logits.expand(count, -1, -1), x.expand(count, -1), candidates.expand(count, -1), tokens,
                    logits.expand(count, -1, -1), block_step=block_step,
                    block_masks_at_start=torch.full((count,), block_length, device="cpu"),
                    block_masks=block_masks.expand(count), block_length=block_length, dependency=None, state=state)
    if any(t is not None and not torch.equal(t, t[:1].expand_as(t)) for t in state.values()):
        raise RuntimeError(f"{rule.name}: its memory depends on the proposed tokens; the law cannot be enumerated "
                           "state by state")
    following: dict[tuple, float] = {}
    for row, weight in zip(result.x.tolist(), weights.tolist()):
        following[tuple(row)] = following.get(tuple(row), 0.0) + weight
    after = Memory({name: None if t is None else t[:1].clone() for name, t in state.items()})
    return following.items(), after


def _proposals(logits: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Every proposal row over the m candidates' logits [m, V] with its probability: products of
    softmax(logits / T) (T > 0), or the argmax row with probability 1 (T = 0, ties to the lowest id)."""
    if temperature == 0:
        return logits.argmax(dim=-1)[None], torch.ones(1, dtype=torch.float64, device="cpu")
    probs = torch.softmax(logits.double() / temperature, dim=-1)  # [m, V]
    m, symbols = probs.shape
    rows = torch.tensor(list(itertools.product(range(symbols), repeat=m)), dtype=torch.long,
                        device="cpu").reshape(-1, m)  # [V^m, m]
    weights = probs.gather(1, rows.T).prod(dim=0) if m else torch.ones(1, dtype=torch.float64, device="cpu")
    keep = weights > 0
    return rows[keep], weights[keep]


def _block_end(canvas: tuple, start: int, block_length: int, mask_id: int) -> int:
    """The end of the first block that still holds a mask."""
    first = next(i for i in range(start, len(canvas)) if canvas[i] == mask_id)
    return start + ((first - start) // block_length + 1) * block_length


def _check(oracle, rule, prompt, gen_length: int, temperature: float, block_length: int) -> None:
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not isinstance(gen_length, int) or gen_length < 1 or len(prompt) + gen_length > oracle.max_length:
        raise ValueError(f"gen_length must be an integer in [1, {oracle.max_length - len(prompt)}] for this oracle "
                         f"and prompt, got {gen_length!r}")
    if not isinstance(block_length, int) or block_length < 1 or gen_length % block_length:
        raise ValueError(f"block_length must divide gen_length ({gen_length}), got {block_length!r}")
    if any(not 0 <= t < oracle.num_symbols for t in prompt):
        raise ValueError(f"prompt: symbols must lie in [0, {oracle.num_symbols}) (no masks), got {prompt}")
    if temperature > 0 and oracle.num_symbols ** block_length > MAX_PROPOSALS:
        raise ValueError(f"{oracle.num_symbols}^{block_length} proposal rows per step exceed {MAX_PROPOSALS}: use "
                         "fewer symbols or a shorter block_length (the cost grows as V^m per state)")
    if getattr(rule, "needs_attention", False):
        raise ValueError(f"{rule.name}: rules that read attention (DAPD) are not enumerated (an oracle has none)")


def random_order_law(oracle, rule, prompt: list[int], gen_length: int,
                     block_length: int | None = None) -> tuple[dict[tuple, float], float]:
    """TD2: the law at T = 1 with ``remasking="random"`` (positions ranked by U(0, 1) draws, independent of the
    sampled tokens) of TopK(k) or Threshold(tau) (not certified), and the bound E[sum over steps of
    TV(product of the committed positions' marginals, their joint given the canvas)] along the decode."""
    block_length = gen_length if block_length is None else block_length
    _check(oracle, rule, prompt, gen_length, 1.0, block_length)
    if not isinstance(rule, (TopK, Threshold)) or getattr(rule, "certified", False):
        raise ValueError(f"{rule.name}: random-order laws are enumerated for TopK and Threshold (not certified), "
                         "whose selection under random remasking does not read the sampled tokens")
    mask_id, start = oracle.special.mask_id, len(prompt)

    @lru_cache(maxsize=None)
    def law_from(canvas: tuple) -> tuple[tuple[tuple[tuple, float], ...], float]:
        if mask_id not in canvas[start:]:
            return ((canvas[start:], 1.0),), 0.0
        end = _block_end(canvas, start, block_length, mask_id)
        where = [i for i in range(start, end) if canvas[i] == mask_id]
        marginals = oracle(torch.tensor([canvas], device="cpu")).logits[0, :, :oracle.num_symbols].exp()  # [L, V]
        law, bound = {}, 0.0
        for chosen, p_chosen in _random_selections(rule, where):
            product, joint = _subset_laws(oracle, canvas, chosen, marginals)
            bound += p_chosen * total_variation(product, joint)
            for tokens, weight in product.items():
                following = list(canvas)
                for position, token in zip(chosen, tokens):
                    following[position] = token
                sub_law, sub_bound = law_from(tuple(following))
                bound += p_chosen * weight * sub_bound
                for output, p in sub_law:
                    law[output] = law.get(output, 0.0) + p_chosen * weight * p
        return tuple(law.items()), bound

    law, bound = law_from(tuple(prompt) + (mask_id,) * gen_length)
    return dict(law), bound


def _random_selections(rule, where: list[int]):
    """(positions committed, probability) under U(0, 1) confidences: TopK(k) a uniform min(k, m)-subset;
    Threshold(tau) the positions whose draw reaches tau (each 1 - tau, independently), or when none does the
    largest draw (uniform)."""
    m = len(where)
    if isinstance(rule, TopK):
        size = min(rule.k, m)
        subsets = list(itertools.combinations(where, size))
        return [(subset, 1 / len(subsets)) for subset in subsets]
    tau = rule.threshold
    return [(subset, (1 - tau) ** size * tau ** (m - size) + (tau ** m / m if size == 1 else 0.0))
            for size in range(1, m + 1) for subset in itertools.combinations(where, size)]


def _subset_laws(oracle, canvas: tuple, chosen: tuple, marginals: torch.Tensor) -> tuple[dict, dict]:
    """(product of the chosen positions' marginals, their joint given the canvas by the chain rule)."""
    joint = _chain_rule(oracle, canvas, chosen)
    product = {r: math.prod(marginals[j, t].item() for j, t in zip(chosen, r)) for r in joint}
    return {r: w for r, w in product.items() if w > 0}, joint


def _chain_rule(oracle, canvas: tuple, positions) -> dict[tuple, float]:
    """The joint law of ``positions`` (masked in ``canvas``) given the rest, by the chain rule over the oracle's
    exact conditionals: p(v) = prod_i p(v_i | canvas, v_<i) (one batched call per position)."""
    rows = list(itertools.product(range(oracle.num_symbols), repeat=len(positions)))
    x = torch.tensor([canvas] * len(rows), dtype=torch.long, device="cpu")  # [V^s, L]
    values = torch.tensor(rows, dtype=torch.long, device="cpu").reshape(len(rows), len(positions))  # [V^s, s]
    weights = torch.ones(len(rows), dtype=torch.float64, device="cpu")
    for i, position in enumerate(positions):
        probs = oracle(x).logits[:, position].double().exp()  # [V^s, V + 1]
        weights = weights * probs.gather(1, values[:, i:i + 1])[:, 0]
        x[:, position] = values[:, i]
    return dict(zip(rows, weights.tolist()))


def joint_law(oracle, prompt: list[int], gen_length: int) -> dict[tuple, float]:
    """The oracle's joint law of the ``gen_length`` tokens after ``prompt`` (any oracle, by the chain rule)."""
    canvas = tuple(prompt) + (oracle.special.mask_id,) * gen_length
    law = _chain_rule(oracle, canvas, range(len(prompt), len(canvas)))
    return {c: w for c, w in law.items() if w > 0}


def total_variation(p: dict, q: dict) -> float:
    """TV(p, q) = 1/2 sum |p(x) - q(x)| of two laws over outcomes of one length (laws over canvases of different
    lengths are refused: their TV of 1 would say nothing about the decoders)."""
    lengths = {len(x) for x in p.keys() | q.keys() if isinstance(x, tuple)}
    if len(lengths) > 1:
        raise ValueError(f"total_variation: the two laws' outcomes must have one length, got lengths {sorted(lengths)}")
    return 0.5 * sum(abs(p.get(x, 0.0) - q.get(x, 0.0)) for x in p.keys() | q.keys())


def kl_divergence(p: dict, q: dict) -> float:
    """KL(p || q) in nats (inf where p puts mass q does not)."""
    return sum(w * (math.log(w / q[x]) if q.get(x, 0.0) > 0 else math.inf) for x, w in p.items() if w > 0)


TABLE_DECODERS = ("sequential", "conf-hq", "fastdllm", "fastdllm-ht", "factor", "eb-hq", "localleap", "klass-hq",
                  "fastdllm-certified", "fastdllm-ht-certified", "localleap-certified")
RANDOM_ORDER = ("sequential", "conf-hq", "fastdllm", "fastdllm-ht")  # TD2: remasking="random", T = 1
ROUNDING = 1e-12  # float64 sums over at most a few thousand terms


def decoder_table(cases: int = 20, seed: int = 0, temperature: float = 1.0, symbols: int = 3,
                  gen_length: int = 4, progress: bool = False, on_first_case=None) -> list[dict]:
    """TD1's table: for each preset and oracle kind (random enumerated joints over V^(1 + G), random 4-state
    HMMs), the exact TV and KL(joint || decoder) between the decode's law and the oracle's joint over ``cases``
    oracles, one prompt symbol each. Confidence remasking at ``temperature``: no bound is stated (TD1). Random
    remasking at T = 1 (TD2): the bound, its violations (TV above it by more than ROUNDING) and the tightest
    slack. Oracles are taken one at a time (oracle i of each kind, every decoder), the rows kept as running
    sums, so memory does not grow with ``cases``. ``on_first_case(seconds)``: called with the time the first
    oracle took (both kinds, every decoder) when more follow, before any progress is shown; it may raise to
    stop a run that would take too long. ``progress``: a bar on stderr (one step per oracle) with the time
    left."""
    from tqdm import tqdm

    from ..oracles import EnumeratedJoint, HMMOracle
    from ..rules.presets import PRESETS

    check_integer("cases", cases, 1)
    kinds = {"enumerated": lambda i: EnumeratedJoint.random(symbols, gen_length + 1, seed=seed + i,
                                                               concentration=0.3),
                "hmm": lambda i: HMMOracle.random(4, symbols, seed=seed + i)}
    rows = {(kind, name, remasking): _Row(name, remasking, kind) for kind in kinds
            for names, remasking in ((TABLE_DECODERS, "confidence"), (RANDOM_ORDER, "random (T = 1)"))
            for name in names}

    def one_oracle(i: int) -> None:
        prompt = [i % symbols]
        for kind, make in kinds.items():
            oracle = make(i)
            joint = joint_law(oracle, prompt, gen_length)
            for name in TABLE_DECODERS:
                law = decoder_law(oracle, PRESETS[name], prompt, gen_length, temperature)
                rows[kind, name, "confidence"].add(law, joint, None)
            for name in RANDOM_ORDER:
                law, bound = random_order_law(oracle, PRESETS[name], prompt, gen_length)
                rows[kind, name, "random (T = 1)"].add(law, joint, bound)

    start = perf_counter()
    one_oracle(0)
    if on_first_case is not None and cases > 1:
        on_first_case(perf_counter() - start)
    with tqdm(total=cases, initial=1, desc=f"laws of {cases} oracles", unit="oracle", disable=not progress) as bar:
        for i in range(1, cases):
            one_oracle(i)
            bar.update()
    return [row.summary() for row in rows.values()]


class _Row:
    """One row of TD1's table as running sums over the oracles (the same numbers as lists reduced at the end:
    maxima, minima, counts, and the TV sum taken in oracle order)."""

    def __init__(self, name: str, remasking: str, kind: str):
        self.name, self.remasking, self.kind = name, remasking, kind
        self.cases, self.max_tv, self.sum_tv, self.max_kl, self.mass_error = 0, -math.inf, 0.0, -math.inf, -math.inf
        self.max_bound, self.violations, self.tightest_slack = None, None, None

    def add(self, law: dict, joint: dict, bound: float | None) -> None:
        tv = total_variation(law, joint)
        self.cases += 1
        self.max_tv, self.sum_tv = max(self.max_tv, tv), self.sum_tv + tv
        self.max_kl = max(self.max_kl, kl_divergence(joint, law))
        self.mass_error = max(self.mass_error, abs(sum(law.values()) - 1))
        if bound is not None:
            slack = bound - tv
            self.max_bound = bound if self.max_bound is None else max(self.max_bound, bound)
            self.violations = (self.violations or 0) + (slack < -ROUNDING)
            self.tightest_slack = slack if self.tightest_slack is None else min(self.tightest_slack, slack)

    def summary(self) -> dict:
        return {"decoder": self.name, "remasking": self.remasking, "oracle": self.kind, "cases": self.cases,
                "max_tv": self.max_tv, "mean_tv": self.sum_tv / self.cases, "max_kl_joint_to_decoder": self.max_kl,
                "mass_error": self.mass_error, "max_bound": self.max_bound, "violations": self.violations,
                "tightest_slack": self.tightest_slack}


def table_markdown(rows: list[dict], temperature: float) -> str:
    cell = lambda value: "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
    lines = [f"Exact output laws against the oracle's joint (spec/theorems.md TD1, TD2): confidence remasking at "
             f"T = {temperature} (no bound stated), random remasking at T = 1 (TD2's bound)", "",
             "| decoder | remasking | oracle | cases | max TV | mean TV | max KL(joint || decoder) | max bound | "
             "violations | tightest slack |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['decoder']} | {r['remasking']} | {r['oracle']} | {r['cases']} | {r['max_tv']:.4f} | "
              f"{r['mean_tv']:.4f} | {r['max_kl_joint_to_decoder']:.4f} | {cell(r['max_bound'])} | "
              f"{cell(r['violations'])} | {cell(r['tightest_slack'])} |" for r in rows]
    return "\n".join(lines) + "\n"
