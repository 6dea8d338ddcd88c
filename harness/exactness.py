"""The exactness table (spec/exactness.md): every decoder x {reference, optimized, prefix, dual} on a model.

Each row compares a variant's decode of a batch of prompts with the reference decode of the same decoder:
commit-order match (share of prompts), token match (share of generated tokens), max logit error (the
variant's logits at its committed positions vs a full forward of the canvas it saw), full forwards, query
positions computed per prompt, tokens per step (per prompt, its own steps), wall-clock speedup vs the
sequential reference in the same run, and on the HMM-world model the exact per-token NLL of the
continuations under the true HMM. Tier E rows must match exactly; tier A rows are measured.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
from dataclasses import MISSING, asdict, dataclass, fields

import torch
from tqdm import tqdm

from veridec.canvas import initial_canvas
from veridec.compare import compare_traces
from veridec.decoding import has_llada_layout, is_block_model
from veridec.files import write_text_atomic
from veridec.models.shipped import load_model
from veridec.numerics import HIGHER, tolerance
from veridec.optimized.parallel import decode as optimized_decode
from veridec.optimized.speculative import decode as speculative_decode
from veridec.reference.parallel import decode as reference_decode
from veridec.rules.presets import PRESETS

from .block_rows import VARIANT as BLOCK_VARIANT
from .block_rows import SDAR_DECODERS, block_decoders, block_row, block_tolerance
from .block_rows import sequential_seconds as block_sequential_seconds
from .checks.registry import VerifyResult
from .compiled_rows import COMPILED, compiled_row
from .distributed import Group
from .records import Records, weights_sha256
from .units import open_records
from .event_rows import EVENT_DECODERS, ROUNDED, event_row
from .workloads import (BLOCK, hmm_nll, prompts_for, row_tokens_per_step, run_variant, single_prompts, table_models)

VARIANTS = {"reference": "E", "optimized": "E", "prefix": "A", "dual": "A"}
QUICK_SIZE = (2, 32)  # (prompts, gen length) of ``--quick`` tables
VERIFY_SIZE = (4, 64)  # of the table ``veridec verify`` prints
BLOCK_ROWS_SMALL = 4  # block-diffusion models get rows at this block length besides the table's
VERIFY_DECODERS = ("sequential", "conf-hq", "fastdllm", "factor", "localleap", "eb-hq", "klass-hq", "dapd-hq",
                   "fastdllm-ht", "fastdllm-ht-certified", "localleap-certified", "wino", "editing", *SDAR_DECODERS)


@dataclass
class Row:
    model: str
    decoder: str
    variant: str
    tier: str
    prompts: int
    commit_order_match: float
    token_match: float
    max_logit_error: float
    full_forwards: int
    positions_per_prompt: float
    tokens_per_step: float
    seconds: float
    speedup_vs_sequential: float
    hmm_nll_per_token: float | None = None
    logit_tolerance: float | None = None  # speculative rows: measured float32 rounding (spec/exactness.md E3)

    @property
    def exact(self) -> bool:
        """Same commit order and tokens, logits bit-equal; speculative rows (packed differently from their base):
        the same commit order up to a tie within the measured tolerance (after which the continuations may
        differ, so their token match is reported, not required) and logits within that tolerance."""
        if self.logit_tolerance is None:
            return self.commit_order_match == 1 and self.token_match == 1 and self.max_logit_error == 0
        return self.commit_order_match == 1 and self.max_logit_error <= self.logit_tolerance


def replay_logit_error(model, prompt, mask, decoded, gen_length: int, attention: bool) -> float:
    """Max |logit| difference between the decode's recorded logits at each step's committed positions and a
    full forward of the canvas that step saw (``attention``: the forward that also returns attention weights,
    whose explicit softmax rounds differently from SDPA, as the decode used)."""
    x, attention_mask = initial_canvas(model, prompt, mask, gen_length, model.special.mask_id)
    worst = 0.0
    for step in decoded.trace.steps:
        if not any(step.positions):
            continue
        logits = model(x, attention_mask=attention_mask, output_attentions=attention).logits  # [B, L, V]
        for row, (positions, recorded) in enumerate(zip(step.positions, step.logits)):
            if positions:
                full = logits[row, positions].double()
                recorded = torch.tensor(recorded, dtype=torch.float64, device=full.device)
                worst = max(worst, (recorded - full).abs().max().item())
                x[row, positions] = torch.tensor(step.tokens[row], dtype=torch.long, device=x.device)
    return worst


def table_for_model(model_name: str, decoders, n_prompts: int = 8, gen_length: int = 64, block_length: int = BLOCK,
                    seed: int = 0, model=None, progress=None, records: Records | None = None,
                    mine=lambda unit: True, weights: str | None = None, compile: str | None = None) -> list[Row]:
    """Rows for ``decoders`` (preset names) on a model (loaded by name unless given); ``model_name`` "hmm"
    adds the true HMM's NLL. The sequential reference is timed after one warm-up decode. With ``records``, each
    row is a unit: rows found there are taken as they are, each new one is recorded as it is finished.
    ``mine(unit)`` (a decoder's name, or a speculative row's variant) says which rows this process computes
    (torchrun: its share); the others are left out. ``weights``: the model's ``weights_sha256`` when known.
    ``compile``: a torch.compile backend; each decoder also gets its ``compiled_rows.COMPILED`` rows."""
    model = load_model(model_name, dtype=torch.float32) if model is None else model
    if model.dtype not in HIGHER:
        raise ValueError(f"the exactness table runs in float32, bfloat16 or float16, not {model.dtype}")
    prompt, mask = prompts_for(model_name, model, n_prompts, seed)
    weights = (weights or weights_sha256(model)) if records else None
    unit = lambda decoder, variant: Records.key(model=model_name, weights=weights, decoder=decoder,  # noqa: E731
                                                variant=variant)
    if is_block_model(model):
        if compile:
            raise ValueError("compiled rows cover the parallel decoders' caches (compiled_rows.COMPILED); a "
                             "block-diffusion model's table has none: run it without --compile")
        return _block_rows(model_name, model, decoders, prompt, mask, gen_length, block_length, records, unit,
                           progress, mine)
    timing = Timing(model, prompt, mask, gen_length, block_length)
    presets = [d for d in decoders if d in PRESETS and mine(d)]  # sdar-*: block-diffusion models only
    rows = _preset_rows(model_name, model, presets, prompt, mask,
                        gen_length, block_length, timing, records, unit, progress, compile)
    rows += speculative_rows(model_name, model, prompt, mask, gen_length, block_length, timing, records, unit,
                             progress, mine)
    for name in (d for d in EVENT_DECODERS if d in decoders and mine(d)):
        if has_llada_layout(model):  # WN1, ED1: else no rows
            rows += _event_rows(model_name, model, name, prompt, mask, gen_length, block_length, timing, records,
                                unit, progress)
    return rows


def _preset_rows(model_name, model, decoders, prompt, mask, gen_length, block_length, timing, records, unit,
                 progress, compile) -> list[Row]:
    """The rows of the parallel presets ``decoders``: each ``VARIANTS`` row, and with ``compile`` its
    ``compiled_rows.COMPILED`` rows, each a unit of the records."""
    rows = []
    for name in decoders:
        decoded = {}  # variant -> this run's eager decode (the reference row and the compiled rows reuse it)

        def variant_row():
            out, seconds = run_variant(model, variant, PRESETS[name], prompt, mask, gen_length, block_length)
            decoded[variant] = out
            if "reference" not in decoded:
                decoded["reference"] = run_variant(model, "reference", PRESETS[name], prompt, mask, gen_length,
                                                   block_length)[0]
            return asdict(make_row(model_name, name, variant, tier, model, prompt, mask, out, decoded["reference"],
                                   seconds, timing.sequential_seconds, gen_length))

        for variant, tier in VARIANTS.items():
            rows.append(Row(**recorded(records, unit(name, variant), variant_row)))
            if progress:
                progress()
        for variant in COMPILED if compile else ():
            rows.append(Row(**recorded(records, unit(name, variant), lambda: compiled_row(
                model_name, name, variant, compile, model, prompt, mask, gen_length, block_length,
                timing.sequential_seconds, decoded.get(COMPILED[variant])))))
            if progress:
                progress()
    return rows


def _event_rows(model_name, model, decoder, prompt, mask, gen_length, block_length, timing, records, unit,
                progress):
    """The rows of a decoder with revocable commits (harness/event_rows.py), each a unit of the records; the
    ``ROUNDED`` variants are held to the measured rounding of the model's forward (``packing_tolerance``)."""
    rows = []
    for variant in EVENT_DECODERS[decoder]:
        def compute():
            tol = packing_tolerance(model, single_prompts(prompt, mask)[0], gen_length) \
                if (decoder, variant) in ROUNDED else None
            return event_row(model_name, model, prompt, mask, decoder, variant, gen_length, block_length,
                             timing.sequential_seconds, tol)
        rows.append(Row(**recorded(records, unit(decoder, variant), compute)))
        if progress:
            progress()
    return rows


def _block_rows(model_name, model, decoders, prompt, mask, gen_length, block_length, records, unit, progress, mine):
    """A block-diffusion model's rows (harness/block_rows.py): each decoder that runs on it, at the table's block
    length and at BLOCK_ROWS_SMALL, each row a unit of the records."""
    rows, tolerances, timing = [], {}, []
    for name in (d for d in block_decoders(decoders) if mine(d)):
        for b in block_row_lengths(block_length):
            def compute():
                if b not in tolerances:
                    tolerances[b] = block_tolerance(model, single_prompts(prompt, mask)[0], gen_length, b)
                if not timing:
                    timing.append(block_sequential_seconds(model, prompt, mask, gen_length, block_length))
                return block_row(model_name, model, prompt, mask, name, gen_length, b, timing[0], tolerances[b])
            rows.append(Row(**recorded(records, unit(name, f"{BLOCK_VARIANT} b{b}"), compute)))
            if progress:
                progress()
    return rows


def block_row_lengths(block_length: int) -> list[int]:
    """The block lengths of a block-diffusion model's rows: BLOCK_ROWS_SMALL and the table's (once if equal)."""
    return sorted({BLOCK_ROWS_SMALL, block_length})


def recorded(records: Records | None, key: str, compute) -> dict:
    """A row's fields from the records when there, else ``compute()``d and recorded."""
    done = records.get(key) if records else None
    if done is None:
        done = compute()
        if records:
            records.add(key, done)
    return done


class Timing:
    """The sequential reference's wall time on the table's prompts, measured once, on first use (after a
    warm-up decode): a resumed table whose units are all recorded decodes nothing."""

    def __init__(self, model, prompt, mask, gen_length: int, block_length: int):
        self.args, self._seconds = (model, "reference", PRESETS["sequential"], prompt, mask, gen_length,
                                    block_length), None

    @property
    def sequential_seconds(self) -> float:
        if self._seconds is None:
            for _ in range(2):  # the first run warms up allocations and kernels
                _, self._seconds = run_variant(*self.args)
        return self._seconds


def make_row(model_name, name, variant, tier, model, prompt, mask, out, reference, seconds, sequential_seconds,
             gen_length) -> Row:
    comparison = compare_traces(reference.trace, out.trace, reference.canvas, out.canvas)
    attention = getattr(PRESETS[name], "needs_attention", False)
    error = 0.0 if variant == "reference" else replay_logit_error(model, prompt, mask, out, gen_length, attention)
    nll = hmm_nll(out.canvas, mask, prompt.shape[1], gen_length) if model_name == "hmm" else None
    counters = out.trace.counters
    return Row(model_name, name, variant, tier, prompt.shape[0], round(comparison.commit_order_match_rate, 4),
               round(comparison.token_match_rate, 4), error, counters.full_forwards,
               round(counters.query_positions / prompt.shape[0], 1), round(row_tokens_per_step(out.trace), 3),
               round(seconds, 3), round(sequential_seconds / seconds, 2), nll)


# (decoder, cache policy, width, depth, lookahead blocks, tier): spec/speculative.md SP3 (E) and SP4 (A)
SPECULATIVE = [("sequential", "none", 3, 3, 0, "E"), ("sequential", "dual", 3, 3, 0, "E"),
               ("fastdllm", "none", 2, 2, 0, "E"), ("fastdllm", "dual", 2, 2, 0, "E"),
               ("fastdllm", "dual", 2, 2, 1, "A")]


def speculative_rows(model_name: str, model, prompt, mask, gen_length: int, block_length: int, timing: Timing,
                     records: Records | None = None, unit=None, progress=None, mine=lambda unit: True) -> list[Row]:
    """Rows for speculative decoding (spec/speculative.md SP3 tier E, SP4 tier A): each prompt decoded alone by
    the base decoder R (policy none: the reference; dual: the dual cache) and by its speculative form; logits
    compared at the steps both took, within the measured float32 rounding of R's forward."""
    singles, tolerances, rows = single_prompts(prompt, mask), [], []
    for config in (c for c in SPECULATIVE if mine(speculative_variant(c))):
        def compute():
            if not tolerances:
                tolerances.append(packing_tolerance(model, singles[0], gen_length))
            return asdict(speculative_row(model_name, model, singles, config, gen_length, block_length,
                                          timing.sequential_seconds, tolerances[0]))
        key = unit(config[0], speculative_variant(config)) if records else None
        rows.append(Row(**recorded(records, key, compute)))
        if progress:
            progress()
    return rows


def speculative_variant(config) -> str:
    _, cache, width, depth, lookahead, _ = config
    return f"spec-{cache} W{width}D{depth}" + (f" inter{lookahead}" if lookahead else "")


def speculative_row(model_name, model, singles, config, gen_length, block_length, sequential_seconds, tol) -> Row:
    name, cache, width, depth, lookahead, tier = config
    kw = dict(rule=PRESETS[name], gen_length=gen_length, block_length=block_length, record_logits=True)
    matches, tokens, per_call, error, full, positions, seconds = [], [], [], 0.0, 0, 0, 0.0
    for single in singles:
        base = reference_decode(model, single, **kw) if cache == "none" else \
            optimized_decode(model, single, cache="dual", **kw)
        start = time.perf_counter()
        spec = speculative_decode(model, single, cache=cache, width=width, depth=depth, lookahead=lookahead, **kw)
        seconds += time.perf_counter() - start
        comparison = compare_traces(base.trace, spec.trace, base.canvas, spec.canvas, numeric_error=tol)
        matches.append(comparison.equivalent)  # the same commit order, or the first difference a tie within tol
        tokens.append(comparison.token_match_rate)
        error = max(error, comparison.max_logit_error or 0.0)
        counters = spec.trace.counters
        full, positions = full + counters.full_forwards, positions + counters.query_positions
        per_call.append(spec.trace.tokens_committed() / counters.model_calls)
    n = len(singles)
    return Row(model_name, name, speculative_variant(config), tier, n, round(sum(matches) / n, 4),
               round(sum(tokens) / n, 4), error, full, round(positions / n, 1), round(sum(per_call) / n, 3),
               round(seconds, 3), round(sequential_seconds / seconds, 2), logit_tolerance=tol)


def packing_tolerance(model, single, gen_length: int) -> float:
    """Measured rounding of R's forward: numerics.tolerance (2 x (2 x |low - high|) + one float32 ulp) of a full
    forward of the initial canvas, against a copy of the model one precision up (``HIGHER``)."""
    higher = copy.deepcopy(model).to(HIGHER[model.dtype])
    x, _ = initial_canvas(model, single, None, gen_length, model.special.mask_id)
    tol = tolerance(model(x).logits, higher(x).logits)
    del higher
    return tol


def build_table(model_name: str, decoders, prompts: int, gen_length: int, block_length: int = BLOCK, seed: int = 0,
                device="cpu", loaded=None, quiet: bool = False, records: Records | None = None,
                group: Group = Group(), dtype: torch.dtype = torch.float32, models: dict | None = None,
                compile: str | None = None) -> list[Row]:
    """Rows for every model ``table_models(model_name)`` names (``loaded``: the first model, already loaded),
    with a progress bar; ``records`` makes every row a unit that survives a kill (``records_for``). In a
    ``group`` of several processes each computes its share (a decoder's four rows, or one speculative row, in
    turn) and returns those rows only. ``models`` (name -> (model, weights sha256)) keeps what was loaded and
    hashed for a second call (rank 0's merge pass: no reload, no second hash of an 8B checkpoint). ``compile``: a
    torch.compile backend, each decoder's compiled rows added (``compiled_rows``)."""
    names, rows, models = table_models(model_name), [], {} if models is None else models
    for name in names:
        if name not in models:
            model = loaded if loaded is not None and name == model_name else \
                load_model(name, device=device, dtype=dtype)
            models[name] = (model, weights_sha256(model) if records else None)
    units = [(name, unit) for name in names for unit in table_units(models[name][0], decoders)]
    owned = {u for i, u in enumerate(units) if group.mine(i)}
    total = sum(unit_rows(models[name][0], unit, decoders, block_length, compile) for name, unit in owned)
    desc = "exactness" + (f" rank {group.rank}" if group.world > 1 else "")
    with tqdm(total=total, disable=quiet, desc=desc, leave=False, position=group.rank) as bar:
        for name in names:
            model, weights = models[name]
            rows += table_for_model(name, decoders, prompts, gen_length, block_length, seed, model,
                                    progress=lambda: bar.update(1), records=records,
                                    mine=lambda unit, name=name: (name, unit) in owned, weights=weights,
                                    compile=compile)
    return rows


def table_units(model, decoders) -> list[str]:
    """The units a model's table is shared out by: each decoder (its rows together) and each speculative row;
    a block-diffusion model's decoders (``block_rows``)."""
    if is_block_model(model):
        return block_decoders(decoders)
    return [*(d for d in decoders if d not in SDAR_DECODERS), *map(speculative_variant, SPECULATIVE)]


def unit_rows(model, unit: str, decoders, block_length: int, compile: str | None) -> int:
    """How many rows a unit adds (the progress bar's total)."""
    if is_block_model(model):
        return len(block_row_lengths(block_length))
    if unit in EVENT_DECODERS:
        return len(EVENT_DECODERS[unit]) if has_llada_layout(model) else 0
    return len(VARIANTS) + (len(COMPILED) if compile else 0) if unit in decoders else 1


def records_for(out, model_name: str, prompts: int, gen_length: int, block_length: int, seed: int,
                fresh: bool = False, group: Group = Group(), dtype: torch.dtype = torch.float32,
                compile: str | None = None) -> Records:
    """The table's records in ``out``/exactness.records.jsonl (rank r > 0: .rank{r}.jsonl beside it): a rerun
    with the same settings (``compile`` among them when given) resumes there; ``fresh`` (done by rank 0) starts
    over."""
    settings = {"table": "exactness", "dtype": str(dtype).removeprefix("torch."),
                **table_meta(model_name, prompts, gen_length, block_length, seed)}
    return open_records(out, "exactness", {**settings, "compile": compile} if compile else settings, fresh, group,
                        row_problem)


def row_problem(result: dict) -> str | None:
    """What keeps a recorded result from being a ``Row`` (None: nothing): only its fields, the required ones
    present, each of its type (str, int not bool, float a finite number; an optional one may be null)."""
    known = {f.name: f for f in fields(Row)}
    unknown = sorted(set(result) - set(known))
    missing = [name for name, f in known.items() if f.default is MISSING and name not in result]
    if unknown or missing:
        return "is not a table row: " + ", ".join([f"unknown field(s) {unknown}"] * bool(unknown)
                                                  + [f"missing field(s) {missing}"] * bool(missing))
    wrong = [f"{name} {json.dumps(value)[:40]}" for name, value in result.items()
             if not _typed(value, known[name].type)]
    return f"has field(s) of the wrong type: {', '.join(wrong)}" if wrong else None


def _typed(value, annotation: str) -> bool:
    """``value`` fits a Row field's annotation ("str", "int", "float", "float | None")."""
    kind, _, optional = annotation.partition(" | ")
    if value is None:
        return optional == "None"
    if kind == "str":
        return isinstance(value, str)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return numeric and (isinstance(value, int) if kind == "int" else math.isfinite(value))


def table_meta(model_name: str, prompts: int, gen_length: int, block_length: int, seed: int) -> dict:
    return {"models": "+".join(table_models(model_name)), "prompts": prompts, "gen_length": gen_length,
            "block_length": block_length, "seed": seed}


def not_exact(rows: list[Row]) -> list[str]:
    """The tier E rows that are not exact, as model/decoder/variant."""
    return [f"{r.model}/{r.decoder}/{r.variant}" for r in rows if r.tier == "E" and not r.exact]


def all_exact(rows: list[Row]) -> bool:
    """Every tier E row exact; if not, one line on stderr names the rows that are not (the exit code 1's why)."""
    failed = not_exact(rows)
    if failed:
        print(f"veridec: exactness: tier E row(s) not exact: {', '.join(failed)}", file=sys.stderr)
    return not failed


def exactness_result(rows: list[Row]) -> VerifyResult:
    """The table as one ``veridec verify`` row: every tier E row must be exact."""
    failed = not_exact(rows)
    return VerifyResult("exactness/tier-E-rows", sum(r.tier == "E" for r in rows), not failed, None, "",
                        "not exact: " + ", ".join(failed) if failed else "")


def write_table(rows: list[Row], out, meta: dict) -> None:
    """exactness.json (meta + rows) and exactness.md under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "exactness.json", json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2))
    write_text_atomic(out / "exactness.md", f"# Exactness table ({', '.join(f'{k} {v}' for k, v in meta.items())})\n\n"
                                      + to_markdown(rows))


COLUMNS = ("model", "decoder", "variant", "tier", "prompts", "commit_order_match", "token_match",
           "max_logit_error", "logit_tolerance", "full_forwards", "positions_per_prompt", "tokens_per_step",
           "speedup_vs_sequential", "hmm_nll_per_token")


def to_markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        values = asdict(row)
        lines.append("| " + " | ".join(format_cell(values[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def format_cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if value and abs(value) < 1e-3 else f"{value:g}"
    return str(value)
