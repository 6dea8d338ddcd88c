"""testing.hooks (spec/exactness.md EC5): a hook description made live does what it says on every row, only at its
step, and logs each call."""

import pytest
import torch

from testing.hooks import LOGITS_HOOK, TOKENS_HOOK, DreamHook, live_hooks


def test_the_tokens_hook_writes_every_row_at_its_step_only():
    log = []
    hook = DreamHook(TOKENS_HOOK, {"step": 2, "position": -1, "token": 9}, log)
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert torch.equal(hook(1, x, torch.zeros(2, 3, 10)), x)
    written = hook(2, x, torch.zeros(2, 3, 10))
    assert written.tolist() == [[1, 2, 9], [4, 5, 9]] and x.tolist() == [[1, 2, 3], [4, 5, 6]]  # a copy
    assert log == [(TOKENS_HOOK, 1, False), (TOKENS_HOOK, 2, False)]


def test_the_logits_hook_biases_one_token_from_its_step_on():
    settings, log = live_hooks({LOGITS_HOOK: {"from_step": 1, "token": 2, "bias": 5.0}, "steps": 3})
    hook = settings[LOGITS_HOOK]
    logits = torch.zeros(2, 3, 4)
    assert torch.equal(hook(0, None, logits), logits)
    biased = hook(1, None, logits)
    assert (biased[..., 2] == 5.0).all() and (biased[..., [0, 1, 3]] == 0).all() and (logits == 0).all()
    assert settings["steps"] == 3 and log == [(LOGITS_HOOK, 0, False), (LOGITS_HOOK, 1, False)]
    with pytest.raises(ValueError, match="hook name must be one of"):
        DreamHook("generation_hook", {})
