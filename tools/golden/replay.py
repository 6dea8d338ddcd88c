"""The replay half of the golden traces: veridec's decoders on a recorded case, with the canvas of every model call
logged, compared with the official outcome (status; for completed runs canvas, forward count, per-step commits),
and the official defects named (``tests/test_golden.py`` replays every case on every CI run)."""

from __future__ import annotations

import itertools

import torch

from veridec.decoding import DecodeStalled

# ------------------------------------------------------------------------------------ veridec's side
def case_inputs(case: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
    prompt = torch.tensor(case["prompt"], dtype=torch.long, device="cpu")
    mask = case["attention_mask"]
    mask = None if mask is None else torch.tensor(mask, dtype=torch.long, device="cpu")
    return prompt, mask


def step_commits(trace) -> list[list[list[int]]]:
    """Per step, the sorted [row, position, token] triples a veridec trace committed."""
    return [sorted([row, p, t] for row in range(len(step.positions))
                   for p, t in zip(step.positions[row], step.tokens[row])) for step in trace.steps]


def run_veridec(case: dict, model, *, honour_padding: bool = True) -> dict:
    """Replay ``case`` with veridec's decoder for its sampler and variant (ties="torch", torch's global RNG
    seeded as recorded) -> {status: "ok", canvas, nfe, steps} or {status: "error", error, forwards, steps} (the
    steps completed before the error). ``honour_padding=False`` drops the attention mask (``ignores_padding``)."""
    from veridec.optimized.fastdllm import (
        generate_with_dual_cache,
        generate_with_prefix_cache,
    )
    from veridec.reference.dream import diffusion_generate
    from veridec.reference.fastdllm import generate as fastdllm_generate
    from veridec.reference.llada import generate as llada_generate

    prompt, mask = case_inputs(case)
    if not honour_padding:
        mask = None
    settings = dict(case["settings"])
    model = Logged(model, prompt.shape[0], prompt.shape[1] + settings.get("gen_length",
                                                                          settings.get("max_new_tokens", 0)))
    torch.manual_seed(case["seed"])
    try:
        if case["sampler"] == "llada":
            out = llada_generate(model, prompt, mask, ties="torch", **settings)
        elif case["sampler"] == "fastdllm":
            loop, cache = case["variant"].split("/")
            if cache == "none":
                out = fastdllm_generate(model, prompt, mask, ties="torch", **settings)
            else:
                decoder = generate_with_prefix_cache if cache == "prefix" else generate_with_dual_cache
                out = decoder(model, prompt, mask, ties="torch", loop="june2025" if loop == "legacy" else "current",
                              **settings)
        else:
            settings.pop("pad_token_id", None)
            out = diffusion_generate(model, prompt, mask, ties="torch", **settings)
    except (RuntimeError, ValueError, IndexError) as err:
        return {"status": "error", "error": describe(err), "forwards": len(model.canvases),
                "steps": model.commits(None)}
    counters = out.trace.counters
    steps = step_commits(out.trace)
    if steps != model.commits(out.canvas) or counters.model_calls != len(model.canvases):
        raise AssertionError(f"{case.get('id')}: veridec's trace disagrees with the calls it made")
    return {"status": "ok", "canvas": out.canvas.tolist(), "nfe": counters.model_calls, "steps": steps}


def describe(err: BaseException) -> str:
    """``Type: first line`` as recorded; a stall is named by its built-in class (RuntimeError), as it was when the
    data was recorded."""
    name = "RuntimeError" if isinstance(err, DecodeStalled) else type(err).__name__
    return f"{name}: {str(err).splitlines()[0] if str(err) else ''}"[:200]


def same_run(a: dict, b: dict) -> bool:
    """Equal outcomes: status, and for completed runs canvas, forward count and per-step commits."""
    if a["status"] != b["status"]:
        return False
    if a["status"] != "ok":
        return True
    return a["canvas"] == b["canvas"] and a["nfe"] == b["nfe"] and a["steps"] == b["steps"]


class CanvasLog:
    """The canvas every model call of one decode saw, [B, L] each (a cached call's window placed back on the
    previous canvas), and the commits between consecutive calls."""

    def __init__(self, batch: int, length: int):
        self.batch, self.length, self.canvases = batch, length, []

    def full(self, x: torch.Tensor) -> None:
        self.canvases.append(x[: self.batch].clone())

    def window(self, tokens: torch.Tensor, positions: torch.Tensor) -> None:
        canvas = self.canvases[-1].clone()
        rows = torch.arange(self.batch, device=canvas.device)[:, None]
        canvas[rows, positions[: self.batch]] = tokens[: self.batch]
        self.canvases.append(canvas)

    def commits(self, final: torch.Tensor | None) -> list[list[list[int]]]:
        """Per call, the sorted [row, position, token] triples that changed before the next call (or before
        ``final``, the decoded canvas; without it the last call's step is unknown and left out)."""
        chain = self.canvases + ([final[: self.batch]] if final is not None else [])
        steps = []
        for before, after in itertools.pairwise(chain):
            changed = (before != after).nonzero().tolist()
            steps.append(sorted([r, p, int(after[r, p])] for r, p in changed))
        return steps


class Logged(CanvasLog):
    """veridec's model behind a proxy that logs the canvas of every call, as ``Capture`` does on the official
    side, so the steps before an error can be compared too."""

    def __init__(self, model, batch: int, length: int):
        super().__init__(batch, length)
        self.model = model

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **kw):
        self.full(x)
        return self.model(x, attention_mask, **kw)

    def prefill(self, x, *args, **kw):
        self.full(x)
        return self.model.prefill(x, *args, **kw)

    def forward_cached(self, tokens, positions, *args, **kw):
        self.window(tokens, positions)
        return self.model.forward_cached(tokens, positions, *args, **kw)


DEFECTS = {  # what the official outcome says -> the defect, as the test names it
    "capped": "endless loop: the top-ranked candidate proposes the mask token at temperature 0, every later "
              "step repeats it (capped)",
    "attention_mask_": "cfg_scale > 0 without attention_mask: UnboundLocalError (a NameError)",
    "list assignment index out of range": "factor mode at batch > 1: a row whose block is complete has no "
                                          "candidate: IndexError",
    "is out of bounds for dimension 1": "quota mode: the block outlives its schedule (legacy cached loop with one "
                                        "step per block, or the mask token proposed): IndexError",
    "shape mismatch": "dual cache at batch > 1: replace_position's indices of every row are scattered into "
                      "one row: RuntimeError",
    "expanded size": "June 2025 file at batch > 1: the canvas has one row: RuntimeError",
}


def defect_kind(official: dict) -> str:
    text = "capped" if official["status"] == "capped" else official.get("error", "")
    for key, name in DEFECTS.items():
        if key in text:
            return name
    raise ValueError(f"an official failure no defect describes: {text}")


def ignores_padding(case: dict) -> bool:
    """The official LLaDA modelling ignores the attention mask: such a case is compared with veridec run
    without it (the pads read as tokens)."""
    return case["sampler"] == "llada" and case["attention_mask"] is not None and \
        any(0 in row for row in case["attention_mask"])


def summary(golden: dict) -> dict:
    """Case counts per sampler/variant and expectation."""
    table: dict[str, dict[str, int]] = {}
    for case in golden["cases"]:
        key = f"{case['sampler']}/{case['variant']}"
        row = table.setdefault(key, {})
        row[case["expect"]] = row.get(case["expect"], 0) + 1
    return table


def replay_case(case: dict, model) -> str | None:
    """None when veridec reproduces the recorded case as its ``expect`` says (tests/test_golden.py lists the
    expectations); otherwise what differs."""
    official, expect = case["official"], case["expect"]
    if expect == "equal":
        got = run_veridec(case, model)
        return None if same_run(got, official) else f"veridec {_brief(got)} != official {_brief(official)}"
    if expect == "padding_ignored_upstream":
        without, honoured = run_veridec(case, model, honour_padding=False), run_veridec(case, model)
        if not same_run(without, official):
            return f"padding ignored: veridec {_brief(without)} != official {_brief(official)}"
        if not same_run(honoured, case["veridec"]):
            return f"padding honoured: veridec {_brief(honoured)} != recorded {_brief(case['veridec'])}"
        if (honoured["canvas"] != official["canvas"]) != case["differs"]:
            return "the documented difference changed"
        return None
    if expect == "row_clamp":
        got = run_veridec(case, model)
        mask_id = case["settings"]["mask_token_id"]
        remask = next(i for i, step in enumerate(official["steps"]) if any(t == mask_id for _, _, t in step))
        if not same_run(got, case["veridec"]):
            return f"veridec {_brief(got)} != recorded {_brief(case['veridec'])}"
        if got["steps"][:remask] != official["steps"][:remask] or got["canvas"] == official["canvas"]:
            return "the steps before the official re-masking differ, or the outputs no longer differ"
        return None
    if expect == "upstream_defect":
        if case["defect"] not in DEFECTS.values() or official["status"] not in ("error", "capped"):
            return f"undocumented upstream failure {official.get('error')}"
        got, recorded = run_veridec(case, model), case["veridec"]
        if not same_run(got, recorded) or got.get("error") != recorded.get("error"):
            return f"veridec {_brief(got)} != recorded {_brief(recorded)}"
        common = case["common_steps"]
        if got["steps"][:common] != official["steps"][:common] or \
                (got["status"] == "ok" and common != len(official["steps"])):
            return "the steps before the upstream failure differ"
        return None
    if expect == "near_tie":
        run_veridec(case, model, honour_padding=not ignores_padding(case))
        return None
    if expect == "disagreement":  # a reported difference of veridec's (``cause``), held until it is resolved
        got, recorded = run_veridec(case, model, honour_padding=not ignores_padding(case)), case["veridec"]
        if not same_run(got, recorded) or got.get("error") != recorded.get("error"):
            return f"veridec changed: {_brief(got)} != recorded {_brief(recorded)}; re-record and reclassify"
        if got["steps"][: case["common_steps"]] != official["steps"][: case["common_steps"]]:
            return "the steps both took differ"
        return None
    return f"unknown expectation {expect}"


def _brief(run: dict) -> str:
    if run["status"] != "ok":
        return f"{run['status']} {run.get('error', '')}"[:120]
    return f"canvas {run['canvas']} nfe {run['nfe']}"
