"""Fuzzed sparse COO tensors, draw-for-draw identical to torch's ``FuzzedSparseTensor``.

Example::

    from opbench.fuzz.fuzzer import Fuzzer, FuzzedParameter
    from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor
    fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("n", minval=16, maxval=256, distribution="loguniform"),
            FuzzedParameter("density", distribution={0.1: 0.5, 0.01: 0.5}),
            FuzzedParameter("coalesced", distribution={True: 0.5, False: 0.5}),
        ],
        tensors=[FuzzedSparseTensor("x", size=("n", "n"), density="density",
                                    coalesced="coalesced")],
        seed=0,
    )
    tensors, properties, params = next(iter(fuzzer.take(1)))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Number
from typing import Any

from opbench.fuzz import _deps
from opbench.fuzz.fuzzer import FuzzedTensor

__all__ = ["FuzzedSparseTensor"]


class FuzzedSparseTensor(FuzzedTensor):
    """A sparse COO tensor with fuzzed shape, sparse dimensions, density and coalescing.

    ``density``, ``coalesced`` and ``sparse_dim`` name parameters. ``nnz`` is
    ``ceil(sum(size) * density)`` (torch's formula: a *sum* of the sizes, not the element count).
    Uncoalesced tensors repeat every index once, with fresh values. ``nnz`` is accepted for
    signature compatibility and, as in torch, unused. When ``density``/``coalesced`` are not
    given, the parameters literally named ``"density"``/``"coalesced"`` are used (torch always
    reads those names). Sparse tensors consume no layout draws (no permutation or steps).
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        min_elements: int | None = None,
        max_elements: int | None = None,
        dim_parameter: str | None = None,
        sparse_dim: str | None = None,
        nnz: str | None = None,
        density: str | None = None,
        coalesced: str | None = None,
        dtype: Any = None,
        cuda: bool = False,
    ) -> None:
        super().__init__(name=name, size=size, min_elements=min_elements,
                         max_elements=max_elements, dim_parameter=dim_parameter, dtype=dtype,
                         cuda=cuda)
        self._density = density or "density"
        self._coalesced = coalesced or "coalesced"
        self._sparse_dim = sparse_dim

    def _parameter_names(self) -> list[str]:
        names = [*super()._parameter_names(), self._density, self._coalesced]
        return names + ([self._sparse_dim] if self._sparse_dim is not None else [])

    @staticmethod
    def sparse_tensor_constructor(size: Sequence[int] | int, dtype: Any, sparse_dim: int,
                                  nnz: int, is_coalesced: bool) -> Any:
        """A COO tensor with ``nnz`` random indices in the first ``sparse_dim`` dimensions.

        The draw order (values, then indices, then duplicate values) is torch's, so the same
        generator state gives the same tensor.
        """
        torch = _deps.torch
        dims: Sequence[int] = (
            [size] * sparse_dim if isinstance(size, Number) else size)  # type: ignore[list-item,assignment]
        if nnz != 0 and all(dims[d] <= 0 for d in range(sparse_dim)):
            raise ValueError(
                f"cannot place nnz={nnz} elements in sparse dimensions of size {dims[:sparse_dim]}")
        values_size = [nnz, *dims[sparse_dim:]]
        if dtype.is_floating_point or dtype.is_complex:
            values = torch.rand(size=values_size, dtype=dtype, device="cpu")
        else:
            values = torch.randint(1, 127, size=values_size, dtype=dtype, device="cpu")

        indices = torch.rand(sparse_dim, nnz, device="cpu")
        indices.mul_(torch.tensor(dims[:sparse_dim]).unsqueeze(1).to(indices))
        indices = indices.to(torch.long)

        if not is_coalesced:
            # Same coordinates twice: nnz is unchanged once coalesced, only the format differs.
            # torch draws the duplicates with randn_like, which fails for integer dtypes; those
            # get randint values like the originals instead.
            if dtype.is_floating_point or dtype.is_complex:
                duplicates = torch.randn_like(values)
            else:
                duplicates = torch.randint_like(values, 1, 127)
            values = torch.cat([values, duplicates], 0)
            indices = torch.cat([indices, indices], 1)

        tensor = torch.sparse_coo_tensor(indices, values, torch.Size(size))
        return tensor.coalesce() if is_coalesced else tensor

    def _make_tensor(self, params: dict[str, Any], state: Any) -> tuple[Any, dict[str, Any]]:
        size, _, _ = self._get_size_and_steps(params)
        density = params[self._density]
        nnz = math.ceil(sum(size) * density)
        if nnz > sum(size):
            raise ValueError(f"{self._name}: density {density} gives nnz={nnz} > sum(size)")
        is_coalesced = params[self._coalesced]
        sparse_dim = len(size) if self._sparse_dim is None else params[self._sparse_dim]
        sparse_dim = min(sparse_dim, len(size))
        tensor = self.sparse_tensor_constructor(size, self._dtype, sparse_dim, nnz, is_coalesced)
        if self._cuda:
            tensor = tensor.cuda()

        properties = {
            "numel": int(tensor.numel()),
            "shape": tensor.size(),
            "is_coalesced": tensor.is_coalesced(),
            "density": density,
            "sparsity": 1.0 - density,
            "sparse_dim": tensor.sparse_dim(),
            "dense_dim": tensor.dense_dim(),
            "is_hybrid": len(size[tensor.sparse_dim():]) > 0,
            "dtype": str(self._dtype),
        }
        return tensor, properties
