"""Hostile records (issue 29): a line of exactness.records.jsonl edited with its digest recomputed (so the digest
check passes) is refused in one line naming the file, the line and what is wrong, never a traceback nor a silent
result; a table that is not exact says which rows on stderr."""

import json
import shutil

import pytest

from veridec.harness.cli import main
from veridec.harness.records import record_digest

NAME = "exactness.records.jsonl"


def argv(model, out) -> list[str]:
    return ["exactness", "--model", str(model), "--quick", "--decoders", "sequential", "--quiet", "--out", str(out)]


@pytest.fixture(scope="module")
def recorded(tiny_folders, tmp_path_factory):
    """One finished table's records (9 rows: the 4 variants of sequential, 5 speculative), computed once."""
    out = tmp_path_factory.mktemp("recorded")
    assert main(argv(tiny_folders["llada"], out)) == 0
    return out / NAME


@pytest.fixture()
def run(recorded, tiny_folders, tmp_path, capsys):
    """run(edit=None, line=1): a copy of the records, line ``line``'s record changed by ``edit`` (its digest
    recomputed), the table rerun on it -> (exit code, stdout, stderr, the records' text before the run)."""

    def rerun(edit=None, line: int = 1):
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"  # a fresh folder per rerun
        out.mkdir()
        shutil.copy(recorded, out / NAME)
        if edit is not None:
            forge(out / NAME, line, edit)
        before = (out / NAME).read_text()
        capsys.readouterr()
        code = main(argv(tiny_folders["llada"], out))
        captured = capsys.readouterr()
        assert (out / NAME).read_text() == before  # a refused file is left as it was
        return code, captured.out, captured.err

    return rerun


def forge(path, line: int, edit) -> None:
    """Change line ``line``'s record in place with ``edit(record)`` and recompute its digest."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    record.pop("digest")
    edit(record)
    lines[line - 1] = json.dumps({**record, "digest": record_digest(record)})
    path.write_text("\n".join(lines) + "\n")


def setter(field, value):
    return lambda record: record.__setitem__(field, value)


def result_setter(field, value):
    return lambda record: record["result"].__setitem__(field, value)


def refused(outcome, line: int, message: str) -> None:
    code, out, err = outcome
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{NAME}: line {line}" in err and message in err and err.endswith("pass --fresh to recompute\n"), err


def test_untouched_records_resume(run):
    """The negative control: the same copy, not edited, resumes to an exact table (exit 0, nothing on stderr)."""
    code, out, err = run()
    assert code == 0 and err == "" and "| sequential | optimized | E |" in out


@pytest.mark.parametrize("key, message", [
    (["model", "llada"], "its key is list [\"model\", \"llada\"], not a string"),
    ({"model": "x"}, "its key is dict {\"model\": \"x\"}, not a string"),
    (7, "its key is int 7, not a string"),
    ("x", "its key \"x\" is not a JSON object naming a unit"),
    ("[1]", "its key \"[1]\" is not a JSON object naming a unit"),
])
def test_a_key_that_names_no_unit_is_refused(run, key, message):
    refused(run(setter("key", key), line=2), 2, message)


@pytest.mark.parametrize("result, message", [
    ("a string", "its result is str \"a string\", not an object"),
    ([1, 2], "its result is list [1, 2], not an object"),
    ({}, "its result is not a table row: missing field(s) ['model', 'decoder'"),
])
def test_a_result_that_is_no_row_is_refused(run, result, message):
    refused(run(setter("result", result), line=3), 3, message)


@pytest.mark.parametrize("field, value, message", [
    ("token_match", "1", "has field(s) of the wrong type: token_match \"1\""),
    ("prompts", None, "has field(s) of the wrong type: prompts null"),
    ("seconds", [1], "has field(s) of the wrong type: seconds [1]"),
    ("full_forwards", True, "has field(s) of the wrong type: full_forwards true"),
    ("full_forwards", 2.5, "has field(s) of the wrong type: full_forwards 2.5"),
    ("max_logit_error", float("nan"), "has field(s) of the wrong type: max_logit_error NaN"),
    ("hmm_nll_per_token", float("inf"), "has field(s) of the wrong type: hmm_nll_per_token Infinity"),
    ("decoder", 1, "has field(s) of the wrong type: decoder 1"),
    ("was", 1, "is not a table row: unknown field(s) ['was']; pass"),
])
def test_a_row_field_of_the_wrong_type_is_refused(run, field, value, message):
    refused(run(result_setter(field, value), line=4), 4, message)


def test_a_missing_required_field_is_refused_and_well_typed_values_are_taken(run):
    """A required field left out is refused; an optional field null or a number, an int where a float goes, are
    rows (the forged values are no worse than the real ones: the row stays exact)."""
    refused(run(lambda record: record["result"].pop("tokens_per_step")), 1, "missing field(s) ['tokens_per_step']")
    code, _, err = run(lambda record: record["result"].update(hmm_nll_per_token=1.5, token_match=1,
                                                              logit_tolerance=None))
    assert code == 0 and err == "", err


def test_settings_edited_under_their_old_hash_are_refused(run):
    """Only the hash was compared: the settings themselves (seed 7) must be this run's too."""
    code, out, err = run(lambda record: record["settings"].__setitem__("seed", 7), line=5)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{NAME}: line 5 comes from other settings (" in err and "'seed': 7" in err, err
    assert err.endswith("give another --out or pass --fresh\n"), err


def test_a_table_that_is_not_exact_names_its_rows_on_stderr(run, tiny_folders):
    """A tier E row made not exact (the optimized variant's token match 0.5): exit 1 and one line on stderr
    naming the row model/decoder/variant."""
    code, out, err = run(result_setter("token_match", 0.5), line=2)
    row = f"{tiny_folders['llada']}/sequential/optimized"
    assert code == 1 and err == f"veridec: exactness: tier E row(s) not exact: {row}\n", err
    assert "| sequential | optimized | E |" in out
