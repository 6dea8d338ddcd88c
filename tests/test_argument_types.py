"""harness.arguments' types at their edges (spec/exactness.md EC2: bad input exits 2 with the flag named): the seed's
range, finite numbers only, probabilities strictly inside (0, 1), a CUDA index that exists."""

import argparse
from unittest import mock

import pytest

from harness.arguments import SEED_LIMIT, UsageError, check_device, number, probability, seed


def test_the_seed_lies_in_0_to_2_to_the_63():
    assert seed(str(SEED_LIMIT - 1)) == SEED_LIMIT - 1
    with pytest.raises(argparse.ArgumentTypeError, match="must lie in"):
        seed(str(SEED_LIMIT))


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_numbers_are_finite(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number"):
        number(0.0)(text)
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number"):
        number(-1e9, 1e9)(text)


def test_a_probability_lies_strictly_between_0_and_1():
    assert probability("0.5") == 0.5
    for text in ("0", "1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a number in \(0, 1\)"):
            probability(text)


def test_a_cuda_index_must_exist():
    with mock.patch("torch.cuda.is_available", return_value=True), mock.patch("torch.cuda.device_count",
                                                                              return_value=2):
        assert str(check_device("cuda:1")) == "cuda:1"
        with pytest.raises(UsageError, match="no such CUDA device"):
            check_device("cuda:2")
