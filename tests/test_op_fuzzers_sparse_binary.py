"""opbench.fuzz.op_fuzzers.sparse_binary: sparse ``x`` and ``y`` of one shape, one layout."""
from __future__ import annotations

import pytest

from op_fuzzer_shapes import shape_only, takes  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")
from opbench.fuzz.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer  # noqa: E402


def test_x_and_y_share_shape_sparse_dims_and_coalescing(shape_only) -> None:  # noqa: F811
    for tensors, properties, _ in takes(BinaryOpSparseFuzzer):
        x, y = tensors["x"], tensors["y"]
        assert x.is_sparse and y.is_sparse and x.shape == y.shape
        assert 1 <= x.sparse_dim() == y.sparse_dim() <= x.dim()
        assert properties["x"]["is_coalesced"] == properties["y"]["is_coalesced"]
