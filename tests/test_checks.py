"""opbench._checks: one wording for one mistake, shared by every entry point."""
from __future__ import annotations

import math

import pytest

from opbench._checks import check_count, check_positive, check_run_times, is_count, is_finite_number


def test_counts_are_ints_not_bools() -> None:
    assert is_count(1) and is_count(0, minimum=0)
    assert not is_count(True) and not is_count(1.0) and not is_count(0)


def test_finite_numbers_exclude_nan_infinity_and_bools() -> None:
    assert is_finite_number(0.5) and is_finite_number(3)
    assert not any(is_finite_number(v) for v in (math.nan, math.inf, -math.inf, False, "1"))


def test_messages_name_the_argument_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"^repeats must be a positive int, got 0$"):
        check_count("repeats", 0)
    with pytest.raises(ValueError, match=r"^number must be an int >= 0, got -1$"):
        check_count("number", -1, minimum=0)
    with pytest.raises(ValueError, match=r"^threshold must be a positive finite number, got nan$"):
        check_positive("threshold", math.nan)


def test_run_times_must_be_ordered() -> None:
    check_run_times(0.1, 0.1)
    with pytest.raises(ValueError, match=r"max_run_time \(0.1\) must be >= min_run_time \(0.2\)"):
        check_run_times(0.2, 0.1)
    with pytest.raises(ValueError, match="min_run_time must be a positive"):
        check_run_times(0, 1)
