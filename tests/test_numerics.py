"""veridec.numerics: tolerances from measured rounding, on values worked by hand (flash-attention's rule: twice
the sum of both sides' measured errors, plus one float32 ulp at the output's scale)."""

import pytest
import torch

from veridec.numerics import assert_within_rounding, max_abs, tolerance, ulp32


def test_max_abs_sees_an_error_of_either_sign():
    assert max_abs(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0])) == 0.5  # actual below expected
    assert max_abs(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.25])) == 0.75


def test_tolerance_is_twice_both_errors_plus_an_ulp():
    low, high = torch.tensor([1.0, -4.0]), torch.tensor([1.0, -4.001], dtype=torch.float64)
    assert ulp32(high) == torch.finfo(torch.float32).eps * 4.001
    assert tolerance(low, high) == pytest.approx(2.0 * 2 * 0.001 + torch.finfo(torch.float32).eps * 4.001, rel=1e-9)


def test_a_difference_beyond_the_measured_rounding_fails():
    expected, expected64 = torch.tensor([1.0]), torch.tensor([1.0 + 1e-7], dtype=torch.float64)
    assert_within_rounding(torch.tensor([1.0 + 5e-7]), expected, expected64, "within")
    with pytest.raises(AssertionError, match="exceeds the measured tolerance"):
        assert_within_rounding(torch.tensor([1.0 - 1e-5]), expected, expected64, "beyond, below")
