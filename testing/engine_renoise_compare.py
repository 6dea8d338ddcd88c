"""The uniform-state replay's comparison (spec/engines.md EN8): after each engine step, every row's canvas and done
flag against DiffusionGemma's rule fed the same logits and SGLang's stated stream; before each forward, the
self-conditioning signal against the rule's. The first difference is named with its canvas, step, row and the
positions that differ (what each side did there: accepted the draw, renoised, the argmax canvas), the rule's
temperature, and its margin against the measured rounding."""

from __future__ import annotations


import torch

from veridec.rules.diffusiongemma import temperature

from .engines import Position, _Diverged
from .families.sglang_renoise import engine_temperature, soft_embeddings, temperature_for_signal


def wrap_step(run, step, rules):
    """The algorithm's ``step`` seen from outside (its own step runs unchanged): the canvases and logits it was
    given, then its canvases and done flags, compared with the rules' (``run.transcript`` when recording)."""

    def seen(forward_batch, full_logits, states):
        before, given = forward_batch.input_ids.clone(), full_logits.clone()
        done = step(forward_batch, full_logits, states)
        index = run.steps - run.round_start
        _check_contract(run, done, full_logits, given, len(rules))
        compare(run, index, before, given, forward_batch.input_ids, [bool(d) for d in done], rules)
        run.steps += 1
        return done

    run.round_start = run.steps
    return seen


def _check_contract(run, done, logits, given, rows: int) -> None:
    problem = None
    if not isinstance(done, (list, tuple)) or len(done) != rows:
        problem = f"step returned {type(done).__name__} {str(done)[:80]}; the contract is List[bool] of {rows}"
    elif not torch.equal(logits, given):
        problem = "step changed the logits it was given (full_logits is the model's output: read it, copy it)"
    if problem:
        raise _Diverged(run.divergence("contract", run.steps, 0, problem))


def compare(run, step: int, before, logits, after, done: list[bool], rules) -> None:
    """before, after [B*L]; logits [B*L, V]; done [B]. Rows the rule has finished must stay as they are."""
    length = run.model.canvas_length
    before, after = before.view(len(rules), length), after.view(len(rules), length)  # [B, L]
    logits = logits.view(len(rules), length, -1)  # [B, L, V]
    decided = [None if rule.finished else rule.step(logits[i]) for i, rule in enumerate(rules)]
    entry = _entry(run, step, before, logits, after, done, decided, rules)
    if run.record:
        run.transcript.append(entry)
    for i, decision in enumerate(decided):
        expected = before[i] if decision is None else decision.tokens
        reference_done = True if decision is None else decision.done
        if not torch.equal(after[i], expected) or done[i] != reference_done:
            raise _Diverged(_divergence(run, step, i, before[i], after[i], done[i], decision, entry))


def _entry(run, step, before, logits, after, done, decided, rules) -> dict:
    return {"canvas": run.round, "step": step, "input_ids": before.flatten().tolist(),
            "logits": logits.flatten(0, 1).tolist(),
            "engine": {"input_ids": after.flatten().tolist(), "done": list(done)},
            "reference": {"input_ids": torch.cat([before[i] if d is None else d.tokens
                                                  for i, d in enumerate(decided)]).tolist(),
                          "done": [True if d is None else d.done for d in decided],
                          "accepted": [[] if d is None else d.accepted.nonzero()[:, 0].tolist() for d in decided],
                          "temperature": [None if d is None else d.temperature for d in decided]}}


def _divergence(run, step, row, before, after, done, decision, entry):
    if decision is None:
        return run.divergence("decision", step, row, "the engine changed a row the rule has finished (a finished "
                              "canvas is frozen, DG4.4)", record=entry)
    positions = [_position(j, before, after, decision) for j in (after != decision.tokens).nonzero()[:, 0].tolist()]
    if positions:
        said = "; ".join(f"position {p.position}: the engine {p.engine_kind} ({p.engine_token}), the rule "
                         f"{p.reference_kind} ({p.reference_token}) (entropy {p.confidence:.6g})" for p in positions)
        kind = "decision"
    else:
        said = ("the engine says the row is done where the rule goes on" if done else
                "the engine goes on where the rule stops the row (stable and confident, or the last step)")
        kind = "done"
    margin = decision.margin
    return run.divergence(kind, step, row, f"{said}; temperature {decision.temperature:.9g}, margin {margin:.3g} "
                          f"(rounding {decision.rounding:.3g})", positions=positions, engine_done=done,
                          reference_done=decision.done, margin=margin, record=entry,
                          config={**run.case["config"], "rounding": decision.rounding, "near_tie": decision.near_tie})


def _position(j: int, before, after, decision) -> Position:
    def kind(token: int, as_rule: bool) -> str:
        if as_rule:
            return "stopped on the argmax" if decision.done else ("accepted" if decision.accepted[j] else "renoised")
        names = [("the argmax", decision.argmax), ("the sample", decision.sample), ("the noise", decision.noise)]
        return next((f"wrote {name}" for name, value in names if int(value[j]) == token), "wrote another token")

    engine, reference = int(after[j]), int(decision.tokens[j])
    return Position(j, int(before[j]), engine, reference, kind(engine, False), kind(reference, True),
                    float(decision.entropy[j]), None)


def signal_tolerance(processed: torch.Tensor, embedding) -> float:
    """The measured rounding of a soft embedding: 4 x the larger error of its two float32 probability formulas
    (softmax, and exp of log_softmax: SGLang's) against a float64 rerun, plus 4 float32 epsilons of its size. At a
    low temperature (large processed logits) exp(log_softmax) loses |logit| x eps: the second formula's error."""
    weight, scale = embedding.weight, embedding.embed_scale.to(embedding.weight.dtype)
    exact = torch.softmax(processed.double(), dim=-1).to(weight.dtype) @ weight * scale  # [L, H]
    routes = (torch.softmax(processed, dim=-1, dtype=torch.float32),
              torch.log_softmax(processed, dim=-1, dtype=torch.float32).exp())  # [L, V] each
    error = max(float(((probs.to(weight.dtype) @ weight * scale) - exact).abs().max()) for probs in routes)
    return 4 * error + 4 * torch.finfo(torch.float32).eps * float(exact.abs().max())


def engine_temperature_explains(signal: torch.Tensor, rule, embedding) -> bool:
    """Whether the engine's signal [L, H] is the soft embedding of the rule's last logits divided by SGLang's
    temperature (``engine_temperature``) where that temperature is not the rule's, within its measured rounding."""
    remaining = rule.remaining + 1  # the step that made rule.logits
    ours, theirs = temperature(remaining, rule.p, "cpu"), engine_temperature(rule.p, remaining)
    if torch.equal(ours, theirs):
        return False
    processed = rule.logits / theirs.to(rule.logits.device)  # [L, V]
    error = float((signal - soft_embeddings(processed, embedding)).abs().max())
    return error <= signal_tolerance(processed, embedding)


def signal_divergence(run, signal, rules, embedding):
    """The engine's self-conditioning signal [B*L, H] (or None) against each denoising row's: zero at a canvas's
    first step, else the soft embedding of the rule's last processed logits, within its measured rounding
    (``signal_tolerance``)."""
    length = run.model.canvas_length
    rows = None if signal is None else signal.view(len(rules), length, -1)  # [B, L, H]
    for i, rule in enumerate(rules):
        if rule.finished:
            continue
        if rule.processed is None:
            if rows is not None and bool(rows[i].any()):
                return run.divergence("self-conditioning", run.steps - run.round_start, i, "the engine hands a "
                                      "self-conditioning signal at the canvas's first step (DG3.7: none)")
            continue
        expected, tolerance = soft_embeddings(rule.processed, embedding), signal_tolerance(rule.processed, embedding)
        if rows is None:
            return run.divergence("self-conditioning", run.steps - run.round_start, i, "the engine hands the model "
                                  "no self-conditioning signal where DG3.7 has the soft embedding of the rule's "
                                  "processed logits of the step before")
        error = float((rows[i] - expected).abs().max())
        if error > tolerance:
            if rows is not None and engine_temperature_explains(rows[i], rule, embedding):
                return run.divergence("self-conditioning", run.steps - run.round_start, i, "the engine's "
                                      f"self-conditioning signal differs from the rule's by {error:.3g} (tolerance "
                                      f"{tolerance:.3g}) and is the soft embedding at SGLang's float32-rounded "
                                      "temperature, one ulp from transformers' float32 schedule",
                                      config={"engine_temperature": True})
            fitted = temperature_for_signal(rows[i], rule, embedding)
            return run.divergence("self-conditioning", run.steps - run.round_start, i, f"the engine's "
                                  f"self-conditioning signal differs from the soft embedding of the rule's processed "
                                  f"logits by {error:.3g} (tolerance {tolerance:.3g}); it matches {fitted}")
    return None
