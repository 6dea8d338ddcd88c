"""SGLang's ``Gemma4Renoise`` held to DiffusionGemma's rule (spec/engines.md EN8): the rule one row follows over
one canvas, fed the engine's logits, with the draws SGLang states (per-request generators), the knobs a case
draws, and the differences from transformers' ``generate`` that SGLang's code makes (typed outcomes).

The rule is spec/diffusiongemma.md's step (veridec.rules.diffusiongemma: the float32 temperature of DG3.2, the
entropies and non-strict acceptance of DG3.4, the renoising of DG3.5, the k + 1 stop of DG4) with one stated
change, the draws (``stream``): SGLang gives each row its own ``torch.Generator`` seeded with the config's
``seed`` or, without one, ``int.from_bytes(blake2b(rid, digest_size=8), "little")``; it draws the canvas's start
``randint(V, (L,))``, then per step the denoiser's sample as an exponential race (``argmax(p / e)``, ``e`` an
``exponential_`` [L, V] draw: the categorical law of ``p``, another stream than ``multinomial``) and the noise
``randint(V, (L,))``; a finished row draws nothing more.
"""

from __future__ import annotations

import hashlib
import math

import torch
from hypothesis import strategies as st

from veridec.rules.diffusiongemma import DGParams, accepted_positions, processed_logits, token_entropy

SCHEDULES = ((0.4, 0.8), (0.001, 0.002), (0.9, 1.5))  # SGLang's (and the official) default first
BOUNDS = (0.1, 0.5, 2.0)
STABILITY = (1, 0, 2, 3)
CONFIDENCE = (0.005, 0.4, 1.0, 0.05)
SEEDS = (None, 0, 7)  # None: each row's generator seeded from its request id


def request_seed(seed: int | None, rid: str) -> int:
    """SGLang's per-request seed: the config's ``seed``, else the request id's blake2b (8 bytes, little-endian)."""
    if seed is not None:
        return seed
    return int.from_bytes(hashlib.blake2b(rid.encode(), digest_size=8).digest(), "little")


def params_of(config: dict) -> DGParams:
    """The flat knobs of a case as DiffusionGemma's settings (no EOS, no padding: the scheduler's, not the step's)."""
    return DGParams(max_denoising_steps=config["max_denoising_steps"], entropy_bound=config["entropy_bound"],
                    t_min=config["t_min"], t_max=config["t_max"], stability_threshold=config["stability_threshold"],
                    confidence_threshold=config["confidence_threshold"])


def sglang_config(config: dict) -> dict:
    """The flat knobs as Gemma4Renoise's ``algorithm_config`` (its nested sections)."""
    return {"max_denoising_steps": config["max_denoising_steps"],
            "sampler_config": {"entropy_bound": config["entropy_bound"]},
            "temperature_schedule": {"t_min": config["t_min"], "t_max": config["t_max"]},
            "stopping_config": {"stability_threshold": config["stability_threshold"],
                                "confidence_threshold": config["confidence_threshold"]},
            "seed": config.get("seed")}


class RenoiseDecision:
    """What the rule decides for one row at one step: the row's canvas after it [L] (the argmax canvas once the row
    has stopped), whether the row is done, and the parts: accepted [L] bool, sample [L], noise [L], argmax [L],
    entropies [L] (float32), the temperature, the smallest margin (acceptance, race, stop) and the entropies'
    rounding bound, and ``near_tie``: an entropy margin within the entropies' rounding or the race's relative margin
    within the probabilities' (``probability_rounding``)."""

    def __init__(self, **parts):
        self.__dict__.update(parts)


class RenoiseRule:
    """DiffusionGemma's rule for one row over one canvas, with SGLang's stated stream (module docstring)."""

    def __init__(self, config: dict, rid: str, vocab_size: int, length: int, device):
        self.p, self.vocab, self.length = params_of(config), vocab_size, length
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(request_seed(config.get("seed"), rid))
        self.start = torch.randint(vocab_size, (length,), device=device, generator=self.generator)  # [L]
        self.remaining, self.finished, self.history = self.p.max_denoising_steps, False, []
        self.processed = self.logits = self.earlier = None  # [L, V]: the last step's processed (the self-conditioning
        # input) and raw logits, and the processed logits of the step before (a wrong signal is named against them)

    def step(self, logits: torch.Tensor) -> RenoiseDecision:
        """logits [L, V] (float32, the engine's) -> the decision; call only while not finished."""
        p = self.p
        processed = processed_logits(logits[None], self.remaining, p)[0]  # [L, V] float32 (DG3.2)
        probs = torch.softmax(processed, dim=-1, dtype=torch.float32)  # [L, V]
        race = torch.empty_like(probs).exponential_(1.0, generator=self.generator)  # [L, V]
        ratio = probs / race  # [L, V]
        sample = ratio.argmax(dim=-1)  # [L]
        noise = torch.randint(self.vocab, (self.length,), device=logits.device, generator=self.generator)  # [L]
        entropy = token_entropy(processed)  # [L] float32
        accepted = accepted_positions(entropy[None], p.entropy_bound)[0]  # [L]
        argmax = processed.argmax(dim=-1)  # [L]
        stable = p.stability_threshold == 0 or (len(self.history) == p.stability_threshold and all(
            torch.equal(h, argmax) for h in self.history))
        mean = entropy.mean().item()
        self.history = (self.history + [argmax])[-p.stability_threshold:] if p.stability_threshold else []
        self.remaining -= 1
        self.finished = bool(stable and mean < p.confidence_threshold) or self.remaining == 0
        self.earlier, self.processed, self.logits = self.processed, processed, logits
        canvas = argmax if self.finished else torch.where(accepted, sample, noise)
        by_entropy = min(_acceptance_margin(entropy, p.entropy_bound),
                         abs(mean - p.confidence_threshold) if stable else math.inf)
        race, rounding = _race_margin(ratio), rounding_bound(processed)
        return RenoiseDecision(tokens=canvas, done=self.finished, accepted=accepted, sample=sample, noise=noise,
                               argmax=argmax, entropy=entropy, temperature=_temperature(p, self.remaining + 1),
                               margin=min(by_entropy, race), rounding=rounding,
                               near_tie=by_entropy <= rounding or race <= probability_rounding(processed))


def engine_temperature(p: DGParams, remaining: int) -> torch.Tensor:
    """SGLang's stated reading of DG3.2's schedule: t_min + (t_max - t_min) * (remaining / N) in Python floats,
    rounded once to float32 (its temperature table); transformers computes it in float32 tensor arithmetic, which
    differs by one float32 ulp at some steps (the stated difference ``temperature-rounding``)."""
    return torch.tensor(p.t_min + (p.t_max - p.t_min) * (remaining / p.max_denoising_steps), dtype=torch.float32,
                        device="cpu")


def _temperature(p: DGParams, remaining: int) -> float:
    return float(processed_logits(torch.ones(1, 1, 1, device="cpu"), remaining, p).reciprocal())


def _acceptance_margin(entropy: torch.Tensor, bound: float) -> float:
    """DG3.4's decision margin: min over ranks of |C_k - H_(k) - bound| (float64)."""
    ranked = entropy.double().sort().values
    return ((ranked.cumsum(0) - ranked) - bound).abs().min().item()


def _race_margin(ratio: torch.Tensor) -> float:
    """The sample's margin: the smallest relative gap between the best and second-best p / e of a position."""
    top = ratio.double().topk(min(2, ratio.shape[-1]), dim=-1).values  # [L, 2]
    return math.inf if top.shape[-1] < 2 else ((top[:, 0] - top[:, 1]) / top[:, 0]).min().item()


def rounding_bound(processed: torch.Tensor) -> float:
    """The float32 rounding of this step's entropies, measured: 4 x the sum over the canvas of |H32 - H64| (the
    entropies from float32 processed logits against a float64 rerun), plus 4 float32 epsilons of the largest sum
    (two float32 formulas of one entropy, log_softmax and Categorical's, differ within it)."""
    h32, h64 = token_entropy(processed), token_entropy(processed.double())  # [L], [L]
    return 4 * ((h32.double() - h64).abs().sum().item() + torch.finfo(torch.float32).eps * max(h64.sum().item(), 1))


def probability_rounding(processed: torch.Tensor) -> float:
    """The float32 rounding of this step's probabilities, measured, relative (the race's margin is): 4 x the largest
    |p32 - p64| / p64 of two float32 formulas (softmax, and exp of log_softmax: SGLang's) against a float64 rerun,
    over the probabilities float32 holds as normal numbers."""
    exact = torch.softmax(processed.double(), dim=-1)  # [L, V]
    held = exact >= torch.finfo(torch.float32).tiny  # [L, V]
    routes = (torch.softmax(processed, dim=-1, dtype=torch.float32),
              torch.log_softmax(processed, dim=-1, dtype=torch.float32).exp())  # [L, V] each
    return 4 * max(float(((r.double() - exact).abs() / exact)[held].max()) for r in routes)


def soft_embeddings(processed: torch.Tensor, embedding) -> torch.Tensor:
    """DG3.7's self-conditioning input as transformers forms it: softmax(processed) in float32, cast to the
    embedding's dtype, times the embedding matrix, times its scale. processed [L, V] -> [L, H]."""
    weight = embedding.weight
    return torch.softmax(processed, dim=-1, dtype=torch.float32).to(weight.dtype) @ weight * \
        embedding.embed_scale.to(weight.dtype)


@st.composite
def renoise_knobs(draw):
    """One case's flat knobs: 1-8 steps, a schedule, a bound, the stop thresholds, the seed."""
    t_min, t_max = draw(st.sampled_from(SCHEDULES))
    return {"max_denoising_steps": draw(st.integers(1, 8)), "entropy_bound": draw(st.sampled_from(BOUNDS)),
            "t_min": t_min, "t_max": t_max, "stability_threshold": draw(st.sampled_from(STABILITY)),
            "confidence_threshold": draw(st.sampled_from(CONFIDENCE)), "seed": draw(st.sampled_from(SEEDS))}


def temperature_for_signal(signal: torch.Tensor, rule: RenoiseRule, embedding) -> str:
    """Which self-conditioning input explains an engine's signal [L, H] best: the rule's last logits at the
    schedule's temperature for r = 0 .. N + 1 steps remaining, the raw logits, or the processed logits of the step
    before (said in words, with the rule's own: the diagnosis of a wrong signal)."""
    p, logits, used = rule.p, rule.logits, rule.remaining + 1
    options = {f"the temperature of step remaining={r} (the rule's: remaining={used})":
               processed_logits(logits[None], r, p)[0] for r in range(p.max_denoising_steps + 2)}
    options["the raw logits (no temperature)"] = logits
    if rule.earlier is not None:
        options["the processed logits of the step before"] = rule.earlier
    errors = {name: float((soft_embeddings(value, embedding) - signal).abs().max()) for name, value in
              options.items()}
    best = min(errors, key=errors.get)
    return f"{best} (within {errors[best]:.3g})"




@st.composite
def renoise_cases(draw, model, max_rows: int = 3, fixed: dict | None = None):
    """A case: 1..max_rows prompts (BOS then 0-5 ordinary tokens, ids 4 .. V - 1), 1-2 canvases, the knobs
    (``fixed`` overrides them), a request-id prefix."""
    bos = model.config.text_config.bos_token_id
    rows = draw(st.integers(1, max_rows))
    prompts = [[bos] + draw(st.lists(st.integers(4, model.vocab_size - 1), max_size=5)) for _ in range(rows)]
    return {"prompts": prompts, "canvases": draw(st.integers(1, 2)),
            "config": {**draw(renoise_knobs()), **(fixed or {})}, "rid": f"r{draw(st.integers(0, 999))}"}
