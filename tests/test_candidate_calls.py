"""testing.candidates' calling of a foreign decoder, on stand-ins (spec/exactness.md EC2): the inputs it was given
must come back unchanged, what it returns must be integer token ids [B, L] inside the vocabulary."""

import pytest
import torch

from testing.candidates import CandidateError, Fit, call_candidate, checked_tokens, split_output

FIT = Fit(frozenset({"gen_length"}), {"gen_length": 4}, False)


def _call(candidate, attention_mask=None):
    prompt = torch.tensor([[1, 2, 3]])
    return call_candidate(candidate, FIT, object(), prompt, attention_mask, {"gen_length": 2}, "mask_id", 7)


def test_a_candidate_that_writes_into_its_prompt_or_mask_fails():
    def writes_prompt(model, prompt, gen_length):
        prompt[0, 0] = 5
        return prompt

    def writes_mask(model, prompt, gen_length, attention_mask=None):
        attention_mask[0, 0] = 0
        return prompt

    with pytest.raises(CandidateError, match="changed the prompt or attention mask"):
        _call(writes_prompt)
    with pytest.raises(CandidateError, match="changed the prompt or attention mask"):
        _call(writes_mask, attention_mask=torch.ones(1, 3, dtype=torch.long))
    tokens, nfe = _call(lambda model, prompt, gen_length: (prompt.clone(), 3))
    assert tokens.tolist() == [[1, 2, 3]] and nfe == 3


@pytest.mark.parametrize("output, message", [
    (torch.tensor([[True, False]]), "integer token ids"),
    (torch.tensor([[1.0, 2.0]]), "integer token ids"),
    (torch.tensor([1, 2]), r"tokens \[B, L\]"),
])
def test_what_is_not_integer_tokens_b_by_l_is_refused(output, message):
    with pytest.raises(CandidateError, match=message):
        split_output(output)


def test_token_ids_must_lie_inside_the_vocabulary():
    assert checked_tokens(torch.tensor([[0, 9]]), 10, "cpu").tolist() == [[0, 9]]
    with pytest.raises(CandidateError, match=r"token id 10 at row 0, position 1, outside the vocabulary \[0, 10\)"):
        checked_tokens(torch.tensor([[0, 10]]), 10, "cpu")
    with pytest.raises(CandidateError, match="token id -1 at row 1, position 0"):
        checked_tokens(torch.tensor([[0, 1], [-1, 2]]), 10, "cpu")


def test_an_output_is_the_whole_canvas_or_the_generation_alone():
    from testing.running import full_canvas

    canvas = torch.tensor([[1, 2, 5, 6, 7]])  # prompt 2, generation 3
    assert full_canvas(torch.tensor([[1, 2, 4, 4, 4]]), canvas, 2).tolist() == [[1, 2, 4, 4, 4]]
    assert full_canvas(torch.tensor([[4, 4, 4]]), canvas, 2).tolist() == [[1, 2, 4, 4, 4]]
    assert full_canvas(torch.tensor([[4, 4]]), canvas, 2) is None  # cut (at an EOS, say): positions unknown
    assert full_canvas(torch.tensor([[4, 4, 4], [4, 4, 4]]), canvas, 2) is None  # another batch

