"""opbench.fuzz.op_fuzzers.unary: one strided ``x`` of 4 Ki to 32 Mi elements."""
from __future__ import annotations

import pytest

from op_fuzzer_shapes import shape_only, takes  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")
from opbench.fuzz.op_fuzzers.unary import UnaryOpFuzzer  # noqa: E402


def test_x_is_1_to_3_d_within_the_element_limits(shape_only) -> None:  # noqa: F811
    seen_strided = False
    for tensors, properties, _ in takes(UnaryOpFuzzer, dtype=torch.int8):
        x = tensors["x"]
        assert list(tensors) == ["x"] and x.dtype == torch.int8
        assert 1 <= x.dim() <= 3 and 4 * 1024 <= x.numel() <= 32 * 1024 ** 2
        seen_strided |= not properties["x"]["is_contiguous"]
    assert seen_strided  # a quarter of the operands are strided
