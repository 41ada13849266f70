"""Shared test helpers: a deterministic mock timer and paired torch/opbench objects."""
from __future__ import annotations

import random
import re
import zlib

import pytest


class MockTimer:
    """A deterministic stand-in for timeit.Timer, injected through `_timer_cls`.

    Each statement has a cost per run (COSTS), a fixed per-call overhead and
    seeded noise; two instances built from the same statement return the same
    sequence of times, so torch and opbench see identical clocks.
    """

    COSTS = {
        "pass": 1.5e-9,  # above 1 ns: below it torch 2.13 prints seconds
        "ns_stmt": 5e-9,
        "us_stmt": 3.2e-6,
        "ms_stmt": 1.7e-3,
        "x = 1\ny = x + 1": 45e-9,
    }
    OVERHEAD = 60e-9
    NOISE = 0.05

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self._cost = self.COSTS.get(stmt, 2e-6)
        self._rng = random.Random(zlib.crc32(f"{stmt}|{setup}".encode()))

    def timeit(self, number):
        noise = 1 + self.NOISE * (self._rng.random() - 0.5) * 2
        spike = 3.0 if self._rng.random() < 0.03 else 1.0  # occasional outlier
        return (self.OVERHEAD + self._cost * number * spike) * noise


def strip_object_line(text: str) -> str:
    """Drops the `<module.Measurement object at 0x...>` line, which names the class path."""
    return re.sub(r"^<[\w.]+ object at 0x[0-9a-f]+>\n", "", text)


@pytest.fixture
def torch_benchmark():
    return pytest.importorskip("torch.utils.benchmark")
