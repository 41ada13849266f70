"""opbench.fuzz.sparse_fuzzer: FuzzedSparseTensor (torch's nnz formula, uncoalesced repeats)."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from opbench.fuzz.fuzzer import FuzzedParameter, Fuzzer  # noqa: E402
from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor  # noqa: E402


def _take(coalesced: bool) -> tuple[dict, dict]:
    fuzzer = Fuzzer(
        parameters=[FuzzedParameter("k0", distribution={16: 1.0}),
                    FuzzedParameter("k1", distribution={8: 1.0}),
                    FuzzedParameter("density", distribution={0.25: 1.0}),
                    FuzzedParameter("coalesced", distribution={coalesced: 1.0}),
                    FuzzedParameter("sparse_dim", distribution={2: 1.0})],
        tensors=[FuzzedSparseTensor("x", size=("k0", "k1"), sparse_dim="sparse_dim")],
        seed=0)
    tensors, properties, _ = next(iter(fuzzer.take(1)))
    return tensors, properties


def test_nnz_is_the_sum_of_sizes_times_density_as_torch() -> None:
    tensors, properties = _take(coalesced=True)
    x = tensors["x"]
    assert x.shape == (16, 8) and x.is_coalesced() and properties["x"]["is_coalesced"]
    assert x._nnz() <= math.ceil((16 + 8) * 0.25)  # coalescing merges any repeated index


def test_uncoalesced_tensors_repeat_every_index() -> None:
    tensors, properties = _take(coalesced=False)
    x = tensors["x"]
    assert not x.is_coalesced() and not properties["x"]["is_coalesced"]
    assert x._nnz() == 2 * math.ceil((16 + 8) * 0.25)
    assert x.coalesce()._nnz() <= x._nnz() // 2
