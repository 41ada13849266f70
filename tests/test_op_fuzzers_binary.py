"""opbench.fuzz.op_fuzzers.binary: ``x`` and a ``y`` that sometimes broadcasts."""
from __future__ import annotations

import pytest

from op_fuzzer_shapes import shape_only, takes  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")
from opbench.fuzz.op_fuzzers.binary import BinaryOpFuzzer  # noqa: E402


def test_y_broadcasts_against_x_and_sometimes_is_smaller(shape_only) -> None:  # noqa: F811
    broadcasts = 0
    for tensors, _, _ in takes(BinaryOpFuzzer, dtype=torch.complex64):
        x, y = tensors["x"], tensors["y"]
        assert x.dim() == y.dim() and x.dtype == y.dtype == torch.complex64
        assert torch.broadcast_shapes(x.shape, y.shape) == x.shape
        broadcasts += y.shape != x.shape
    assert broadcasts > 0
