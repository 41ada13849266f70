"""Argument checks shared by every public entry point: one wording for one mistake."""
from __future__ import annotations

import math


def check_positive(name: str, value: float) -> None:
    """Raises ValueError unless ``value`` is a finite number > 0."""
    if isinstance(value, bool) or not (
        isinstance(value, (int, float)) and value > 0 and math.isfinite(value)
    ):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def check_count(name: str, value: int) -> None:
    """Raises ValueError unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_run_times(min_run_time: float, max_run_time: float) -> None:
    """Both positive and finite, and the maximum not below the minimum."""
    check_positive("min_run_time", min_run_time)
    check_positive("max_run_time", max_run_time)
    if max_run_time < min_run_time:
        raise ValueError(f"max_run_time ({max_run_time}) must be >= min_run_time ({min_run_time})")
