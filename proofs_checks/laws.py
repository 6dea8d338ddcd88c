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

import torch

from ..rules.step import decide

MAX_PROPOSALS = 4096  # proposal rows per state (V^m); larger states are refused


def decoder_law(oracle, rule, prompt: list[int], gen_length: int, temperature: float,
                block_length: int | None = None) -> dict[tuple, float]:
    """P(generated tokens) of ``rule``'s decode of ``prompt`` on ``oracle`` at ``temperature`` (0: the point mass
    of the greedy decode), in blocks of ``block_length`` (default one block), ties to the lowest index."""
    block_length = gen_length if block_length is None else block_length
    _check(oracle, rule, prompt, gen_length, temperature, block_length)
    mask_id, start = oracle.special.mask_id, len(prompt)

    @lru_cache(maxsize=None)
    def law_from(canvas: tuple, block_step: int) -> tuple[tuple[tuple, float], ...]:
        if mask_id not in canvas[start:]:
            return ((canvas[start:], 1.0),)
        law: dict[tuple, float] = {}
        for following, weight in _step(oracle, rule, canvas, block_step, start, block_length, temperature):
            block_end = _block_end(canvas, start, block_length, mask_id)
            done = mask_id not in following[block_end - block_length:block_end]
            for output, p in law_from(following, 0 if done else block_step + 1):
                law[output] = law.get(output, 0.0) + weight * p
        return tuple(law.items())

    return dict(law_from(tuple(prompt) + (mask_id,) * gen_length, 0))


def _step(oracle, rule, canvas: tuple, block_step: int, start: int, block_length: int, temperature: float):
    """The canvases one step leads to from ``canvas``, each with its probability."""
    mask_id, symbols = oracle.special.mask_id, oracle.num_symbols
    x = torch.tensor([canvas], dtype=torch.long, device="cpu")  # [1, L]
    end = _block_end(canvas, start, block_length, mask_id)
    positions = torch.arange(len(canvas), device="cpu")  # [L]
    candidates = (x == mask_id) & (positions < end)[None]  # [1, L]
    where = candidates[0].nonzero().flatten()  # [m]
    logits = oracle(x).logits  # [1, L, V + 1] float64
    rows, weights = _proposals(logits[0, where, :symbols], temperature)  # [K, m], [K]
    count = rows.shape[0]
    tokens = x.repeat(count, 1)  # [K, L] (non-candidates keep their token; they are never committed)
    tokens[:, where] = rows
    block_masks = (x[:, end - block_length:end] == mask_id).sum(dim=1)  # [1]
    result = decide(rule, logits.expand(count, -1, -1), x.expand(count, -1), candidates.expand(count, -1), tokens,
                    logits.expand(count, -1, -1), block_step=block_step,
                    block_masks_at_start=torch.full((count,), block_length, device="cpu"),
                    block_masks=block_masks.expand(count), block_length=block_length, dependency=None, state={})
    following: dict[tuple, float] = {}
    for row, weight in zip(result.x.tolist(), weights.tolist()):
        following[tuple(row)] = following.get(tuple(row), 0.0) + weight
    return following.items()


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
    if getattr(rule, "needs_attention", False) or hasattr(rule, "new_state"):
        raise ValueError(f"{rule.name}: rules that read attention or keep state across steps (DAPD, KLASS) are "
                         "not enumerated")


def joint_law(oracle, prompt: list[int], gen_length: int) -> dict[tuple, float]:
    """The oracle's joint law of the ``gen_length`` tokens after ``prompt``, by the chain rule over its exact
    conditionals: p(c) = prod_i p(c_i | prompt, c_<i) (any oracle; one batched call per position)."""
    completions = torch.tensor(list(itertools.product(range(oracle.num_symbols), repeat=gen_length)),
                               dtype=torch.long, device="cpu")  # [V^G, G]
    start, weights = len(prompt), torch.ones(completions.shape[0], dtype=torch.float64, device="cpu")
    for i in range(gen_length):
        x = torch.full((completions.shape[0], start + gen_length), oracle.special.mask_id, device="cpu")  # [V^G, L]
        x[:, :start] = torch.tensor(prompt, dtype=torch.long, device="cpu")
        x[:, start:start + i] = completions[:, :i]
        probs = oracle(x).logits[:, start + i].double().exp()  # [V^G, V + 1]
        weights = weights * probs.gather(1, completions[:, i:i + 1])[:, 0]
    return {tuple(c): w for c, w in zip(completions.tolist(), weights.tolist()) if w > 0}


def total_variation(p: dict, q: dict) -> float:
    return 0.5 * sum(abs(p.get(x, 0.0) - q.get(x, 0.0)) for x in p.keys() | q.keys())


def kl_divergence(p: dict, q: dict) -> float:
    """KL(p || q) in nats (inf where p puts mass q does not)."""
    return sum(w * (math.log(w / q[x]) if q.get(x, 0.0) > 0 else math.inf) for x, w in p.items() if w > 0)


TABLE_DECODERS = ("sequential", "conf-hq", "fastdllm", "fastdllm-ht", "factor", "eb-hq", "localleap",
                  "fastdllm-certified", "fastdllm-ht-certified", "localleap-certified")


def decoder_table(cases: int = 20, seed: int = 0, temperature: float = 1.0, symbols: int = 3,
                  gen_length: int = 4) -> list[dict]:
    """TD1's table: for each preset and oracle family (random enumerated joints over V^(1 + G), random 4-state
    HMMs), the exact TV and KL(joint || decoder) between the decode's law and the oracle's joint over ``cases``
    oracles, one prompt symbol each. No bound is stated for sampled decodes (TD1), so none is held."""
    from ..oracles import EnumeratedJoint, HMMOracle
    from ..rules.presets import PRESETS

    families = {"enumerated": lambda i: EnumeratedJoint.random(symbols, gen_length + 1, seed=seed + i,
                                                               concentration=0.3),
                "hmm": lambda i: HMMOracle.random(4, symbols, seed=seed + i)}
    rows = []
    for family, make in families.items():
        oracles = [make(i) for i in range(cases)]
        joints = [joint_law(o, [i % symbols], gen_length) for i, o in enumerate(oracles)]
        for name in TABLE_DECODERS:
            laws = [decoder_law(o, PRESETS[name], [i % symbols], gen_length, temperature)
                    for i, o in enumerate(oracles)]
            tvs = [total_variation(law, joint) for law, joint in zip(laws, joints)]
            kls = [kl_divergence(joint, law) for law, joint in zip(laws, joints)]
            rows.append({"decoder": name, "oracle": family, "cases": cases, "max_tv": max(tvs),
                         "mean_tv": sum(tvs) / cases, "max_kl_joint_to_decoder": max(kls),
                         "mass_error": max(abs(sum(law.values()) - 1) for law in laws)})
    return rows


def table_markdown(rows: list[dict], temperature: float) -> str:
    lines = [f"Exact output laws at T = {temperature} against the oracle's joint (spec/theorems.md TD1; no bound is "
             "stated for sampled decodes)", "",
             "| decoder | oracle | cases | max TV | mean TV | max KL(joint || decoder) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['decoder']} | {r['oracle']} | {r['cases']} | {r['max_tv']:.4f} | {r['mean_tv']:.4f} | "
              f"{r['max_kl_joint_to_decoder']:.4f} |" for r in rows]
    return "\n".join(lines) + "\n"
