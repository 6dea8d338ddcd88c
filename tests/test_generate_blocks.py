"""``veridec generate --sampler sdar``: block diffusion on a block-diffusion model (spec/block_diffusion.md BD2-BD6),
the printed text that of the reference decoder called directly; samplers and models that do not fit refused."""

import json

import pytest
import torch

from veridec.models import load_pretrained
from veridec.models.tiny import write_tiny_checkpoint
from veridec.reference.block_diffusion import block_diffusion_generate


@pytest.fixture(scope="module")
def sdar_folder(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("sdar") / "model", "sdar", seed=5)


def test_the_text_is_the_reference_decode_cut_at_gen_length(cli, sdar_folder):
    code, out, err = cli("generate", "--model", sdar_folder, "--prompt", "abc", "--sampler", "sdar",
                         "--gen-length", "6", "--block-length", "4", "--steps", "2", "--quiet")
    assert code == 0, err
    model = load_pretrained(sdar_folder)
    ids = model.tokenizer("abc")["input_ids"]
    expected = block_diffusion_generate(model, torch.tensor([ids]), gen_length=6, block_length=4, denoising_steps=2,
                                        temperature=0.0, stopping_criteria_idx=[model.special.eos_id]).canvas[0]
    generated = expected[:len(ids) + 6].tolist()  # the canvas runs to 12 positions (whole blocks): cut at 9
    if model.special.eos_id in generated[len(ids):]:
        generated = generated[:len(ids) + generated[len(ids):].index(model.special.eos_id)]
    assert out.splitlines()[0] == model.tokenizer.decode(generated)
    assert "tokens/s" in out.splitlines()[1]


def test_a_model_without_eos_decodes_to_gen_length(cli, tmp_path):
    """No EOS in the config or the tokenizer: no stop list (BD2 allows None), the whole gen_length decoded."""
    folder = write_tiny_checkpoint(tmp_path / "model", "sdar", seed=5)
    for name, key in (("config.json", "eos_token_id"), ("tokenizer_config.json", "eos_token")):
        settings = json.loads((folder / name).read_text())
        del settings[key]
        (folder / name).write_text(json.dumps(settings))
    model = load_pretrained(folder)
    assert model.special.eos_id is None
    code, out, err = cli("generate", "--model", folder, "--prompt", "abc", "--sampler", "sdar",
                         "--gen-length", "6", "--block-length", "4", "--quiet")
    assert code == 0, err
    ids = model.tokenizer("abc")["input_ids"]
    expected = block_diffusion_generate(model, torch.tensor([ids]), gen_length=6, block_length=4, denoising_steps=4,
                                        temperature=0.0).canvas[0, :len(ids) + 6]
    assert out.splitlines()[0] == model.tokenizer.decode(expected.tolist())


@pytest.mark.parametrize("args, message", [
    (["--sampler", "llada"], "is a block-diffusion model (SDAR layout); use --sampler sdar"),
    (["--sampler", "sdar", "--steps", "5"], "--steps: must lie in [1, 4] for --sampler sdar with --block-length 4"),
    (["--sampler", "sdar", "--block-length", "8", "--steps", "9"], "must lie in [1, 8]"),
    (["--sampler", "sdar", "--alg", "origin"], "--alg do(es) not apply to --sampler sdar"),
    (["--sampler", "sdar", "--tokens-per-step", "2"], "--tokens-per-step do(es) not apply to --sampler sdar"),
    (["--sampler", "sdar", "--temperature", "-1"], "temperature")])
def test_what_does_not_fit_is_refused(cli, sdar_folder, args, message):
    code, _, err = cli("generate", "--model", sdar_folder, "--prompt", "abc", "--quiet", *args)
    assert code == 2 and message in err, err


def test_a_bidirectional_model_refuses_the_block_sampler(cli):
    code, _, err = cli("generate", "--model", "default", "--prompt", "abc", "--sampler", "sdar", "--quiet")
    assert code == 2 and "is bidirectional (not a block-diffusion model); use --sampler llada or dream" in err
