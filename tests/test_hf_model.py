"""``--hf-model`` (spec/exactness.md EC9): the candidate's model is the checkpoint folder loaded with transformers'
auto classes. The folder here ships its own modelling code in the manner of the official Dream folder (a config
with ``auto_map``, ``modeling_*.py`` beside the weights): transformers' Qwen2 made bidirectional. It runs only
with ``--trust-remote-code``; without it the check is refused in one line, and nothing of the folder runs."""

import json
import sys
from pathlib import Path

import pytest

from veridec.harness.cli import main
from veridec.models import write_tiny_checkpoint
from veridec.testing import check_decoder, load_candidate
from veridec.testing.own_model import load_hf_model

EXAMPLES = Path(__file__).parents[1] / "examples"
CANDIDATE = f"{EXAMPLES / 'dream_sampler.py'}:diffusion_generate"

CONFIGURATION = '''
from transformers import Qwen2Config


class TinyDreamConfig(Qwen2Config):
    model_type = "Dream"
'''
MODELING = '''
from transformers import Qwen2ForCausalLM

from .configuration_tinydream import TinyDreamConfig


class TinyDreamModel(Qwen2ForCausalLM):
    config_class = TinyDreamConfig

    def __init__(self, config):
        config.is_causal = False
        config._attn_implementation = "eager"
        super().__init__(config)
        for layer in self.model.layers:
            layer.self_attn.is_causal = False

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        if isinstance(attention_mask, str):  # Dream's "full": no padding
            attention_mask = None
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                               **kwargs)
'''


@pytest.fixture(scope="module")
def remote_code_folder(tmp_path_factory):
    folder = write_tiny_checkpoint(tmp_path_factory.mktemp("hf") / "tiny-dream-remote", "dream", seed=3)
    (folder / "configuration_tinydream.py").write_text(CONFIGURATION)
    (folder / "modeling_tinydream.py").write_text(MODELING)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_tinydream.TinyDreamConfig",
                          "AutoModel": "modeling_tinydream.TinyDreamModel"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_remote_code_runs_only_when_trusted(remote_code_folder, capsys):
    with pytest.raises(ValueError, match="runs only with --trust-remote-code"):
        load_hf_model(remote_code_folder)
    assert not any("modeling_tinydream" in name for name in sys.modules)
    code = main(["check", CANDIDATE, "--against", "dream", "--model", str(remote_code_folder), "--hf-model",
                 "--trials", "1", "--quiet"])
    assert code == 2 and "runs only with --trust-remote-code" in capsys.readouterr().err
    model = load_hf_model(remote_code_folder, trust_remote_code=True)
    assert type(model).__name__ == "TinyDreamModel" and not model.training


def test_a_candidate_checked_on_the_folder_loaded_by_transformers(remote_code_folder, capsys):
    """Dream's sampler on transformers' load of the folder against veridec's Dream sampler on veridec's load:
    the preflight finds the two within rounding, and every case is exact."""
    result = check_decoder(load_candidate(CANDIDATE), "dream", model=str(remote_code_folder), max_examples=4,
                           max_batch=1, padding=False, candidate_model="hf", trust_remote_code=True, knobs=False)
    assert result.passed, result.markdown()
    assert result.candidate_model == "hf (remote code)" and 0 <= result.model_difference < 1e-4
    assert result.trials + result.skipped >= 1
    code = main(["check", CANDIDATE, "--against", "dream", "--model", str(remote_code_folder), "--hf-model",
                 "--trust-remote-code", "--trials", "2", "--max-batch", "1", "--no-padding", "--no-knobs", "--quiet"])
    assert code == 0, capsys.readouterr()


def test_hf_model_needs_a_folder_and_excludes_the_other_flags(capsys):
    with pytest.raises(ValueError, match="--model must be a folder, got 'tiny-dream'"):
        check_decoder(load_candidate(CANDIDATE), "dream", model="tiny-dream", candidate_model="hf")
    with pytest.raises(ValueError, match="trust_remote_code applies to candidate_model='hf'"):
        check_decoder(load_candidate(CANDIDATE), "dream", model="tiny-dream", trust_remote_code=True,
                      candidate_model=f"{EXAMPLES / 'own_model.py'}:load")
    for extra, says in ((["--trust-remote-code"], "--trust-remote-code applies with --hf-model only"),
                        (["--hf-model", "--candidate-model", "x.py:f"], "give one")):
        assert main(["check", CANDIDATE, "--against", "dream", "--model", "tiny-dream", *extra, "--quiet"]) == 2
        assert says in capsys.readouterr().err


def test_the_reproducer_reloads_the_folder_as_it_was_loaded():
    """A failure found on --hf-model --trust-remote-code reruns with both flags, in Python and on the command line;
    without remote code, with neither."""
    from types import SimpleNamespace

    from veridec.testing.report import _own_model_lines, reproducer_command

    def command(label):
        result = SimpleNamespace(source="c.py:f", convention="dream", ties="lowest", official_mode="match",
                                 case_timeout=None, candidate_model=label, tier="E",
                                 failure=SimpleNamespace(case={"seed": 0}))
        return reproducer_command(result, "dream", "FOLDER", "none")

    assert "--hf-model --trust-remote-code" in command("hf (remote code)")
    assert "--hf-model" in command("hf") and "--trust-remote-code" not in command("hf")
    assert "trust_remote_code=True" in "\n".join(_own_model_lines("hf (remote code)", "FOLDER"))
    assert "trust_remote_code=False" in "\n".join(_own_model_lines("hf", "FOLDER"))
