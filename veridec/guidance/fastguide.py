"""FastGuide's hybrid step, the part shared by the exact and the sparse decoders (spec/guidance.md GF1-GF4).

Per step: one full guided pass (dLLM logits l_0 and guidance r_0); the k most confident masked response slots
under softmax(l_0 + r_0) are the candidates a_1..a_k (ties to the lowest slot); a_1 is sampled from the
guided distribution and committed; each later a_j gets recomputed dLLM logits l_j (exact: a full forward;
sparse: windows around the last committed token and a_j), phi_j = l_j + r_0, a token c_j ~ softmax(phi_j / T)
(top-p; greedy: argmax), committed only when max softmax(phi_j) >= tau (confidence deferral). The candidates
are verified from high to low confidence unless ``order`` says otherwise (seed 000 Table 8's ablation).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..canvas import initial_canvas
from ..checks import check_choice, check_flag, check_generator, check_range
from ..decoding import check_logits
from ..trace import Trace, record_step
from .guide import guidance_vector
from .sampling import sample_token, slot_confidence


@dataclass(frozen=True)
class FastGuideParams:
    k: int = 8  # candidate budget
    tau: float = 0.5  # deferral threshold
    window: int = 2  # w: recomputation window radius (sparse decoder)
    temperature: float = 0.7
    top_p: float = 0.95
    greedy: bool = False  # candidates after the first take their recomputed argmax (seed 000 Table 9)
    order: str = "confidence"  # verification order of the k candidates (ORDERS; seed 000 Table 8)

    def __post_init__(self):
        check_range("k", self.k, low=1, integer=True)
        check_range("tau", self.tau, low=0, high=1)
        check_range("window", self.window, low=0, integer=True)
        check_range("temperature", self.temperature, low=0, low_open=True)
        check_range("top_p", self.top_p, low=0, high=1, low_open=True)
        check_choice("order", self.order, ORDERS)
        check_flag("greedy", self.greedy)


ORDERS = ("confidence", "reverse-confidence", "left-to-right", "random")  # high->low, low->high, by slot, shuffled
PRESETS = {"fastguide-hq": FastGuideParams(k=8), "fastguide-ht": FastGuideParams(k=16)}  # seed 000 Table 2


def candidates(guided: torch.Tensor, masked: torch.Tensor, k: int, mask_id: int, order: str = "confidence",
               generator: torch.Generator | None = None) -> list[list[int]]:
    """Per row, the (up to) k masked slots most confident under ``guided`` [B, G, V] (ties to the lowest slot),
    listed in verification ``order`` [B][<=k]."""
    confidence = slot_confidence(guided, masked, mask_id)  # [B, G]
    ranked = torch.sort(confidence, dim=1, descending=True, stable=True).indices[:, :k]  # [B, k]
    chosen = [[int(s) for s in row[:int(m.sum())]] for row, m in zip(ranked, masked)]
    if order == "reverse-confidence":
        return [row[::-1] for row in chosen]
    if order == "left-to-right":
        return [sorted(row) for row in chosen]
    if order == "random":
        device = generator.device if generator is not None else "cpu"  # randperm draws where its generator lives
        return [[row[i] for i in torch.randperm(len(row), generator=generator, device=device).tolist()]
                for row in chosen]
    return chosen


def start(name: str, model, prompt: torch.Tensor, reward, prompt_texts: list[str], attention_mask, gen_length: int,
          params: FastGuideParams, guidance, generator):
    """What both FastGuide decoders begin with (``name``: the trace's): the arguments checked, the canvas [B, L]
    and its attention mask, the reward bound to the prompts, the trace."""
    check_generator(generator)
    x, attention_mask = initial_canvas(model, prompt, attention_mask, gen_length, model.special.mask_id)
    trace = Trace(name, {**params.__dict__, "guidance": guidance.__dict__}, prompt.shape[1], prompt.shape[0])
    return x, attention_mask, reward.bind(prompt_texts), trace


def hybrid_step(x: torch.Tensor, prompt_len: int, recomputer, reward, params: FastGuideParams, guidance,
                mask_id: int, trace, generator: torch.Generator | None = None) -> torch.Tensor:
    """Algorithm 1 of seed 000 on a batch [B, L]; returns the new canvas and records one trace step.

    ``recomputer.full(x) -> [B, G, V]`` is the step's full pass (response logits); ``recomputer.candidate(x,
    previous [B], slot [B]) -> [B, V]`` recomputes the logits of each row's candidate slot after the previous
    commit (exact: a full forward; sparse: windows). Slots are response indices."""
    rows = torch.arange(x.shape[0], device=x.device)
    before = x[:, prompt_len:].clone()
    logits0 = recomputer.full(x)  # [B, G, V]
    check_logits(logits0, trace.progress, offset=prompt_len)
    masked = before == mask_id
    r0 = guidance_vector(reward, logits0, before, masked, guidance, generator, trace.counters)
    slots = candidates(logits0 + r0, masked, params.k, mask_id, params.order, generator)
    confidence = torch.full(before.shape, -torch.inf, dtype=torch.float64, device=x.device)
    order: list[list[int]] = [[] for _ in slots]
    previous = torch.tensor([s[0] if s else 0 for s in slots], device=x.device)
    for j in range(max(len(s) for s in slots)):
        active = torch.tensor([j < len(s) for s in slots], device=x.device)
        slot = torch.tensor([s[j] if j < len(s) else s[0] if s else 0 for s in slots], device=x.device)
        logits = logits0[rows, slot] if j == 0 else recomputer.candidate(x, previous, slot)  # [B, V]
        check_logits(logits, trace.progress, what=f"candidate {j}'s recomputed logits")
        token, gamma = sample_token(logits + r0[rows, slot], mask_id, params.temperature, params.top_p,
                                    greedy=params.greedy and j > 0, generator=generator)
        commit = active & ((gamma >= params.tau) | (j == 0))
        x = x.clone()
        x[rows[commit], prompt_len + slot[commit]] = token[commit]
        confidence[rows[commit], slot[commit]] = gamma[commit].double()
        previous = torch.where(commit, slot, previous)
        for b in rows[commit].tolist():
            order[b].append(int(slot[b]))
    stuck = [b for b, row in enumerate(slots) if row and not order[b]]
    if stuck:  # the first candidate always commits (GF1): a step without a commit would repeat forever
        raise RuntimeError(f"FastGuide step {len(trace.steps)} committed nothing in row(s) {stuck}")
    record_step(trace, 0, before, x[:, prompt_len:], mask_id, confidence, logits0 + r0, order, offset=prompt_len)
    return x
