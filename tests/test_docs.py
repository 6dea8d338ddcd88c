"""The documentation is true to the code: README.md and every docs/*.md page.

- Their ```python blocks run as written, in order, one namespace per file, in a temporary directory (``/tmp/`` in
  the code stands for it).
- Every command line of their shell blocks (```bash, ```sh, ```console, ```shell) that runs ``veridec`` (also
  after ``&&``, under ``torchrun`` or as ``python -m veridec.harness.cli``) is parsed by the real parser,
  ``veridec.harness.cli.build_parser()``, and every ``python -m tools.NAME ARGS`` by that tool's
  ``build_parser()``: a flag that does not exist, or a bad value, fails the test. Parsing opens no file, so
  placeholders such as ``FILE.py:FUNCTION`` are fine.
- README.md is a front door: at most 200 lines, both set-up commands in its first 40, the CI test command
  between the markers ``.ci/run`` reads.
- The site builds: ``mkdocs build --strict``.
"""

import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from veridec.harness.arguments import UsageError
from veridec.harness.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
SHELL = ("bash", "sh", "console", "shell")
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTIONS = {">", ">>", "<", "&>"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAIN_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e . && veridec verify"
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e '.[test]' && "
                "pytest -q --hypothesis-profile=ci -n auto --dist loadscope")
README_LINES, SETUP_WITHIN = 200, 40


def fenced(text: str, languages) -> list[tuple[int, str]]:
    """(line number of the block's first code line, code) of every fenced block in one of ``languages``."""
    return [(text.count("\n", 0, match.start(2)) + 1, match.group(2))
            for match in FENCE.finditer(text) if match.group(1) in languages]


def shell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command line) of the shell blocks: ``\\`` continuations joined, ``$ `` prompts dropped,
    blank and comment lines skipped."""
    found = []
    for start, block in fenced(text, SHELL):
        lines = block.splitlines()
        index = 0
        while index < len(lines):
            number, line = start + index, lines[index]
            while line.rstrip().endswith("\\") and index + 1 < len(lines):
                index += 1
                line = line.rstrip()[:-1] + " " + lines[index].strip()
            index += 1
            line = line.strip()
            line = line[2:] if line.startswith("$ ") else line
            if line and not line.startswith("#"):
                found.append((number, line))
    return found


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line: split at ``&&``, ``;``, ``|`` ..., comments and redirections
    dropped, and each command's leading ``NAME=value`` assignments."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    pieces, words = [[]], list(lexer)
    index = 0
    while index < len(words):
        if words[index] in SEPARATORS:
            pieces.append([])
        elif words[index] in REDIRECTIONS:
            index += 1  # the file the redirection names
        else:
            pieces[-1].append(words[index])
        index += 1
    for piece in pieces:
        while piece and ENV_ASSIGNMENT.match(piece[0]):
            piece.pop(0)
    return [piece for piece in pieces if piece]


def parser_and_arguments(words: list[str]):
    """(what is run, its parser, its arguments) for a veridec or tools command, else None."""
    program = os.path.basename(words[0])
    if program == "veridec":
        return "veridec", build_parser(), words[1:]
    if program == "torchrun":
        for index, word in enumerate(words):
            if word == "-m":
                return parser_and_arguments(["python", *words[index:]])
            if os.path.basename(word) == "veridec":
                return "veridec", build_parser(), words[index + 1:]
        return None
    if re.fullmatch(r"python[0-9.]*", program) and len(words) > 2 and words[1] == "-m":
        module, arguments = words[2], words[3:]
        if module == "veridec.harness.cli":
            return "veridec", build_parser(), arguments
        if module.startswith("tools."):
            return module, importlib.import_module(module).build_parser(), arguments
    return None


def parsed(line: str) -> list[tuple[str, object, list[str]]]:
    """The veridec and tools commands of a shell line: (program, parser, arguments)."""
    return [found for words in commands(line) if (found := parser_and_arguments(words)) is not None]


def check_line(line: str) -> list[str]:
    """What the parsers refuse in one shell line (empty: every veridec and tools command in it parses)."""
    problems = []
    for program, parser, arguments in parsed(line):
        try:
            parser.parse_args(arguments)
        except UsageError as err:
            problems.append(f"{program}: {err}")
        except SystemExit as err:  # a tool's plain argparse parser: usage on stderr, exit 2
            problems.append(f"{program}: refused by its parser (exit {err.code})")
    return problems


def python_documents() -> list[Path]:
    return [path for path in DOCUMENTS if fenced(path.read_text(), ("python",))]


# ------------------------------------------------------------------------------------------------ the examples
@pytest.mark.parametrize("path", python_documents(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_python_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # as in a checkout: examples/... resolves
    namespace = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for start, block in fenced(path.read_text(), ("python",)):
        code = "\n" * (start - 1) + block.replace("/tmp/", f"{tmp_path}/")  # tracebacks name the file's lines
        exec(compile(code, str(path), "exec"), namespace)  # noqa: S102


def test_the_examples_are_found():
    assert README in python_documents() and len(python_documents()) >= 3
    assert sum(len(fenced(path.read_text(), ("python",))) for path in DOCUMENTS) >= 12


# ------------------------------------------------------------------------------------------ the command lines
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_shell_command_lines_parse(path):
    problems = [f"{path.name}:{number}: {line}\n    {problem}" for number, line in shell_lines(path.read_text())
                for problem in check_line(line)]
    assert not problems, "\n".join(problems)


def test_the_command_lines_are_found():
    """Enough lines reach the parsers: every subcommand and every tool the pages document."""
    found = [(program, arguments) for path in DOCUMENTS for _, line in shell_lines(path.read_text())
             for program, _, arguments in parsed(line)]
    subcommands = {arguments[0] for program, arguments in found if program == "veridec" and arguments}
    assert subcommands == {"generate", "verify", "exactness", "bounds", "experiment", "check"}, subcommands
    tools = {program for program, _ in found if program.startswith("tools.")}
    assert tools == {"tools.mutation", "tools.golden.record", "tools.golden.wino", "tools.golden.editing",
                     "tools.gpu_check", "tools.gpu_bench", "tools.host_share", "tools.baseline", "tools.opcount",
                     "tools.golden.sdar", "tools.golden.llada2", "tools.block_bench",
                     "tools.training.dllm", "tools.training.reward", "tools.stochastic_calibration",
                     "tools.float32_gumbel", "tools.golden.diffusiongemma", "tools.training.diffusiongemma",
                     "tools.oracle_profile", "tools.oracle_coverage"}, tools
    assert sum(program == "veridec" for program, _ in found) >= 30


def test_a_flag_that_does_not_exist_is_refused():
    """The self-check: the parsers refuse what they must, so a passing page says something."""
    assert check_line("veridec verify --quick --out results") == []
    assert check_line("veridec verify --no-such-flag")
    assert check_line("veridec check examples/x.py:f --against fastdllm --cache dual --no-such-flag")
    assert check_line("veridec baseline --update")  # gone: python -m tools.baseline
    assert check_line("veridec exactness --dtype float16")  # a value the flag does not take
    assert check_line("python -m tools.baseline --no-such-flag")
    assert check_line("OMP_NUM_THREADS=1 python3 -m tools.mutation --only x --no-such-flag")
    assert check_line("torchrun --nproc-per-node 2 -m veridec.harness.cli verify --no-such-flag")
    assert check_line("pip install -e . && veridec verify --no-such-flag  # after &&")
    assert check_line("veridec generate --prompt 'a # b' --no-such-flag")
    text = "```bash\n$ veridec check FILE.py:FUNCTION --against llada \\\n    --no-such-flag   # a comment\n```\n"
    ((number, line),) = shell_lines(text)
    assert number == 2 and check_line(line)
    assert shell_lines("```text\nveridec verify --no-such-flag\n```\n") == []  # not a shell block


# --------------------------------------------------------------------------------------------- the front door
def test_readme_is_a_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines (at most {README_LINES})"
    head = lines[:SETUP_WITHIN]
    assert head.count(MAIN_COMMAND) == 1 and head.count(TEST_COMMAND) == 1, "set-up commands not in the head"
    assert lines[0] == "# veridec"


def test_the_ci_test_command_is_where_ci_reads_it():
    """``.ci/run``'s sed: the lines between the markers, less the marker and fence lines, are the command."""
    lines = README.read_text().splitlines()
    start, end = lines.index("<!-- ci:test-command -->"), lines.index("<!-- /ci:test-command -->")
    assert lines[start + 1:end] == ["```bash", TEST_COMMAND, "```"]
    assert "ci:test-command" in (ROOT / ".ci" / "run").read_text()


# ---------------------------------------------------------------------------------------------------- the site
def test_the_site_builds_strict(tmp_path):
    """Every page in the nav, every link and anchor resolved (mkdocs.yml makes those warnings, --strict errors)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    built = {path.relative_to(tmp_path / "site").as_posix() for path in (tmp_path / "site").rglob("index.html")}
    pages = {"index.html" if path.stem == "index" else f"{path.stem}/index.html" for path in DOCUMENTS[1:]}
    assert pages <= built, pages - built
