"""harness.workloads' measures on inputs worked by hand: unpadded rows of a left-padded batch, tokens per step per
prompt, the lines a response wrote (a line cut by gen_length is not scored), and the HMM's exact NLL over the rows
that hold symbols only."""

import math

import torch

from harness.workloads import generated_lines, hmm_nll, row_tokens_per_step, single_prompts
from veridec.models.shipped import load_model
from veridec.oracles.world import load_world_hmm
from veridec.trace import StepRecord, Trace


def test_single_prompts_unpad_each_row_by_its_own_mask():
    prompt = torch.tensor([[9, 9, 1, 2], [9, 3, 4, 5], [6, 7, 1, 2]])
    mask = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])
    assert [p.tolist() for p in single_prompts(prompt, mask)] == [[[1, 2]], [[3, 4, 5]], [[6, 7, 1, 2]]]


def test_tokens_per_step_counts_the_steps_a_prompt_committed_in():
    def step(row0, row1):
        return StepRecord(0, [row0, row1], [row0, row1], [[1.0] * len(row0), [1.0] * len(row1)],
                          [[1.0] * len(row0), [1.0] * len(row1)], [math.inf, math.inf])
    trace = Trace("t", {}, 1, 2, steps=[step([1, 2], [1]), step([], [2]), step([3], [3])])
    assert row_tokens_per_step(trace) == (3 / 2 + 3 / 3) / 2


def test_a_line_cut_by_gen_length_is_not_scored():
    model = load_model("default")
    ids = model.tokenizer("ab\ncd\nef")["input_ids"]
    ended = torch.tensor([7, *ids, model.special.eos_id])  # a prompt of one token, then the response
    assert generated_lines(model, ended, 1, "x") == (["xab", "cd", "ef"], True)
    cut = torch.tensor([7, *ids])
    assert generated_lines(model, cut, 1, "x") == (["xab", "cd"], False)


def test_the_hmm_nll_skips_rows_that_hold_a_non_symbol():
    hmm = load_world_hmm()
    symbols = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, hmm.num_symbols, 6]])  # row 1 kept a mask (8)
    prompt_mask = torch.ones(2, 3, dtype=torch.long)
    alone = hmm_nll(symbols[:1], prompt_mask[:1], 3, 3)
    assert alone is not None and hmm_nll(symbols, prompt_mask, 3, 3) == alone
    full = hmm.log_likelihood(symbols[:1], torch.ones(1, 6, dtype=torch.long))
    prefix = hmm.log_likelihood(symbols[:1, :3], prompt_mask[:1])
    assert alone == round(-(full - prefix).item() / 3, 4)
    assert hmm_nll(symbols[1:], prompt_mask[1:], 3, 3) is None
