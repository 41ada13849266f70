"""Takes of torch's ready-made fuzzers with shape-only tensors (meta tensors, empty sparse
ones): their documented shapes and layouts checked over many seeds in milliseconds, for
tests/test_op_fuzzers_*.py (values against torch are in tests/test_op_fuzzers.py)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def _meta_tensor(size: Any, dtype: Any, **params: Any) -> Any:
    import torch

    return torch.empty(size, dtype=dtype, device="meta")


def _empty_sparse(size: Any, dtype: Any, sparse_dim: int, nnz: int, is_coalesced: bool) -> Any:
    import torch

    indices = torch.zeros(sparse_dim, 0, dtype=torch.long)
    tensor = torch.sparse_coo_tensor(indices, torch.zeros([0, *size[sparse_dim:]], dtype=dtype), size)
    return tensor.coalesce() if is_coalesced else tensor


@pytest.fixture
def shape_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from opbench.fuzz.fuzzer import FuzzedTensor
    from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor

    monkeypatch.setattr(FuzzedTensor, "default_tensor_constructor", staticmethod(_meta_tensor))
    monkeypatch.setattr(FuzzedSparseTensor, "sparse_tensor_constructor", staticmethod(_empty_sparse))


def takes(fuzzer_cls: type, seeds: int = 10, n: int = 5, **kwargs: Any) -> Iterator[tuple[dict, dict, dict]]:
    """Every (tensors, properties, params) of ``n`` takes for each of ``seeds`` seeds."""
    for seed in range(seeds):
        yield from fuzzer_cls(seed=seed, **kwargs).take(n)
