"""DiffusionGemma's decoding rule (spec/diffusiongemma.md DG3-DG6), shared by veridec.reference.diffusiongemma and
veridec.optimized.diffusiongemma: the settings and their defaults, the linear temperature schedule, the draws,
entropy-bound acceptance, renoising, the stable-and-confident stop and a canvas's EOS / padding.

Steps are counted as the official loop counts them, by the steps *remaining*: ``remaining`` runs
max_denoising_steps .. 1 (the first forward of a canvas has remaining = N).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from veridec.checks import check_generator, check_integer, check_range, is_integer
from veridec.trace import Event, StepRecord, Trace

CACHE_IMPLEMENTATIONS = ("dynamic", "static")  # the official cache kinds a CPU decode can use (DG2.4)
DEFAULTS = {"max_new_tokens": 256, "max_denoising_steps": 48, "entropy_bound": 0.1, "t_min": 0.4, "t_max": 0.8,
            "stability_threshold": 1, "confidence_threshold": 0.005}  # the official global defaults (DG7.1)


@dataclass(frozen=True)
class DGParams:
    """One decode's settings (DG7); ``None`` turns a part off as the official code does (t_min or t_max: no
    temperature; stability_threshold or confidence_threshold: no adaptive stop; eos: no EOS stop; pad: no pad)."""

    max_new_tokens: int = 256
    max_denoising_steps: int = 48
    entropy_bound: float = 0.1
    t_min: float | None = 0.4
    t_max: float | None = 0.8
    stability_threshold: int | None = 1
    confidence_threshold: float | None = 0.005
    eos_token_id: tuple[int, ...] | None = None
    pad_token_id: int | None = None

    @property
    def adaptive_stop(self) -> bool:
        return self.stability_threshold is not None and self.confidence_threshold is not None

    @property
    def scheduled(self) -> bool:
        return self.t_min is not None and self.t_max is not None


def check_params(p: DGParams, vocab_size: int, canvas_length: int) -> None:
    """DG7.2: every setting refused by name with its range (the official validate's bounds, made total)."""
    check_integer("max_new_tokens", p.max_new_tokens)
    check_integer("max_denoising_steps", p.max_denoising_steps)
    check_range("entropy_bound", p.entropy_bound, low=0, low_open=True)
    for name in ("t_min", "t_max"):
        if getattr(p, name) is not None:
            check_range(name, getattr(p, name), low=0)
    if p.scheduled and not p.t_max > p.t_min:
        raise ValueError(f"t_max must be > t_min (the schedule falls from t_max to t_min), got t_min={p.t_min}, "
                         f"t_max={p.t_max}")
    if p.stability_threshold is not None:
        check_integer("stability_threshold", p.stability_threshold, low=0)
    if p.confidence_threshold is not None:
        check_range("confidence_threshold", p.confidence_threshold, low=0, low_open=True)
    for token in p.eos_token_id or ():
        check_range("eos_token_id", token, low=0, high=vocab_size - 1, integer=True)
    if p.pad_token_id is not None:
        check_range("pad_token_id", p.pad_token_id, low=0, high=vocab_size - 1, integer=True)
    check_integer("canvas_length", canvas_length)


def params_from(generation: dict, overrides: dict) -> DGParams:
    """The settings a decode runs with (DG7.1): ``overrides`` (the call's) over the checkpoint's ``generation``
    (generation_config.json, unset fields None) over the official defaults; ``sampler_config`` read as the
    official dataclass dict."""
    merged = {}
    sampler = generation.get("sampler_config")
    if isinstance(sampler, dict) and sampler.get("entropy_bound") is not None:
        merged["entropy_bound"] = sampler["entropy_bound"]
    for name in ("max_new_tokens", "max_denoising_steps", "t_min", "t_max", "stability_threshold",
                 "confidence_threshold", "eos_token_id", "pad_token_id"):
        if generation.get(name) is not None:
            merged[name] = generation[name]
    settings = {**DEFAULTS, **merged, **overrides}
    eos = settings.get("eos_token_id")
    if is_integer(eos):
        eos = (eos,)
    elif eos is not None:
        if not isinstance(eos, (list, tuple)) or not all(is_integer(e) for e in eos):
            raise ValueError(f"eos_token_id must be None, an integer or a list of integers, got {eos!r}")
        eos = tuple(eos)
    return DGParams(**{**{k: v for k, v in settings.items() if k in DGParams.__dataclass_fields__},
                       "eos_token_id": eos})


def canvases_for(p: DGParams, canvas_length: int) -> int:
    """DG6.1: ceil(max_new_tokens / canvas_length) canvases at most (the last one is not cut)."""
    return -(-p.max_new_tokens // canvas_length)


# ----------------------------------------------------------------------------------------------- one step's parts
def temperature(remaining: int, p: DGParams, device) -> torch.Tensor:
    """DG3.2: t_min + (t_max - t_min) * (remaining / N), with the official arithmetic (a float32 tensor)."""
    step = torch.tensor(remaining, dtype=torch.int32, device=device)
    return p.t_min + ((p.t_max - p.t_min) * (step / p.max_denoising_steps))


def processed_logits(logits: torch.Tensor, remaining: int, p: DGParams) -> torch.Tensor:
    """DG3.2: the logits [B, L, V] divided by the step's temperature (unchanged without a schedule)."""
    return logits / temperature(remaining, p, logits.device) if p.scheduled else logits


def per_row(generator) -> bool:
    """DG6.5: ``generator`` is one generator per row (a list or tuple), not one stream for the batch."""
    return isinstance(generator, (list, tuple))


def draw_sample(processed: torch.Tensor, generator, live: torch.Tensor | None = None) -> torch.Tensor:
    """DG3.3: one multinomial draw per position from softmax(processed) in float32, the canvas flattened
    row-major to [B * L, V] as the official call does. -> [B, L]. Per-row generators (DG6.5): each ``live`` row
    [B] draws its L positions from its own generator; the others draw nothing (their argmax stands in)."""
    batch, length, vocab = processed.shape
    probs = torch.softmax(processed, dim=-1, dtype=torch.float32)
    if not per_row(generator):
        return torch.multinomial(probs.view(-1, vocab), num_samples=1, generator=generator).view(batch, length)
    rows = live.tolist()
    return torch.stack([torch.multinomial(probs[b], num_samples=1, generator=g).view(length) if rows[b]
                        else probs[b].argmax(dim=-1) for b, g in enumerate(generator)])  # [B, L]


def draw_noise(shape: tuple[int, int], vocab_size: int, generator, device,
               live: torch.Tensor | None = None) -> torch.Tensor:
    """DG1.3, DG3.5: uniform random tokens [B, L] (one randint over the whole canvas). Per-row generators
    (DG6.5): each row's L tokens from its own generator, the rows not ``live`` [B] drawing nothing (zeros)."""
    if not per_row(generator):
        return torch.randint(0, vocab_size, shape, generator=generator, device=device)
    rows = [True] * shape[0] if live is None else live.tolist()
    return torch.stack([torch.randint(0, vocab_size, shape[1:], generator=g, device=device) if rows[b]
                        else torch.zeros(shape[1:], dtype=torch.long, device=device)
                        for b, g in enumerate(generator)])  # [B, L]


def token_entropy(processed: torch.Tensor) -> torch.Tensor:
    """DG3.4: each position's entropy [B, L] of softmax(processed), as torch.distributions.Categorical has it."""
    return torch.distributions.Categorical(logits=processed).entropy()


def accepted_positions(entropy: torch.Tensor, bound: float) -> torch.Tensor:
    """DG3.4: sort each row's entropies ascending (torch.sort, not stable); accept rank k when the cumulative sum
    through k minus the k-th entropy is <= bound (so rank 0 always). -> bool [B, L] in canvas positions."""
    ranked, order = torch.sort(entropy, dim=-1, descending=False)
    within = torch.cumsum(ranked, dim=-1) - ranked <= bound  # [B, L] in rank order
    return torch.scatter(torch.zeros_like(within), dim=-1, index=order, src=within)


def renoise(accepted_canvas: torch.Tensor, accepted: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """DG3.5: every position not accepted this step takes its fresh random token; accepted ones keep theirs."""
    return torch.where(~accepted, noise, accepted_canvas)


class StopState(NamedTuple):
    """DG4: the last k argmax canvases [k, B, L] (-1 before any), oldest first; None when k = 0."""

    history: torch.Tensor | None


def new_stop_state(p: DGParams, batch: int, length: int, device) -> StopState:
    if not p.adaptive_stop or p.stability_threshold == 0:
        return StopState(None)
    return StopState(torch.full((p.stability_threshold, batch, length), -1, dtype=torch.long, device=device))


def stop_test(state: StopState, argmax: torch.Tensor, processed: torch.Tensor,
              p: DGParams) -> tuple[torch.Tensor, StopState]:
    """DG4.1-DG4.3: stable (this argmax canvas equals each of the last k, so k + 1 identical in a row; always
    with k = 0) and confident (mean entropy of the processed logits < confidence_threshold), per row [B]."""
    if state.history is None:
        stable = torch.ones(argmax.shape[0], dtype=torch.bool, device=argmax.device)
        history = None
    else:
        stable = (state.history == argmax[None]).all(dim=-1).all(dim=0)  # [B]
        history = torch.cat([state.history[1:], argmax[None]])
    confident = token_entropy(processed).mean(dim=-1) < p.confidence_threshold  # [B]
    return stable & confident, StopState(history)


class StepResult(NamedTuple):
    """One denoising step's outcome for the whole batch (DG3)."""

    canvas: torch.Tensor  # [B, L] the next step's input (accepted tokens, the rest renoised)
    argmax: torch.Tensor  # [B, L] the argmax canvas (a canvas's output when it stops)
    self_conditioning: torch.Tensor  # [B, L, V] processed logits, the next step's self-conditioning input
    finished: torch.Tensor  # [B] bool: the row's canvas has stopped (frozen from then on)
    stop: StopState
    accepted: torch.Tensor  # [B, L] bool, this step's acceptance (rows finished before: all False)
    sample: torch.Tensor  # [B, L] the denoiser's draws
    entropy: torch.Tensor  # [B, L]


def denoising_step(logits: torch.Tensor, canvas: torch.Tensor, argmax: torch.Tensor,
                   self_conditioning: torch.Tensor | None, finished: torch.Tensor, stop: StopState, remaining: int,
                   p: DGParams, vocab_size: int, embedding_dtype: torch.dtype,
                   generator: torch.Generator | None) -> StepResult:
    """DG3: one step from the decoder's raw logits [B, L, V], in the official order of computations and draws
    (sample, argmax, accept, renoise, stop test); rows already finished keep their canvas, argmax and
    self-conditioning (DG4.4)."""
    processed = processed_logits(logits, remaining, p)
    sample = draw_sample(processed, generator, ~finished)
    new_argmax = torch.argmax(processed, dim=-1)
    entropy = token_entropy(processed)
    accepted = accepted_positions(entropy, p.entropy_bound)
    new_canvas = renoise(torch.where(accepted, sample, canvas), accepted,
                         draw_noise(tuple(canvas.shape), vocab_size, generator, canvas.device, ~finished))
    if p.adaptive_stop:
        if finished.any():
            new_argmax = torch.where(finished[:, None], argmax, new_argmax)
            new_canvas = torch.where(finished[:, None], canvas, new_canvas)
            processed = torch.where(finished[:, None, None], self_conditioning, processed)
        stopped, stop = stop_test(stop, new_argmax, processed, p)
        accepted = accepted & ~finished[:, None]
        finished = finished | stopped
    return StepResult(new_canvas, new_argmax, processed.to(embedding_dtype), finished, stop, accepted, sample,
                      entropy)


def finalize_canvas(sequences: torch.Tensor, finished_before: torch.Tensor, canvas_length: int, max_length: int,
                    p: DGParams) -> tuple[torch.Tensor, torch.Tensor]:
    """DG5: after a canvas is appended to ``sequences`` [B, T]: a row is finished when the canvas holds an EOS
    or the length reached max_length; with a pad id, a row finished before gets the whole canvas padded and a
    row with an EOS in it keeps the first EOS and pads what follows. -> (sequences, finished [B])."""
    new = sequences[:, -canvas_length:]
    is_eos = torch.zeros_like(new, dtype=torch.bool) if p.eos_token_id is None else \
        torch.isin(new, torch.tensor(p.eos_token_id, device=new.device))  # [B, L]
    now = is_eos.any(dim=-1) | (sequences.shape[1] >= max_length)
    finished = finished_before | now
    if p.pad_token_id is not None and finished.any():
        sequences = sequences.clone()
        sequences[finished_before, -canvas_length:] = p.pad_token_id
        if p.eos_token_id is not None and now.any():
            cumulative = is_eos.cumsum(dim=-1)
            pad = (cumulative > 0) & ~((cumulative == 1) & is_eos)  # after the first EOS
            sequences[:, -canvas_length:][pad] = p.pad_token_id
    return sequences, finished


def check_uniform_state(model) -> None:
    """DG1.4: this sampler needs a uniform-state model (``uniform_state = True``: DiffusionGemma)."""
    if getattr(type(model), "uniform_state", False) is not True:
        raise ValueError(f"model must be a uniform-state model (DiffusionGemma: veridec.models.diffusiongemma), got "
                         f"{type(model).__name__}, a mask predictor: decode it with a mask sampler")


def check_decode_inputs(model, prompt: torch.Tensor, attention_mask, generator) -> None:
    """The model, the prompt [B, P] and its left-padding mask, the generator(s) (DG1.4, DG6.4, DG6.5)."""
    check_uniform_state(model)
    if not isinstance(prompt, torch.Tensor) or prompt.dtype != torch.long or prompt.dim() != 2 or 0 in prompt.shape:
        raise ValueError(f"prompt must be a LongTensor [B, P] with B, P >= 1, got "
                         f"{getattr(prompt, 'dtype', type(prompt).__name__)} {tuple(getattr(prompt, 'shape', ()))}")
    if int(prompt.min()) < 0 or int(prompt.max()) >= model.vocab_size:
        raise ValueError(f"prompt: token ids must lie in [0, {model.vocab_size}), got {int(prompt.min())} .. "
                         f"{int(prompt.max())}")
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != prompt.shape:
            raise ValueError(f"attention_mask must be a tensor of the prompt's shape {tuple(prompt.shape)}")
        if not ((attention_mask == 0) | (attention_mask == 1)).all() or not attention_mask.bool().any(dim=1).all():
            raise ValueError("attention_mask must hold 0 (padding) and 1 (a token), with a real token in every row")
    check_generators(generator, prompt.shape[0])


def check_generators(generator, rows: int) -> None:
    """None, one torch.Generator, or (DG6.5) a list or tuple of one torch.Generator per prompt row."""
    if not per_row(generator):
        check_generator(generator)
        return
    if len(generator) != rows:
        raise ValueError(f"generator: a list of generators needs one per prompt row ({rows}), got {len(generator)}")
    for row, g in enumerate(generator):
        if not isinstance(g, torch.Generator):
            raise ValueError(f"generator[{row}] must be a torch.Generator (per-row draws: one per row), got "
                             f"{type(g).__name__}")


def check_length(model, prompt_length: int, p: DGParams) -> None:
    """DG6.3: the prompt and every canvas the decode may run fit the model's positions."""
    total = prompt_length + canvases_for(p, model.canvas_length) * model.canvas_length
    if total > model.max_length:
        raise ValueError(f"max_new_tokens {p.max_new_tokens} (in canvases of {model.canvas_length}) + the prompt's "
                         f"{prompt_length} tokens exceed the model's max_position_embeddings {model.max_length}")


def check_step_finite(logits: torch.Tensor, step: int) -> None:
    """Refuse NaN or +inf logits (a broken model, vllm#47424's NaN canvas), naming the step."""
    if not bool((logits < torch.inf).all()):
        raise ValueError(f"the model's logits at denoising step {step} hold NaN or +inf: a decoder refuses them")


SETTINGS = ("max_new_tokens", "max_denoising_steps", "entropy_bound", "t_min", "t_max", "stability_threshold",
            "confidence_threshold", "eos_token_id", "pad_token_id")  # the keyword settings a decode takes (DG7)


def settings_for(model, given: dict) -> DGParams:
    """DG7.1: the call's settings (those not ``...``) over the checkpoint's generation config over the official
    defaults, checked (DG7.2)."""
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ValueError(f"unknown DiffusionGemma setting(s) {unknown}; the settings are {', '.join(SETTINGS)}")
    overrides = {name: value for name, value in given.items() if value is not ...}
    params = params_from(getattr(model, "generation", {}) or {}, overrides)
    check_params(params, model.vocab_size, model.canvas_length)
    return params


def record_step(trace: Trace, before: torch.Tensor, result: StepResult, active: torch.Tensor, forwards: list[int],
                offset: int, canvas: int, bound: float) -> None:
    """DG3.6: the step's events, row by row for the ``active`` rows [B] (not finished before the step): an
    ``accept`` per accepted position (the input token -> the draw) and a ``renoise`` per other position (the
    input token -> the random token), each with its entropy; positions count from the sequence's start
    (``offset``: the canvas's first position); ``forwards`` [B] each row's steps so far (updated). The step
    record holds each row's accepted positions, draws and entropies, and as its gap DG3.4's decision margin."""
    old, drawn, new, accepted = torch.stack([before, result.sample, result.canvas, result.accepted.long()]).tolist()
    entropy = result.entropy.double().tolist()
    rows = active.tolist()
    ranked = result.entropy.sort(dim=-1).values
    gaps = ((ranked.cumsum(dim=-1) - ranked) - bound).abs().amin(dim=-1).double().tolist()  # [B]
    positions, tokens, entropies = [], [], []
    for row, is_active in enumerate(rows):
        mine = [i for i, flag in enumerate(accepted[row]) if flag and is_active]
        positions.append([offset + i for i in mine])
        tokens.append([drawn[row][i] for i in mine])
        entropies.append([entropy[row][i] for i in mine])
        if is_active:
            for i in range(len(old[row])):
                kind, token = ("accept", drawn[row][i]) if accepted[row][i] else ("renoise", new[row][i])
                trace.events.append(Event(kind, forwards[row], row, offset + i, old[row][i], token, entropy[row][i]))
            forwards[row] += 1
    trace.steps.append(StepRecord(canvas, positions, tokens, entropies, [[float("nan")] * len(m) for m in positions],
                                  [gaps[row] if rows[row] else float("inf") for row in range(len(rows))]))
