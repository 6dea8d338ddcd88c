"""Why the two sides differ (spec/exactness.md EC11): a failing report shows each side's decision at the first
divergence and names a documented alternative reading that the candidate follows, never one it does not."""

import sys
from pathlib import Path

import pytest
import torch

from veridec.oracles.base import Oracle
from veridec.testing import check_decoder, load_candidate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DUAL = dict(against="fastdllm", cache="dual", model="tiny-llada", max_examples=40, knobs=False)


@pytest.fixture(autouse=True)
def examples_importable():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


def _explained(spec, **options):
    result = check_decoder(load_candidate(f"{EXAMPLES / spec}"), **options)
    assert not result.passed and result.failure is not None
    return result, result.failure.explanation


def test_a_strict_threshold_is_named_as_the_reading_it_is():
    """FD2: the candidate commits c > threshold where the official rule commits c >= threshold; the report shows
    the target's commits with their confidences, the candidate's, and names the strict reading."""
    result, lines = _explained("fastdllm_dual_broken.py:strict_threshold", **DUAL)
    step = result.failure.divergence.step
    assert lines[0].startswith(f"target at step {step}, row 0: committed") and "confidence" in lines[0]
    assert lines[1].startswith(f"candidate at step {step}, row 0: committed")
    assert any("follows a strict threshold" in line and "(FD2)" in line for line in lines)
    assert "## Why they differ" in result.markdown() and result.to_dict()["failure"]["explanation"] == lines


def test_a_bug_that_is_no_documented_reading_is_not_given_one():
    """The negative control: committing one token past the rule matches neither tie order nor a strict
    threshold, so no reading is named (the decision lines are still there)."""
    _, lines = _explained("fastdllm_dual_broken.py:one_too_many", **DUAL)
    assert lines and not any("follows" in line for line in lines)


class SameEverywhere(Oracle):
    """Every masked position has the same conditional: their confidences tie exactly (SQ0.4 decides)."""

    def conditional_marginals(self, x, attention_mask):
        law = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
        return law.expand(*x.shape, 3).clone()  # [B, L, V]


@torch.no_grad()
def topk_one_per_step(model, prompt, gen_length=128, mask_id=126336):
    """One token per step at the most confident mask, the position chosen by torch.topk (its order on ties)."""
    x = torch.cat([prompt, torch.full((prompt.shape[0], gen_length), mask_id)], dim=1)
    rows = torch.arange(x.shape[0])
    for _ in range(gen_length):
        confidence, token = model(x).logits.softmax(dim=-1).max(dim=-1)  # [B, L] each
        position = confidence.masked_fill(x != mask_id, -1.0).topk(1, dim=1).indices[:, 0]  # [B]
        x[rows, position] = token[rows, position]
    return x


def test_the_other_tie_order_is_named():
    """SQ0.4: positions whose confidences tie exactly; a decoder that picks among them as torch.topk does fails
    against the lowest-index rule, and the report says which order it follows."""
    case = {"prompt": [[0]], "attention_mask": None, "seed": 0,
            "settings": {"gen_length": 4, "block_length": 4, "steps": 4, "temperature": 0.0}}
    model = SameEverywhere(3, 8)
    result = check_decoder(topk_one_per_step, "llada", model=model, case=case)
    assert not result.passed
    lines = result.failure.explanation
    assert any("follows torch.topk's order among equal scores (--ties torch)" in line for line in lines)
    assert check_decoder(topk_one_per_step, "llada", model=model, case=case, ties="torch").passed


def test_the_published_entropy_score_is_named_with_both_sides_scores():
    """BD6.4 vs BD7.2: a from-scratch SDAR sampler whose entropy_bounded follows the published score (repaired)
    fails against BD6.4; the report gives the masked positions' entropies the target ranked, the published score
    the candidate used, and names the reading; remasking_strategy is not reported as a knob without effect (the
    strategy moves the candidate on other cases: one shrunk case where two strategies agree is no verdict)."""
    result, lines = _explained("sdar_sampler_variants.py:published_entropy_score", against="sdar", model="tiny-sdar",
                               max_batch=1, padding=False, max_examples=10)
    assert result.failure.case["settings"]["remasking_strategy"] == "entropy_bounded"
    assert any(line.startswith("BD6.4, the target's rule: the masked positions' entropies") for line in lines)
    assert any(line.startswith("BD7.2, the published score: E = ") for line in lines)
    assert any("follows the published entropy score" in line and "(BD7.2)" in line for line in lines)
    assert result.knobs["remasking_strategy"] == "effective" and not result.knob_failures


def test_each_sides_line_lists_its_own_commits_at_the_divergence():
    """Each decision line reads its own side: at the first divergence of the tie case, the target's line names
    the lowest masked position (SQ0.4) and the candidate's the position torch.topk took, found here by replaying
    the candidate's own first steps on the canvas (the two lines differ where the sides differ)."""
    case = {"prompt": [[0]], "attention_mask": None, "seed": 0,
            "settings": {"gen_length": 4, "block_length": 4, "steps": 4, "temperature": 0.0}}
    model = SameEverywhere(3, 8)
    result = check_decoder(topk_one_per_step, "llada", model=model, case=case)
    step, lines = result.failure.divergence.step, result.failure.explanation
    canvas = torch.tensor([[0, 8, 8, 8, 8]])
    for _ in range(step + 1):  # the candidate's commits up to the divergent step, by its own rule
        confidence = torch.full((1, 5), 0.5).masked_fill(canvas != 8, -1.0)  # [1, L]
        taken = int(confidence.topk(1, dim=1).indices[0, 0])
        lowest = int((canvas[0] == 8).nonzero()[0, 0])
        canvas[0, taken] = 0
    assert taken != lowest  # the tie order is what makes the sides differ at this step
    assert lines[0].startswith(f"target at step {step}, row 0: committed {lowest} (token 0,")
    assert lines[1] == f"candidate at step {step}, row 0: committed {taken} (token 0)"
