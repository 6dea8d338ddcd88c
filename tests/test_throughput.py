"""veridec.throughput: one speed definition for every report (issue 26), on canvases counted by hand: generated
tokens up to and including each row's first EOS, the prompt excluded, masks left not counted, summed over rows."""

import pytest
import torch

from veridec.throughput import generated_tokens, throughput

EOS, MASK = 9, 8


@pytest.mark.parametrize("generated, expected", [
    ([5, EOS, 7, 7], 2),  # up to and including the first EOS
    ([EOS, EOS, 7, 7], 1),  # an EOS at once: one token
    ([5, 6, 7, 7], 4),  # no EOS: the whole generation
    ([5, MASK, EOS, 7], 2),  # a mask left before the EOS is not a token
    ([5, 6, 7, EOS], 4),  # the EOS is the last position
])
def test_one_row(generated, expected):
    canvas = torch.tensor([[1, 2, *generated]])  # prompt of 2
    assert generated_tokens(canvas, 2, EOS, MASK) == expected


def test_rows_are_summed_and_the_prompt_is_never_counted():
    canvas = torch.tensor([[EOS, 2, 5, EOS, 7],  # an EOS in the prompt is not the first generated EOS
                           [1, 2, 5, 6, 7]])
    assert generated_tokens(canvas, 2, EOS, MASK) == 2 + 3


def test_without_an_eos_id_or_a_mask_id():
    canvas = torch.tensor([[1, 5, EOS, MASK]])
    assert generated_tokens(canvas, 1, None, MASK) == 2  # no EOS known: every unmasked generated token
    assert generated_tokens(canvas, 1, EOS) == 2  # masks past the EOS are not counted anyway
    assert generated_tokens(torch.tensor([[1, 5, MASK, EOS]]), 1, EOS) == 3  # no mask id: a mask is a token


def test_the_report_carries_what_the_speed_depends_on():
    canvas = torch.tensor([[1, 5, MASK, EOS, 7], [1, 5, 6, 7, 7]])
    speed = throughput(canvas, 1, 2.0, model_calls=6, eos_id=EOS, mask_id=MASK, dtype=torch.bfloat16)
    assert speed.tokens == 2 + 4 and speed.tokens_per_second == 3.0
    assert speed.to_dict() == {"tokens_per_second": 3.0, "tokens": 6, "seconds": 2.0, "model_calls": 6,
                               "device": speed.device, "dtype": "bfloat16", "batch": 2}
    assert speed.device.startswith("cpu") and "batch 2" in speed.summary() and "6 model calls" in speed.summary()
