"""transformers' ``DiffusionGemmaForBlockDiffusion.generate`` as recorded (tests/golden/diffusiongemma.json,
``python -m tools.golden.diffusiongemma``; spec/diffusiongemma.md DG8) replayed by both of veridec's decoders on
the same checkpoints in float64: the same sequences token for token, and step for step the same rows still
denoising, the same canvas fed to the decoder (its random start and every renoising: torch's draws) and the same
accepted positions. Negative controls: each one-line bug of the rule (DG8.3) fails the replay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tools.golden.checkpoints import content_sha256
from tools.golden.diffusiongemma import ROOT
from veridec.models.diffusiongemma import load_diffusiongemma
from veridec.optimized import diffusiongemma as optimized
from veridec.reference import diffusiongemma as reference
from veridec.rules import diffusiongemma as rule

DATA = json.loads((Path(__file__).parent / "golden" / "diffusiongemma.json").read_text())
ALPHABET = DATA["alphabet"]
CASES = DATA["cases"]


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(1)
    loaded = {}
    for name, checkpoint in DATA["checkpoints"].items():
        folder = ROOT / checkpoint["folder"]
        assert content_sha256(folder) == checkpoint["sha256"], f"{folder} changed since the golden traces"
        loaded[name] = load_diffusiongemma(folder, dtype=torch.float64)
    return loaded


def veridec_settings(settings: dict) -> dict:
    """The official generate keywords as veridec's decoders take them (DG7: the sampler config's bound by name)."""
    out = {k: v for k, v in settings.items() if k != "sampler_config"}
    if "sampler_config" in settings:
        out["entropy_bound"] = settings["sampler_config"]["entropy_bound"]
    return out


def decode(decoder, model, case: dict):
    torch.manual_seed(case["seed"])
    mask = None if case["attention_mask"] is None else torch.tensor(case["attention_mask"])
    return decoder(model, torch.tensor(case["prompt"]), mask,
                   **veridec_settings(case["settings"]))


def recorded_steps(case: dict) -> list[tuple]:
    """Per official step: (rows denoising, {row: input canvas}, {row: accepted positions}) of those rows."""
    out = []
    for step in case["steps"]:
        active = [r for r, bit in enumerate(step["active"]) if bit == "1"]
        out.append((active, {r: [ALPHABET.index(c) for c in step["input"][r]] for r in active},
                    {r: [i for i, bit in enumerate(step["accepted"][r]) if bit == "1"] for r in active}))
    return out


def replayed_steps(trace) -> list[tuple]:
    """The same from veridec's trace: step records give the rows and acceptances, events the input canvases."""
    inputs, seen, out = {}, {}, []
    for event in trace.events:  # per (row, row-local step): the tokens fed, by position
        inputs.setdefault((event.row, event.step), {})[event.position] = event.old
    for record in trace.steps:
        active = [r for r, gap in enumerate(record.selection_gaps) if gap != float("inf")]
        fed, accepted = {}, {}
        for r in active:
            local = seen.get(r, 0)
            seen[r] = local + 1
            tokens = inputs[(r, local)]
            first = min(tokens)
            fed[r] = [tokens[p] for p in sorted(tokens)]
            accepted[r] = [p - first for p in record.positions[r]]
        out.append((active, fed, {r: sorted(a) for r, a in accepted.items()}))
    return out


def mismatch(decoder, model, case: dict) -> str | None:
    decoded = decode(decoder, model, case)
    if decoded.canvas.tolist() != case["sequences"]:
        return f"case {case['id']}: sequences {decoded.canvas.tolist()} != {case['sequences']}"
    ours, theirs = replayed_steps(decoded.trace), recorded_steps(case)
    if len(ours) != len(theirs):
        return f"case {case['id']}: {len(ours)} steps, official {len(theirs)}"
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"case {case['id']} step {index}: ours {a}, official {b}"
    return None


def test_the_golden_data_covers_what_dg8_asks():
    """DG8.2: >= 200 cases, both caches, several canvases, padding, early stops at k = 0..3, frozen rows."""
    assert len(CASES) >= 200
    assert {c["settings"].get("cache_implementation") for c in CASES} >= {"dynamic", "static"}
    assert any(c["attention_mask"] is not None for c in CASES)
    early = {c["settings"]["stability_threshold"] for c in CASES
             if len(c["steps"]) < c["settings"]["max_denoising_steps"] * canvases(c) and
             "stability_threshold" in c["settings"]}
    assert early >= {0, 1, 2, 3}
    assert any("0" in a for c in CASES for step in c["steps"] for a in step["active"])  # a row frozen
    assert max(canvases(c) for c in CASES) >= 3


def canvases(case: dict) -> int:
    length = 16 if case["model"] == "shipped" else 8
    return (len(case["sequences"][0]) - len(case["prompt"][0])) // length


@pytest.mark.parametrize("decoder", [reference.generate, optimized.generate], ids=["reference", "cached"])
def test_both_decoders_replay_the_official_generate(models, decoder):
    """DG8.1: every case, token for token and step for step."""
    failures = [m for case in CASES if (m := mismatch(decoder, models[case["model"]], case)) is not None]
    assert not failures, f"{len(failures)} of {len(CASES)} cases differ; first: {failures[0]}"


def _stable_k_minus_one(state, argmax, processed, p):  # vLLM#45965: k identical canvases stop, not k + 1
    stop, new_state = ORIGINAL["stop_test"](state, argmax, processed, p)
    if state.history is None:
        return stop, new_state
    stable = (state.history[1:] == argmax[None]).all(dim=-1).all(dim=0)
    confident = rule.token_entropy(processed).mean(dim=-1) < p.confidence_threshold
    return stable & confident, new_state


ORIGINAL = {name: getattr(rule, name) for name in ("stop_test", "processed_logits", "renoise", "denoising_step")}
MUTANTS = {
    "stability off by one (k identical canvases)": ("stop_test", _stable_k_minus_one),
    "temperature one step late": ("processed_logits", lambda logits, remaining, p: ORIGINAL["processed_logits"](
        logits, remaining + 1 if remaining < p.max_denoising_steps else remaining, p)),
    "renoising accepted positions too": ("renoise", lambda canvas, accepted, noise: noise),
    "no renoising": ("renoise", lambda canvas, accepted, noise: canvas),
    "stop test on row 0 only": ("stop_test", lambda state, argmax, processed, p: (
        lambda out: (out[0][:1].expand_as(out[0]), out[1]))(ORIGINAL["stop_test"](state, argmax, processed, p))),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_one_line_bugs_fail_the_replay(models, monkeypatch, name):
    """DG8.3, negative controls: each broken rule part makes some case differ from the official run."""
    attribute, broken = MUTANTS[name]
    monkeypatch.setattr(rule, attribute, broken)
    assert any(mismatch(optimized.generate, models[c["model"]], c) for c in CASES), name


def test_self_conditioning_from_the_wrong_step_fails_the_replay(models, monkeypatch):
    """DG8.3: feeding the raw (untempered) logits, or the previous step's, as self-conditioning is caught."""
    def raw(logits, *args, **kwargs):
        result = ORIGINAL["denoising_step"](logits, *args, **kwargs)
        return result._replace(self_conditioning=logits.to(result.self_conditioning.dtype))

    def stale(logits, canvas, argmax, self_conditioning, *args, **kwargs):
        result = ORIGINAL["denoising_step"](logits, canvas, argmax, self_conditioning, *args, **kwargs)
        return result if self_conditioning is None else result._replace(self_conditioning=self_conditioning)

    for broken in (raw, stale):
        monkeypatch.setattr(optimized, "denoising_step", broken)
        assert any(mismatch(optimized.generate, models[c["model"]], c) for c in CASES), broken.__name__


# ---------------------------------------------------------- what carries over to uniform-state canvases (DG10)
def canvas_segments(case: dict) -> list[list[dict]]:
    """The recorded steps cut per canvas (the steps remaining restart at N)."""
    segments = []
    for step in case["steps"]:
        if not segments or step["remaining"] > segments[-1][-1]["remaining"]:
            segments.append([])
        segments[-1].append(step)
    return segments


def test_an_accepted_position_is_renoised_when_a_later_step_does_not_accept_it():
    """DG10.2, in the official runs: a position accepted at one step and not at the next is fed a renoised token
    at the step after (commits are not final on a uniform-state canvas: SQ's 'a committed token stays' fails)."""
    found = 0
    for case in CASES:
        for segment in canvas_segments(case):
            for a, b, c in zip(segment, segment[1:], segment[2:]):
                for row in range(len(a["accepted"])):
                    if "0" in a["active"][row] + b["active"][row] + c["active"][row]:
                        continue
                    found += sum(a["accepted"][row][i] == "1" and b["accepted"][row][i] == "0"
                                 and c["input"][row][i] != b["input"][row][i] for i in range(len(a["accepted"][row])))
    assert found > 10


def test_no_row_stops_before_k_plus_one_forwards():
    """DG4.2 in the official runs: with stability k >= 1 a row denoises at least min(k + 1, N) steps per canvas
    (the history starts at -1: k + 1 identical argmax canvases in a row); and some rows stop at exactly k + 1."""
    exact = 0
    for case in CASES:
        settings = case["settings"]
        k = settings.get("stability_threshold")
        if not k or settings.get("confidence_threshold") is None:
            continue
        for segment in canvas_segments(case):
            for row in range(len(segment[0]["active"])):
                steps = sum(step["active"][row] == "1" for step in segment)
                assert steps >= min(k + 1, settings["max_denoising_steps"]), (case["id"], row, steps)
                exact += steps == k + 1 < settings["max_denoising_steps"]
    assert exact > 0


def test_the_accepted_set_bounds_the_joint_dependence():
    """DG10.1: for any joint p of the accepted positions, KL(p || prod p_j) = sum H(p_j) - H(p) <= sum H(p_j) -
    max H(p_j), the quantity the bound holds under the entropy bound (H(p) >= max H(p_j)); random joints."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        shape = tuple(torch.randint(2, 4, (3,), generator=generator, device="cpu").tolist())
        joint = torch.distributions.Dirichlet(torch.full((int(torch.tensor(shape).prod()),), 0.3,
                                                         dtype=torch.float64, device="cpu")).sample().view(shape)
        entropy = -(joint * joint.clamp_min(1e-300).log()).sum()
        marginals = [joint.sum(dim=tuple(d for d in range(3) if d != j)) for j in range(3)]
        h = torch.stack([-(m * m.clamp_min(1e-300).log()).sum() for m in marginals])
        assert h.sum() - entropy <= h.sum() - h.max() + 1e-12
