"""A run made of units of work: each unit's result recorded as it finishes (``records.Records``: a killed run
resumes), each process of a torchrun its share of the units (``distributed.Group``: round robin), rank 0 the
whole run's results once every rank has finished.

A unit is a key (the JSON-able parts that name it: model, weights, decoder, variant, prompt, ...) and a function
that computes its result (a JSON-able dict) from nothing but those parts and the run's settings: its result must
not depend on which process computes it or on the units computed before it (seed per unit, not per run).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from .distributed import Group
from .records import Records


@dataclass(frozen=True)
class Unit:
    key: dict  # the parts naming the unit (JSON-able)
    compute: Callable[[], dict]  # its result (JSON-able)


def open_records(out: Path, name: str, settings: dict, fresh: bool = False, group: Group = Group(),
                 check_result: Callable[[dict], str | None] | None = None) -> Records:
    """The run's records in ``out``/``name``.records.jsonl (rank r > 0 writes .rank{r}.jsonl beside it): a rerun
    with the same settings resumes there; ``fresh`` (done by rank 0, the others wait) starts over.
    ``check_result``: the run's check of each recorded result (``Records``)."""
    path = Path(out) / f"{name}.records.jsonl"
    if fresh and group.rank == 0:
        for old in [path, *path.parent.glob(f"{path.stem}.rank*.jsonl")]:
            old.unlink(missing_ok=True)
    group.barrier()
    return Records(path, settings, group.rank, check_result)


def announce_resume(records: Records | None, quiet: bool, group: Group = Group()) -> None:
    """One line on stderr (rank 0) when a run starts from finished units."""
    if records is not None and records.resumed and not quiet and group.rank == 0:
        print(f"veridec: resuming: {records.resumed} finished unit(s) from {records.main} (--fresh recomputes "
              "them)", file=sys.stderr)


def run_units(units: list[Unit], records: Records | None, group: Group = Group(), desc: str = "units",
              quiet: bool = False) -> list[dict] | None:
    """Every unit's result in the order given: recorded units are read, this process's share of the others is
    computed and recorded one by one (a progress bar per rank with ETA; ``quiet`` silences it). In a group of
    several processes rank 0 waits for the others, merges their records and returns all results; the other
    ranks return None. A rank that fails makes the others fail instead of waiting. Without ``records`` (one
    process only) the results are kept in memory."""
    keys = [Records.key(**unit.key) for unit in units]
    if len(set(keys)) != len(keys):
        raise ValueError("two units of the run share a key; each unit needs its own")
    if records is None and group.world > 1:
        raise ValueError("a run of several processes shares its results through records: give it --out")
    results = {} if records is None else records.done
    todo = [(key, unit) for i, (key, unit) in enumerate(zip(keys, units)) if group.mine(i) and key not in results]
    label = desc + (f" rank {group.rank}" if group.world > 1 else "")
    try:
        for key, unit in tqdm(todo, desc=label, disable=quiet, leave=False, position=group.rank):
            result = unit.compute()
            if records is None:
                results[key] = result
            else:
                records.add(key, result)
    except BaseException:
        group.all_ok(False)  # the other ranks stop waiting and fail too
        raise
    if not group.all_ok(True):
        raise RuntimeError("another rank of this torchrun failed; its error is in its own output")
    if group.world > 1:
        if group.rank > 0:
            return None
        records.merge()
    return [results[key] for key in keys]


def run_recorded(units: list[Unit], out: Path | None, name: str, settings: dict, group: Group = Group(),
                 fresh: bool = False, quiet: bool = False) -> list[dict] | None:
    """``run_units`` with the records of ``out``/``name``.records.jsonl under ``settings`` (``out`` None: in
    memory, one process only), saying on stderr when it resumes."""
    records = None if out is None else open_records(out, name, settings, fresh, group)
    announce_resume(records, quiet, group)
    return run_units(units, records, group, name, quiet)
