"""GO1/GO2 measurements (spec/guidance.md GO1-GO2) on tiny models and an exact oracle."""

import itertools
import math

import torch

from veridec.guidance import GuidanceParams, LinearReward
from veridec.models import random_model
from veridec.models.tiny import never_predicts_mask
from veridec.oracles import EnumeratedJoint
from veridec.proofs_checks.observations import BINS, guidance_reuse_tv, incompatible_pairs, pair_pmi


def test_guidance_reuse_tv_reports_every_age_and_bin():
    model = never_predicts_mask(random_model("llada", 0, dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    reward = LinearReward(torch.randn(model.vocab_size, 4, generator=g, dtype=torch.float64),
                          torch.randn(4, generator=g, dtype=torch.float64))
    report = guidance_reuse_tv(model, reward, torch.tensor([[5, 6, 7]]), gen_length=10, ages=(1, 3),
                               params=GuidanceParams(steps=1))
    assert set(report) == {1, 3} and all(len(r["mean_tv"]) == len(BINS) - 1 for r in report.values())
    assert sum(report[1]["count"]) == sum(range(1, 10)) and sum(report[3]["count"]) == sum(range(1, 8))
    assert all(0 <= tv <= 1 for r in report.values() for tv in r["mean_tv"])


def test_pmi_is_the_exact_pointwise_mutual_information_on_an_oracle():
    """With an enumerated joint as the 'dLLM', PMI = log p(x_a, x_b) - log p(x_a) - log p(x_b) exactly."""
    oracle = EnumeratedJoint.random(3, 3, seed=4, concentration=0.3)
    canvas = torch.full((1, 3), oracle.special.mask_id)
    logits = oracle(canvas).logits[0]
    pmi = pair_pmi(oracle, canvas, logits, logits, torch.ones(3, dtype=torch.bool), 0, oracle.special.mask_id)
    probs = logits.exp()
    conf = probs[:, :3].max(-1).values
    a, b = torch.sort(conf, descending=True, stable=True).indices[:2].tolist()
    xa, xb = int(probs[a].argmax()), int(probs[b].argmax())
    joint = sum(oracle.joint[s].item() for s in itertools.product(range(3), repeat=3) if s[a] == xa and s[b] == xb)
    assert math.isclose(pmi, math.log(joint) - math.log(probs[a, xa]) - math.log(probs[b, xb]), abs_tol=1e-9)


def test_incompatible_pairs_counts_both_settings():
    model = never_predicts_mask(random_model("dream", 1, dtype=torch.float64))
    g = torch.Generator().manual_seed(1)
    reward = LinearReward(torch.randn(model.vocab_size, 4, generator=g, dtype=torch.float64),
                          torch.randn(4, generator=g, dtype=torch.float64))
    report = incompatible_pairs(model, reward, torch.tensor([[5, 6]]), gen_length=8, states=5,
                                params=GuidanceParams(steps=1))
    assert len(report["unguided"]["pmi"]) == len(report["guided"]["pmi"]) == 5
    assert report["guided"]["incompatible"] == sum(p < -1 for p in report["guided"]["pmi"])
