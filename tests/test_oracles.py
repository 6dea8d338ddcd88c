"""Oracle models: exact conditionals (spec/models.md M8-M9)."""

import itertools
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from veridec.oracles import EnumeratedJoint, HMMOracle

EXACT = 1e-12  # float64 sums of at most a few hundred terms of size <= 1


@st.composite
def hmm_and_canvas(draw):
    states, symbols, length = draw(st.integers(1, 4)), draw(st.integers(2, 3)), draw(st.integers(1, 5))
    hmm = HMMOracle.random(states, symbols, seed=draw(st.integers(0, 2**16)),
                           concentration=draw(st.sampled_from([0.2, 1.0, 5.0])))
    masked = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    tokens = draw(st.lists(st.integers(0, symbols - 1), min_size=length, max_size=length))
    x = torch.tensor([[hmm.special.mask_id if m else t for m, t in zip(masked, tokens)]])
    return hmm, x


@pytest.mark.parametrize("seed", range(3))
def test_hmm_conditionals_equal_enumeration(run_registered_check, seed):
    """M9: forward-backward conditionals = the enumerated joint's (the check ``veridec verify`` runs)."""
    run_registered_check("oracle/hmm-conditionals", None, None, seed=seed)


@given(hmm_and_canvas())
def test_hmm_conditionals_are_distributions_over_symbols(case):
    hmm, x = case
    got = hmm(x).logits.exp()
    assert (got.sum(-1) - 1).abs().max() < EXACT
    assert (got[..., hmm.special.mask_id] == 0).all()


def test_hmm_log_likelihood_equals_enumeration():
    hmm = HMMOracle.random(3, 3, seed=7)
    joint = hmm.to_enumerated(4)
    x = joint.outcomes[::5]
    assert (hmm.log_likelihood(x) - joint.log_prob(x)).abs().max() < EXACT
    assert abs(joint.flat.sum().item() - 1) < EXACT


def test_hmm_left_padding_starts_the_chain_at_the_first_real_token():
    hmm = HMMOracle.random(3, 4, seed=2)
    m = hmm.special.mask_id
    short = torch.tensor([[1, m, 2, m]])
    padded = torch.tensor([[0, 3, 1, m, 2, m]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    assert torch.allclose(hmm(padded, mask).logits[:, 2:], hmm(short).logits, atol=EXACT)
    full = torch.tensor([[1, 0, 2, 3]])
    assert torch.allclose(hmm.log_likelihood(torch.tensor([[3, 3, 1, 0, 2, 3]]), mask), hmm.log_likelihood(full))


def order_process_distribution(oracle, length):
    """Exact distribution of random-order ancestral decoding: uniform order, each token from its conditional."""
    outcomes = EnumeratedJoint.all_outcomes(oracle.num_symbols, length)  # [N, L]
    total = torch.zeros(len(outcomes), dtype=torch.float64)
    for order in itertools.permutations(range(length)):
        log_p = torch.zeros(len(outcomes), dtype=torch.float64)
        for step, position in enumerate(order):
            canvas = outcomes.clone()
            canvas[:, list(order[step:])] = oracle.special.mask_id  # position and later ones still masked
            probs = oracle(canvas).logits.exp()[torch.arange(len(outcomes)), position]  # [N, V + 1]
            log_p += probs.gather(1, outcomes[:, position: position + 1])[:, 0].log()
        total += log_p.exp() / math.factorial(length)
    return total


@pytest.mark.parametrize("oracle", [EnumeratedJoint.random(3, 3, seed=1), EnumeratedJoint.random(2, 4, seed=2),
                                    HMMOracle.random(2, 3, seed=3)], ids=["joint-3x3", "joint-2x4", "hmm-3x3"])
def test_random_order_ancestral_decoding_reproduces_the_joint(oracle):
    length = getattr(oracle, "length", 3)
    joint = oracle if isinstance(oracle, EnumeratedJoint) else oracle.to_enumerated(length)
    assert (order_process_distribution(oracle, length) - joint.flat).abs().max() < EXACT


def test_hmm_samples_follow_the_joint():
    hmm = HMMOracle.random(2, 3, seed=5, concentration=1.0)
    joint = hmm.to_enumerated(3)
    samples = hmm.sample(20_000, 3, generator=torch.Generator().manual_seed(0))
    index = (samples * torch.tensor([9, 3, 1])).sum(1)
    observed = torch.bincount(index, minlength=27).numpy()
    expected = joint.flat.numpy() * 20_000
    keep = expected > 5  # chi-square needs non-tiny expected counts
    statistic = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    p_value = stats.chi2.sf(statistic, keep.sum() - 1)
    assert p_value > 1e-3, (statistic, p_value)


def test_oracle_validation():
    with pytest.raises(ValueError, match="rows summing to 1"):
        HMMOracle([0.5, 0.4], [[1, 0], [0, 1]], [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="shapes disagree"):
        HMMOracle([1.0], [[1.0]], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"shape \[V\] \* L"):
        EnumeratedJoint(torch.ones(2, 3) / 6)
    zero = torch.zeros(2, 2, dtype=torch.float64)
    zero[0, 0] = 1
    with pytest.raises(ValueError, match="probability 0"):
        EnumeratedJoint(zero)(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="canvas length 3 exceeds the model.s max_length 2"):
        EnumeratedJoint(zero)(torch.tensor([[0, 2, 2]]))
    with pytest.raises(ValueError, match="canvas length must be 2"):
        EnumeratedJoint(zero)(torch.tensor([[0]]))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 2\]"):
        EnumeratedJoint(zero)(torch.tensor([[0, 3]]))
    with pytest.raises(ValueError, match="full sequence"):
        HMMOracle.random(2, 2).log_likelihood(torch.tensor([[0, 2]]))


@pytest.mark.parametrize("x, message", [
    (torch.tensor([[0, 5]]), r"symbol ids must lie in \[0, 2\), got 5"),
    (torch.tensor([[-1, 0]]), r"symbol ids must lie in \[0, 2\), got -1"),
    (torch.tensor([[0.0, 1.0]]), "must be a LongTensor"),
    ([[0, 1]], "must be a LongTensor .B, L., got list"),
])
def test_exact_likelihoods_refuse_ids_outside_the_symbols(x, message):
    """An id outside the oracle's symbols has no probability to report: refused, never clamped into range."""
    with pytest.raises(ValueError, match=message):
        HMMOracle.random(2, 2).log_likelihood(x)
    with pytest.raises(ValueError, match=message):
        HMMOracle.random(2, 2).to_enumerated(2).log_prob(x)


def test_a_padded_position_may_hold_any_id():
    hmm = HMMOracle.random(2, 2)
    padded = hmm.log_likelihood(torch.tensor([[9, 1]]), attention_mask=torch.tensor([[0, 1]]))
    assert torch.allclose(padded, hmm.log_likelihood(torch.tensor([[0, 1]]), attention_mask=torch.tensor([[0, 1]])))
    with pytest.raises(ValueError, match="sequence length must be 2"):
        hmm.to_enumerated(2).log_prob(torch.tensor([[0]]))
