"""opbench.fuzz.op_fuzzers.sparse_unary: one sparse ``x``, 1-3 dimensions, density 1-10%."""
from __future__ import annotations

import pytest

from op_fuzzer_shapes import shape_only, takes  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")
from opbench.fuzz.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer  # noqa: E402


def test_x_is_sparse_with_a_listed_density(shape_only) -> None:  # noqa: F811
    both = set()
    for tensors, _, params in takes(UnaryOpSparseFuzzer, dtype=torch.float64):
        x = tensors["x"]
        assert x.is_sparse and x.dtype == torch.float64 and 1 <= x.dim() <= 3
        assert 1 <= x.sparse_dim() <= x.dim()
        assert params["density"] in (0.1, 0.05, 0.01)
        both.add(params["coalesced"])
    assert both == {True, False}
