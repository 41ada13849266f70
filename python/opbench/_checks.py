"""Argument checks shared by every public entry point: one wording for one mistake.

Example:
    >>> is_count(3), is_count(True), is_count(0, minimum=0), is_finite_number(float("nan"))
    (True, False, True, False)
"""
from __future__ import annotations

import math
from typing import Any


def is_count(value: Any, minimum: int = 1) -> bool:
    """An int (not a bool) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def is_finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is neither nan nor infinite (nor an int too large
    to be a float)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past 1.8e308: what a damaged file can hold
        return False


def check_count(name: str, value: Any, minimum: int = 1) -> None:
    """Raises ValueError unless ``value`` is an int >= ``minimum`` (1: "a positive int")."""
    if not is_count(value, minimum):
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def check_positive(name: str, value: float) -> None:
    """Raises ValueError unless ``value`` is a finite number > 0."""
    if not (is_finite_number(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def check_run_times(min_run_time: float, max_run_time: float) -> None:
    """Both positive and finite, and the maximum not below the minimum."""
    check_positive("min_run_time", min_run_time)
    check_positive("max_run_time", max_run_time)
    if max_run_time < min_run_time:
        raise ValueError(f"max_run_time ({max_run_time}) must be >= min_run_time ({min_run_time})")
