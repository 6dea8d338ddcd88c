"""Official signatures as published (issue 46 item 5): JetAstra/SDAR's ``block_diffusion_generate`` takes the prompt
as a dict holding ``input_ids``; the check passes it so, unwrapped, where told (``prompt_form="dict"``,
``--prompt-form dict``) or where the signature says so (a prompt annotated dict, Mapping or BatchEncoding)."""

import inspect
from pathlib import Path

import pytest
import torch

from veridec.testing import CandidateError, check_decoder, load_candidate
from veridec.testing.candidates import Fit, call_candidate, fit_candidate
from veridec.testing.targets import target

EXAMPLES = Path(__file__).parents[1] / "examples"
RUN = dict(model="tiny-sdar", max_batch=1, padding=False, max_examples=8, knobs=False)


def official(name: str):
    return load_candidate(f"{EXAMPLES / 'sdar_official_signature.py'}:{name}")


def test_the_published_signature_runs_unwrapped_with_the_dict_form():
    result = check_decoder(official("block_diffusion_generate"), "sdar", prompt_form="dict", **RUN)
    assert result.passed, result.markdown()


def test_a_prompt_annotated_as_a_dict_is_read_from_the_signature():
    result = check_decoder(official("annotated_block_diffusion_generate"), "sdar", **RUN)
    assert result.passed, result.markdown()


@pytest.mark.filterwarnings("ignore::UserWarning")  # the published code indexes a tensor with a string
def test_the_tensor_form_fails_the_published_signature():
    """The negative control: handed a tensor, the published code fails inside (what the issue saw)."""
    result = check_decoder(official("block_diffusion_generate"), "sdar", prompt_form="tensor", **RUN)
    assert not result.passed and "IndexError" in result.markdown()


@pytest.mark.parametrize("annotation, form", [(dict, "dict"), ("dict", "dict"), ("BatchEncoding", "dict"),
                                              ("Mapping[str, torch.Tensor]", "dict"), (torch.Tensor, "tensor"),
                                              (inspect.Parameter.empty, "tensor")])
def test_the_form_follows_the_prompts_annotation(annotation, form):
    def decoder(model, prompt, gen_length=4):
        return prompt

    decoder.__signature__ = inspect.signature(decoder).replace(parameters=[
        p.replace(annotation=annotation) if p.name == "prompt" else p
        for p in inspect.signature(decoder).parameters.values()])
    assert fit_candidate(decoder, target("fastdllm")).prompt_form == form
    assert fit_candidate(decoder, target("fastdllm"), "tensor").prompt_form == "tensor"
    with pytest.raises(CandidateError, match="prompt_form must be one of auto, tensor, dict"):
        fit_candidate(decoder, target("fastdllm"), "list")


def test_the_dict_holds_the_prompt_and_its_attention_mask():
    seen = {}

    def decoder(model, prompt, gen_length=2, attention_mask=None):
        seen.update(prompt)
        return torch.cat([prompt["input_ids"], prompt["input_ids"][:, :2]], dim=1)

    prompt, mask = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 1, 1]])
    call_candidate(decoder, Fit(frozenset({"gen_length", "attention_mask"}), {}, False, "dict"), object(), prompt,
                   mask, {"gen_length": 2}, "mask_id", 7)
    assert seen["input_ids"] is prompt and seen["attention_mask"] is mask


def test_the_command_takes_the_prompt_form(capsys):
    from veridec.harness.cli import main

    code = main(["check", f"{EXAMPLES / 'sdar_official_signature.py'}:block_diffusion_generate", "--against", "sdar",
                 "--model", "tiny-sdar", "--max-batch", "1", "--no-padding", "--trials", "4", "--no-knobs",
                 "--prompt-form", "dict", "--quiet"])
    assert code == 0, capsys.readouterr().out
