"""The exactness table (spec/exactness.md): every decoder x {reference, optimized, prefix, dual} on a model.

Each row compares a variant's decode of a batch of prompts with the reference decode of the same decoder:
commit-order match (share of prompts), token match (share of generated tokens), max logit error (the
variant's logits at its committed positions vs a full forward of the canvas it saw), full forwards, query
positions computed per prompt, tokens per step (per prompt, its own steps), wall-clock speedup vs the
sequential reference in the same run, and on the HMM-world model the exact per-token NLL of the
continuations under the true HMM. Tier E rows must match exactly; tier A rows are measured.

Each row is of a kind (``rows.RowKind``: its label, tier, how its two sides decode, what it compares) from the
tables of the row modules (``parallel_rows``, ``compiled_rows``, ``speculative_rows``, ``event_rows``,
``block_rows``); ``row_plan`` lists a model's rows, ``table_for_model`` builds each (``rows.build_row``) or takes
it from the records.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from typing import NamedTuple

import torch
from tqdm import tqdm

from veridec.decoding import has_llada_layout, is_block_model
from veridec.files import write_text_atomic
from veridec.numerics import HIGHER
from veridec.rules.presets import PRESETS

from .block_rows import SDAR_DECODERS, block_decoders, block_kinds
from .checks.registry import VerifyResult
from .compiled_rows import compiled_kinds
from .distributed import Group
from .event_rows import EVENT_DECODERS, EVENT_KINDS  # noqa: F401 (EVENT_DECODERS: the CLI's --decoders)
from .family_rows import FAMILY_DECODERS, family_of, load_table_model, table_prompts
from .parallel_rows import PARALLEL
from .records import Records, weights_sha256
from .rows import RowKind, TableInputs, build_row
from .speculative_rows import SPECULATIVE_KINDS
from .units import open_records
from .workloads import BLOCK, table_models

QUICK_SIZE = (2, 32)  # (prompts, gen length) of ``--quick`` tables
VERIFY_SIZE = (4, 64)  # of the table ``veridec verify`` prints
VERIFY_DECODERS = ("sequential", "conf-hq", "fastdllm", "factor", "localleap", "eb-hq", "klass-hq", "dapd-hq",
                   "fastdllm-ht", "fastdllm-ht-certified", "localleap-certified", "wino", "editing", *SDAR_DECODERS,
                   *FAMILY_DECODERS)


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


class PlannedRow(NamedTuple):
    """One row of a model's table to come: the unit it is shared out with (``table_units``), its decoder, its kind."""

    unit: str
    decoder: str
    kind: RowKind


def row_plan(model, decoders, block_length: int, compile: str | None) -> list[PlannedRow]:
    """The rows a model's table has, in the table's order. A block-diffusion model: each decoder that runs on it
    (``block_decoders``) at each block length (``block_kinds``). Any other: each preset among ``decoders`` in the
    parallel kinds (with ``compile``, its compiled kinds after them), the speculative rows (each its own unit),
    then, on a LLaDA-layout model (WN1, ED1), the decoders with revocable commits. A family's table model
    (``family_rows``): its decoder's kinds, when its decoder is among ``decoders``."""
    family = family_of(model)
    if family:
        return [PlannedRow(family.DECODER, family.DECODER, kind) for kind in family.kinds(model)
                if family.DECODER in decoders]
    if is_block_model(model):
        return [PlannedRow(d, d, kind) for d in block_decoders(decoders) for kind in block_kinds(block_length)]
    kinds = PARALLEL + (compiled_kinds(compile) if compile else ())
    plan = [PlannedRow(d, d, kind) for d in decoders if d in PRESETS for kind in kinds]  # sdar-*: block models only
    plan += [PlannedRow(kind.label, kind.settings["tree"].decoder, kind) for kind in SPECULATIVE_KINDS]
    if has_llada_layout(model):
        plan += [PlannedRow(d, d, kind) for d in EVENT_KINDS if d in decoders for kind in EVENT_KINDS[d]]
    return plan


def table_for_model(model_name: str, decoders, n_prompts: int = 8, gen_length: int = 64, block_length: int = BLOCK,
                    seed: int = 0, model=None, progress=None, records: Records | None = None,
                    mine=lambda unit: True, weights: str | None = None, compile: str | None = None) -> list[Row]:
    """Rows for ``decoders`` (preset names) on a model (loaded by name unless given), as ``row_plan`` lists them;
    ``model_name`` "hmm" adds the true HMM's NLL. The sequential reference is timed after one warm-up decode.
    With ``records``, each row is a unit: rows found there are taken as they are, each new one is recorded as it
    is finished. ``mine(unit)`` (a decoder's name, or a speculative row's variant) says which rows this process
    computes (torchrun: its share); the others are left out. ``weights``: the model's ``weights_sha256`` when
    known. ``compile``: a torch.compile backend; each decoder also gets its ``compiled_rows`` kinds."""
    model = load_table_model(model_name, "cpu", torch.float32) if model is None else model
    if model.dtype not in HIGHER:
        raise ValueError(f"the exactness table runs in float32, bfloat16 or float16, not {model.dtype}")
    if compile and is_block_model(model) and not family_of(model):
        raise ValueError("compiled rows cover the parallel decoders' caches (compiled_rows.COMPILED); a "
                         "block-diffusion model's table has none: run it without --compile")
    prompt, mask = table_prompts(model_name, model, n_prompts, seed)
    inputs = TableInputs(model_name, model, prompt, mask, gen_length, block_length, compile, seed)
    weights = (weights or weights_sha256(model)) if records else None
    rows = []
    for planned in row_plan(model, decoders, block_length, compile):
        if not mine(planned.unit):
            continue
        key = Records.key(model=model_name, weights=weights, decoder=planned.decoder, variant=planned.kind.label)
        rows.append(Row(**recorded(records, key, lambda: build_row(inputs, planned.decoder, planned.kind))))
        if progress:
            progress()
    return rows


def recorded(records: Records | None, key: str, compute) -> dict:
    """A row's fields from the records when there, else ``compute()``d and recorded."""
    done = records.get(key) if records else None
    if done is None:
        done = compute()
        if records:
            records.add(key, done)
    return done


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
                load_table_model(name, device, dtype)
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
    a block-diffusion model's decoders (``block_rows``); a family's table model: its decoder."""
    family = family_of(model)
    if family:
        return [family.DECODER] if family.DECODER in decoders else []
    if is_block_model(model):
        return block_decoders(decoders)
    return [*(d for d in decoders if d not in SDAR_DECODERS), *(kind.label for kind in SPECULATIVE_KINDS)]


def unit_rows(model, unit: str, decoders, block_length: int, compile: str | None) -> int:
    """How many rows a unit adds (the progress bar's total)."""
    return sum(planned.unit == unit for planned in row_plan(model, decoders, block_length, compile))


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
