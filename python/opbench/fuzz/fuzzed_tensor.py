"""``FuzzedTensor``: a benchmark input whose shape, strides and layout come from fuzzed
parameters, built draw for draw as ``torch.utils.benchmark``'s is (``opbench.fuzz.fuzzer``
draws the parameters and calls it).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from opbench.errors import FuzzerSpecError
from opbench.fuzz import _deps

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy
    import torch as _torch_t

__all__ = ["FuzzedTensor"]


def _dtype_size(dtype: _torch_t.dtype) -> int:
    """Bytes per element as torch's fuzzer counts them for ``max_allocation_bytes``.

    Kept identical to torch (which counts a complex element as the size of its real part) because
    the constraint decides which candidates are accepted, and so every later draw.
    """
    if dtype == _deps.torch.bool:
        return 1
    if dtype.is_floating_point or dtype.is_complex:
        return _deps.torch.finfo(dtype).bits // 8
    return _deps.torch.iinfo(dtype).bits // 8


def _prod(values: Sequence[int], base: int = 1) -> int:
    # Python ints: np.prod silently overflows int64, and a negative product would pass the
    # size limits and then fail (or OOM) at allocation.
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


def _resolve(spec: Sequence[Any], params: dict[str, Any], dim: int) -> tuple[Any, ...]:
    """Replace parameter names by their values, then truncate or pad with 1 to ``dim`` entries."""
    values = tuple(params.get(v, v) for v in spec[:dim])
    return values + (1,) * (dim - len(values))


class FuzzedTensor:
    """A tensor whose shape, strides and memory layout come from fuzzed parameters.

    ``size`` and ``steps`` entries are ints or parameter names. With ``steps`` a larger tensor
    is allocated and sliced (``t[::step]``) to get strided memory. With probability
    ``1 - probability_contiguous`` the dimensions are stored in a random order. Candidates
    whose element count or pre-slicing allocation break ``min_elements``/``max_elements``/
    ``max_allocation_bytes`` are resampled. ``dim_parameter`` names a parameter that truncates
    (or pads with 1) ``size`` and ``steps``. ``tensor_constructor(size=..., dtype=..., **params)``
    replaces the default ``torch.rand``/``torch.randint(1, 127)``. ``roll_parameter`` is
    accepted for signature compatibility and, as in torch, unused.

    Example::

        FuzzedTensor("x", size=("k0", 16), steps=(1, "s"), min_elements=128,
                     probability_contiguous=0.6)
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        steps: tuple[str | int, ...] | None = None,
        probability_contiguous: float = 0.5,
        min_elements: int | None = None,
        max_elements: int | None = None,
        max_allocation_bytes: int | None = None,
        dim_parameter: str | None = None,
        roll_parameter: str | None = None,
        dtype: _torch_t.dtype | None = None,
        cuda: bool = False,
        tensor_constructor: Callable[..., Any] | None = None,
    ) -> None:
        _deps.require()
        if not 0 <= probability_contiguous <= 1:
            raise FuzzerSpecError(
                f"{name}: probability_contiguous must be in [0, 1], got {probability_contiguous}")
        self._name = name
        self._size = tuple(size)
        self._steps = tuple(steps or ())
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = _deps.torch.float32 if dtype is None else dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor
        # Checked on every candidate, so computed once (this also rejects unsupported dtypes
        # up front instead of on the first draw).
        self._itemsize = _dtype_size(self._dtype)

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def default_tensor_constructor(size: tuple[int, ...], dtype: _torch_t.dtype,
                                   **kwargs: Any) -> _torch_t.Tensor:
        if dtype.is_floating_point or dtype.is_complex:
            return _deps.torch.rand(size=size, dtype=dtype, device="cpu")
        return _deps.torch.randint(1, 127, size=size, dtype=dtype, device="cpu")

    def _get_size_and_steps(
        self, params: dict[str, Any]
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        dim = len(self._size) if self._dim_parameter is None else params[self._dim_parameter]
        size = _resolve(self._size, params, dim)
        steps = _resolve(self._steps, params, dim)
        allocation_size = tuple(n * step for n, step in zip(size, steps))
        return size, steps, allocation_size

    def _parameter_names(self) -> list[str]:
        """The parameters this tensor reads (checked against the Fuzzer's up front)."""
        names = [v for v in self._size + self._steps if isinstance(v, str)]
        return names + ([self._dim_parameter] if self._dim_parameter is not None else [])

    def satisfies_constraints(self, params: dict[str, Any]) -> bool:
        """Whether these parameter values give a tensor within the element/byte limits."""
        size, _, allocation_size = self._get_size_and_steps(params)
        numel = _prod(size)
        if numel < 0:
            raise FuzzerSpecError(f"{self._name}: size {size} has a negative number of elements")
        if self._max_elements is not None and numel > self._max_elements:
            return False
        if self._min_elements is not None and numel < self._min_elements:
            return False
        if self._max_allocation_bytes is None:
            return True
        return _prod(allocation_size, base=self._itemsize) <= self._max_allocation_bytes

    def _make_tensor(self, params: dict[str, Any],
                     state: numpy.random.RandomState) -> tuple[Any, dict[str, Any]]:
        """Build the tensor (global torch RNG) and lay it out (numpy ``state``), as torch does."""
        size, steps, allocation_size = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation_size, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()

        dim = len(size)
        order = _deps.np.arange(dim)
        # This draw happens on every call, even when the answer is "contiguous".
        if state.rand() > self._probability_contiguous:
            # Store the dimensions in a random non-identity order, then view them back in the
            # original order: same shape and values, permuted strides.
            while dim > 1 and (order == _deps.np.arange(dim)).all():
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(order.tolist())).contiguous()
            raw = raw.permute(tuple(_deps.np.argsort(order).tolist()))

        tensor = raw
        if any(step != 1 for step in steps):  # slicing with step 1 everywhere is a no-op view
            tensor = raw[tuple(slice(0, n * step, step) for n, step in zip(size, steps))]

        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties
