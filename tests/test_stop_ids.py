"""Where the block-diffusion decoders look for stop ids (spec/block_diffusion.md BD5.5, BD12.1): after a block's
store, a stop id in the generated part of the canvas ends the decode; one in the prompt does not. The truth is the
rule applied by hand to the same decoder's decode without stops: the blocks up to the first one holding a stop
id in the generation, the rest masked. The stop id is placed at the first generated position, at the last
position of a block, at the first of the next, in the last block, and in the prompt, for every decoder that stops.
"""

from functools import partial

import pytest
import torch

from veridec.optimized import block_diffusion as cached
from veridec.optimized.block_parallel import parallel_generate as cached_parallel
from veridec.reference import block_diffusion as reference
from veridec.rules.presets import PRESETS
from veridec.testing import load_check_model

B = 4  # the block length of every case here
PROMPT = [5, 6, 7, 9, 11]  # five tokens: one whole block, then the generation from position 5 (block 1)
GEN = 11  # blocks 1 .. 3 of the canvas (16 positions)


class Forced:
    """``model`` with token ``token``'s logit raised by 1e4 at canvas position ``position``: the decode commits
    it there (temperature 0), wherever the decoder computes that position's logits."""

    def __init__(self, model, position: int, token: int):
        self.model, self.position, self.token = model, position, token

    def __getattr__(self, name):
        return getattr(self.model, name)

    def _raised(self, out, start: int):
        where = self.position - start
        if 0 <= where < out.logits.shape[1]:
            out.logits = out.logits.clone()
            out.logits[:, where, self.token] += 1e4
        return out

    def __call__(self, x, attention_mask=None, **options):
        return self._raised(self.model(x, attention_mask=attention_mask, **options), 0)

    def forward_blocks(self, tokens, start: int, cache, block_size: int, **options):
        return self._raised(self.model.forward_blocks(tokens, start, cache, block_size, **options), start)


def _sdar(decode, model, prompt, stop):
    return decode(model, prompt, gen_length=GEN, block_length=B, denoising_steps=2, temperature=0.0,
                  stopping_criteria_idx=stop).canvas


def _parallel(decode, model, prompt, stop):
    return decode(model, prompt, rule=PRESETS["fastdllm"], gen_length=GEN, block_length=B,
                  stopping_criteria_idx=stop).canvas


def _llada2(model, prompt, stop):
    return reference.llada2_generate(model, prompt, gen_length=GEN, block_length=B, steps=2,
                                     eos_id=None if stop is None else stop[0]).canvas


DECODERS = {"sdar-reference": partial(_sdar, reference.block_diffusion_generate),
            "sdar-cached": partial(_sdar, cached.block_diffusion_generate),
            "parallel-reference": partial(_parallel, reference.parallel_generate),
            "parallel-cached": partial(_parallel, cached_parallel), "llada2": _llada2}


@pytest.fixture(scope="module")
def model():
    return load_check_model("tiny-sdar")


def expected(full: torch.Tensor, stop: int, prompt_length: int, mask_id: int) -> torch.Tensor:
    """BD5.5 by hand on the decode without stops ``full`` [1, T]: every block after the first one holding ``stop``
    in the generation x[P:] masked (none when no block does)."""
    found = (full[0, prompt_length:] == stop).nonzero()
    if not len(found):
        return full
    last_block = (prompt_length + int(found[0])) // B
    out = full.clone()
    out[0, (last_block + 1) * B:] = mask_id
    return out


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@pytest.mark.parametrize("position", [5, 7, 8, 12, 15], ids=["first-generated", "block-end", "next-block-start",
                                                             "last-block-start", "last-position"])
def test_a_stop_id_in_the_generation_ends_the_decode_after_its_block(model, decoder, position):
    stop = model.special.eos_id
    forced = Forced(model, position, stop)
    prompt = torch.tensor([PROMPT])
    full = DECODERS[decoder](forced, prompt, None)
    assert int(full[0, position]) == stop  # the forcing took
    got = DECODERS[decoder](forced, prompt, [stop])
    assert torch.equal(got, expected(full, stop, len(PROMPT), model.special.mask_id)), (got, full)


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_a_stop_id_in_the_prompt_stops_nothing(model, decoder):
    """The prompt's own tokens are no stop: with the stop id at prompt position 3 (the whole prompt block) and 4
    (the block the generation starts in), the decode equals the one without stops, where the generation holds
    no such id."""
    prompt = torch.tensor([PROMPT])
    full = DECODERS[decoder](model, prompt, None)
    stop = next(t for t in (9, 11, 13, 17) if not (full[0, len(PROMPT):] == t).any())
    with_stop = torch.tensor([PROMPT[:3] + [stop, stop]])
    assert torch.equal(DECODERS[decoder](model, with_stop, [stop]), DECODERS[decoder](model, with_stop, None))
