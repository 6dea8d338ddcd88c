"""``veridec generate --sampler diffusiongemma`` (harness/generate_diffusiongemma.py, spec/diffusiongemma.md): the
printed ids are the reference decoder's called directly with the same settings and seed, cut at the first EOS; a
model that is not a DiffusionGemma one, a DiffusionGemma model handed to the mask samplers, text prompts, bad ids,
flags of other samplers and settings out of range are refused with exit 2 before any decode."""

import json

import pytest
import torch

from veridec.models.diffusiongemma import (SHIPPED_FOLDER, load_diffusiongemma, load_shipped_diffusiongemma,
                                           write_tiny_diffusiongemma)
from veridec.reference.diffusiongemma import generate

PROMPT = [2, 5, 6, 7]


def expected_ids(model, steps=None, seed=0, gen=32) -> list[int]:
    """The reference decode called directly (one generator seeded ``seed``), cut at the first EOS."""
    settings = {} if steps is None else {"max_denoising_steps": steps}
    out = generate(model, torch.tensor([PROMPT]), generator=torch.Generator().manual_seed(seed), max_new_tokens=gen,
                   **settings)
    eos = set(out.trace.params["eos_token_id"] or ())
    generated = out.canvas[0, len(PROMPT):].tolist()
    return generated[:next((i for i, t in enumerate(generated) if t in eos), len(generated))]


@pytest.mark.parametrize(("steps", "seed"), [(None, 0), (3, 7)])
def test_the_ids_are_the_reference_decode(cli, tmp_path, steps, seed):
    argv = ["generate", "--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids",
            ",".join(map(str, PROMPT)), "--gen-length", "32", "--seed", seed, "--trace", tmp_path / "t.json"]
    code, out, err = cli(*argv, *(["--steps", steps] if steps else []))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [str(t) for t in expected_ids(load_shipped_diffusiongemma(), steps, seed)]
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["decoder"] == "diffusiongemma-reference" and trace["params"]["max_new_tokens"] == 32
    if steps:
        assert trace["params"]["max_denoising_steps"] == 3
    canvases = int(lines[1].split("canvases ")[1].split()[0])
    assert 1 <= canvases <= 2 and "canvas tokens/s" in lines[1]


def test_a_diffusiongemma_folder_decodes(cli, tmp_path):
    folder = write_tiny_diffusiongemma(tmp_path / "dg", seed=3, canvas_length=8, generation={"eos_token_id": 1})
    code, out, err = cli("generate", "--model", folder, "--sampler", "diffusiongemma", "--prompt-ids", "2,5,6,7",
                         "--gen-length", "8", "--steps", "2")
    assert code == 0, err
    assert out.splitlines()[0].split() == [str(t) for t in expected_ids(load_diffusiongemma(folder), 2, gen=8)]


def test_the_seed_seeds_the_draws(cli, tmp_path):
    """``--seed`` seeds the decode's generator: on a random checkpoint (where the draws decide the ids, unlike the
    shipped one's confident canvases) seed 1 prints the reference decode seeded 1, which differs from seed 0's."""
    folder = write_tiny_diffusiongemma(tmp_path / "dg", seed=3, canvas_length=8, generation={"eos_token_id": 1})
    model = load_diffusiongemma(folder)
    assert expected_ids(model, 2, seed=1, gen=8) != expected_ids(model, 2, seed=0, gen=8)
    code, out, err = cli("generate", "--model", folder, "--sampler", "diffusiongemma", "--prompt-ids", "2,5,6,7",
                         "--gen-length", "8", "--steps", "2", "--seed", "1")
    assert code == 0, err
    assert out.splitlines()[0].split() == [str(t) for t in expected_ids(model, 2, seed=1, gen=8)]


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "default", "--sampler", "diffusiongemma", "--prompt-ids", "2,5"],
     "--model default is not a DiffusionGemma model"),
    (["--model", "blocks", "--sampler", "diffusiongemma", "--prompt-ids", "2,5"],
     "--model blocks is not a DiffusionGemma model"),
    (["--model", "diffusiongemma", "--prompt", "ab"], "is a uniform-state DiffusionGemma model (no mask token)"),
    (["--model", str(SHIPPED_FOLDER), "--sampler", "dream", "--prompt", "ab"],
     "is a uniform-state DiffusionGemma model (no mask token): use --sampler diffusiongemma"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt", "ab"],
     "--prompt: --model diffusiongemma has no tokenizer veridec loads"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2,99"],
     "--prompt-ids: token ids must lie in [0, 31]"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2,,5"],
     "--prompt-ids: comma-separated integers"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2", "--temperature", "0"],
     "--temperature (its temperatures follow the checkpoint's schedule"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2", "--block-length", "4",
      "--alg", "entropy"], "--block-length, --alg do(es) not apply to --sampler diffusiongemma"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2", "--gen-length", "100000"],
     "--gen-length: max_new_tokens 100000 (in canvases of 16) + the prompt's 1 tokens exceed"),
    (["--model", "diffusiongemma", "--sampler", "diffusiongemma", "--prompt-ids", "2", "--steps", "0"],
     "--steps: must lie in [1, inf), got 0"),
    (["--prompt-ids", "2,5"], "--prompt-ids applies to --sampler diffusiongemma"),
])
def test_bad_input_is_refused(cli, argv, message):
    code, out, err = cli("generate", *argv)
    assert code == 2 and message in err and out == "", err
