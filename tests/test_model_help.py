"""Every ``--model`` help names exactly the models its command's loader takes (issue 43): the loader a command uses
is found by running the command with both loaders replaced by a spy, what that loader takes by trying every known
name on the real one, and the help is read from the real parser; with negative controls."""

import re
from pathlib import Path

import pytest

from veridec.harness import arguments
from veridec.harness.cli import build_parser, main
from veridec.models.shipped import SHIPPED, load_model
from veridec.testing import models as check_models

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = sorted({*SHIPPED, *check_models.MODEL_NAMES, "no-such-model"})  # every name a loader knows, one not
COMMANDS = {  # a command line of each command with --model: it loads the model before any computation
    "generate": ["generate", "--prompt", "ab"],
    "verify": ["verify", "--quick", "--no-table", "--quiet"],
    "exactness": ["exactness", "--quick", "--quiet"],
    "check": ["check", f"{ROOT / 'examples' / 'llada_sampler.py'}:generate", "--against", "llada", "--quiet"],
}
LOADERS = {"shipped": lambda name: load_model(name, device="meta"),
           "check": lambda name: check_models.load_check_model(name, device="meta")}


class Loaded(BaseException):
    """Raised by the spy in place of loading: which loader was asked (not an Exception: no handler takes it)."""


def model_helps() -> dict[str, str]:
    """Each subcommand's --model help (the commands without --model left out)."""
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    return {name: action.help for name, sub in commands.choices.items() for action in sub._actions
            if "--model" in action.option_strings}


def help_problems(text: str, taken, refused) -> list[str]:
    """What a --model help gets wrong: a name the loader takes that it does not name, one it refuses that it names."""
    named = set(re.findall(r"[\w-]+", text))
    return [f"{name} is taken but not named" for name in sorted(taken) if name not in named] + \
        [f"{name} is refused but named" for name in sorted(refused) if name in named]


def takes(loader: str) -> set[str]:
    """The candidate names the real loader takes (a refusal raises)."""
    taken = set()
    for name in CANDIDATES:
        try:
            LOADERS[loader](name)
        except (FileNotFoundError, ValueError):
            continue
        taken.add(name)
    return taken


def loader_of(command: str, monkeypatch, tmp_path) -> str:
    """Which loader ``command`` asks for its --model (run as far as the spy)."""
    def spy(loader):
        def load(*args, **kwargs):
            raise Loaded(loader)
        return load

    monkeypatch.setattr(arguments, "load_model", spy("shipped"))
    monkeypatch.setattr(check_models, "load_model", spy("check"))
    argv = [*COMMANDS[command], "--model", "default"] + (["--out", str(tmp_path)] if command == "exactness" else [])
    with pytest.raises(Loaded) as loaded:
        main(argv)
    return loaded.value.args[0]


def test_every_command_with_a_model_is_covered():
    assert set(model_helps()) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_model_help_names_what_the_loader_takes(command, monkeypatch, tmp_path):
    loader = loader_of(command, monkeypatch, tmp_path)
    monkeypatch.undo()
    taken = takes(loader)
    assert "default" in taken and "no-such-model" not in taken
    assert help_problems(model_helps()[command], taken, set(CANDIDATES) - taken) == []


def test_the_loaders_differ_where_the_helps_do():
    """The shipped loader refuses the tiny and oracle models that the check loader takes."""
    assert takes("shipped") == set(SHIPPED)
    assert takes("check") == set(check_models.MODEL_NAMES)


def test_a_help_that_misses_or_invents_a_name_is_found():
    """Negative control: the old exactness help (blocks missing) and a help naming a refused model."""
    old = "default | hmm | path to a LLaDA/Dream model folder"
    assert help_problems(old, {"default", "hmm", "blocks"}, {"tiny-sdar"}) == ["blocks is taken but not named"]
    assert help_problems("default | tiny-sdar | a folder", {"default"}, {"tiny-sdar", "oracle-hmm"}) == [
        "tiny-sdar is refused but named"]
    assert help_problems("oracle-hmm", {"hmm"}, set()) == ["hmm is taken but not named"]  # a name inside a name
