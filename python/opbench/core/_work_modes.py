"""The torch side of ``opbench.core.work``: the dispatch modes that count a statement's work.

Imported only when work is counted, so ``opbench.core.work`` (and Timer) load
without torch. See ``opbench.core.work`` for what is counted and how.
"""
from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten

# Storages larger than this get no byte mask: overlapping strided views of
# them (rare) are left uncounted rather than estimated.
_MASK_LIMIT = 1 << 28


class _Uncountable(Exception):
    """A tensor or op whose memory traffic has no exact count."""


# -- FLOPs that torch's counter leaves out ---------------------------------------------

def _elementwise(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    alpha = kwargs.get("alpha", 1)
    return math.prod(out_shape) * (1 if alpha in (None, 1) else 2)


def _folded(self_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return max(math.prod(self_shape) - math.prod(out_shape), 0)


def _mean(self_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return math.prod(self_shape)


_FORMULAS: dict[Any, Callable[..., int]] = {
    **{getattr(aten, name): _elementwise
       for name in ("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_")},
    aten.sum: _folded,
    aten.mean: _mean,
}

# Ops that move or allocate data and do no arithmetic: zero FLOPs, not unknown.
_NO_ARITHMETIC = {getattr(aten, name) for name in (
    "copy_", "clone", "_to_copy", "_copy_from", "_copy_from_and_resize", "cat", "stack",
    "fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "new_zeros",
    "new_ones", "new_full", "index_select", "gather", "index", "take", "masked_select",
    "masked_fill", "masked_fill_", "where", "flip", "roll", "repeat", "constant_pad_nd",
    "lift_fresh", "lift_fresh_copy", "detach", "_local_scalar_dense", "slice_scatter",
    "select_scatter", "as_strided_scatter", "expand_copy", "permute_copy", "t_copy",
    "transpose_copy", "view_copy", "_unsafe_view", "resize_", "scalar_tensor", "set_",
    "contiguous", "scatter", "scatter_", "index_put", "index_put_",
) if hasattr(aten, name)}

# Allocation without writing: their outputs hold no data yet.
_ALLOCATE_ONLY = {getattr(aten, name) for name in (
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_",
)}

# Written without reading their old contents, though the schema marks them mutable.
_OVERWRITE = {getattr(aten, name) for name in (
    "copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_",
    "exponential_", "geometric_", "log_normal_", "cauchy_", "set_",
) if hasattr(aten, name)}

# Questions about a tensor, not work on it (torch's FlopCounterMode skips the same).
_METADATA = {getattr(aten, name).default for name in (
    "sym_is_contiguous", "is_contiguous", "is_strides_like_format",
    "is_non_overlapping_and_dense", "size", "sym_size", "stride", "sym_stride",
    "storage_offset", "sym_storage_offset", "numel", "sym_numel", "dim",
) if hasattr(aten, name)} | {torch.ops.prim.layout.default, torch.ops.prim.device.default}


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    """Which storage ``t`` lives in; raises _Uncountable for a tensor with none."""
    if t.layout != torch.strided:
        raise _Uncountable(f"a {t.layout} tensor (only strided tensors are counted)")
    if t.device.type == "meta" or (type(t) is not torch.Tensor
                                   and not isinstance(t, torch.nn.Parameter)):
        raise _Uncountable(f"a {type(t).__name__} on {t.device} (no real storage)")
    return str(t.device), t.untyped_storage().data_ptr()


class _Storage:
    """One storage's views read and written, the storage itself kept alive so its
    address is not reused by another tensor during the run."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.nbytes = storage.nbytes()
        self.read: list[tuple[int, tuple[int, ...], tuple[int, ...], int]] = []
        self.written: list[tuple[int, tuple[int, ...], tuple[int, ...], int]] = []


class _Traffic(TorchDispatchMode):
    """Records every ATen op and the storage regions it reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.packets: list[Any] = []
        self.storages: dict[tuple[str, int], _Storage] = {}
        self.devices: set[str] = set()
        self.largest: tuple[int, str] = (-1, "")

    def _view(self, t: torch.Tensor) -> tuple[_Storage, tuple[int, tuple[int, ...],
                                                              tuple[int, ...], int]] | None:
        if t.numel() == 0:
            return None
        key = _storage_key(t)
        entry = self.storages.get(key)
        if entry is None:
            entry = self.storages[key] = _Storage(t.untyped_storage())
        item = t.element_size()
        self.devices.add(str(t.device) if t.device.type == "cuda" else t.device.type)
        self.largest = max(self.largest, (t.numel(), str(t.dtype).removeprefix("torch.")))
        return entry, (int(t.storage_offset()) * item, tuple(t.shape),
                       tuple(s * item for s in t.stride()), item)

    def _record(self, tensors: list[torch.Tensor], *, read: bool, written: bool) -> None:
        for t in tensors:
            found = self._view(t)
            if found is None:
                continue
            entry, view = found
            if read:
                entry.read.append(view)
            if written:
                entry.written.append(view)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _METADATA:
            return out
        self.ops[str(func)] += 1
        schema = func._schema
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            return out  # a view: no data moves, no arithmetic
        self.packets.append(func._overloadpacket)
        inputs: list[torch.Tensor] = []
        positional = [a for a in schema.arguments if not a.kwarg_only]
        named = {**dict(zip((a.name for a in positional), args)), **kwargs}
        for a in schema.arguments:
            tensors = _tensors(named.get(a.name))
            inputs += tensors
            mutated = a.alias_info is not None and a.alias_info.is_write
            self._record(tensors, written=mutated,
                         read=not mutated or not (a.is_out or func._overloadpacket in _OVERWRITE))
        if func._overloadpacket not in _ALLOCATE_ONLY:
            inputs_at = {_storage_key(t) for t in inputs if t.numel()}
            fresh = [t for t in _tensors(out) if t.numel() == 0 or
                     _storage_key(t) not in inputs_at]
            self._record(fresh, read=False, written=True)
        return out

    def totals(self) -> tuple[int | None, int | None]:
        read = written = 0
        for s in self.storages.values():
            r = union_bytes(s.read, s.nbytes) if s.read else 0
            w = union_bytes(s.written, s.nbytes) if s.written else 0
            if r is None or w is None:
                return None, None
            read, written = read + r, written + w
        return read, written


def run_counted(fn: Callable[[], Any]) -> dict[str, Any]:
    """``opbench.core.work.count``: ``fn`` run once under the FLOP counter and _Traffic; the
    fields of its ``Work`` (only ``reason`` when nothing could be counted)."""
    traffic = _Traffic()
    flop_counter = FlopCounterMode(display=False, custom_mapping=_FORMULAS)
    try:
        # _Traffic innermost: it sees each op as the statement issued it, before the
        # FLOP counter (which may decompose ops it has no formula for).
        with flop_counter, traffic:
            fn()
        read, written = traffic.totals()
    except _Uncountable as e:
        return {"reason": f"cannot count the bytes of {e}"}
    except Exception as e:  # a statement failing under the modes is uncountable, not a crash
        return {"reason": f"the statement raised under the counting modes: "
                          f"{type(e).__name__}: {e}"}
    if not traffic.ops:
        return {"reason": "the statement ran no ATen op (nothing torch could count)"}
    registry = flop_counter.flop_registry
    unknown = tuple(dict.fromkeys(str(p) for p in traffic.packets
                                  if p not in registry and p not in _NO_ARITHMETIC))
    per_op = flop_counter.get_flop_counts().get("Global", {})
    dtype = traffic.largest[1]
    return dict(
        flops=None if unknown else int(sum(per_op.values())),
        bytes=None if read is None or written is None else read + written,
        bytes_read=read, bytes_written=written, ops=dict(traffic.ops),
        # The accelerator when any tensor lived there (its peaks are the relevant ones).
        dtype=dtype or None, device=min(traffic.devices, key=lambda d: d == "cpu", default=None),
        unknown_flops=unknown,
        reason=("FLOPs unknown: no formula for " + ", ".join(unknown)) if unknown else None,
    )


# -- the bytes a set of views covers -------------------------------------------------

def union_bytes(views: Iterable[tuple[int, tuple[int, ...], tuple[int, ...], int]],
                storage_nbytes: int) -> int | None:
    """The distinct bytes covered by strided views of one storage, exactly.

    Each view is ``(byte offset, sizes, byte strides, item size)``. Contiguous
    runs are merged as intervals; a lone non-overlapping strided view is its
    element count; anything else is marked byte by byte in a mask (None when
    the storage is too large for one).

    Example:
        >>> union_bytes([(0, (4, 4), (16, 4), 4), (0, (4,), (16,), 4)], 64)  # matrix + column
        64
        >>> union_bytes([(0, (4,), (16,), 4)], 64)  # a column alone
        16
    """
    views = list(dict.fromkeys(views))
    normal = [_normalize(*v) for v in views]
    intervals = [(v[0], v[0] + v[1][0] * v[3]) for v in normal
                 if len(v[1]) == 1 and v[2][0] == v[3]]
    if len(intervals) == len(normal):
        return _interval_union(intervals)
    if len(normal) == 1 and _non_overlapping(*normal[0]):
        _, sizes, _, itemsize = normal[0]
        return math.prod(sizes) * itemsize
    if storage_nbytes > _MASK_LIMIT:
        return None
    mask = torch.zeros(storage_nbytes, dtype=torch.bool)
    for offset, sizes, strides, itemsize in normal:
        mask.as_strided((*sizes, itemsize), (*strides, 1), offset).fill_(True)
    return int(mask.sum())


def _normalize(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...],
               itemsize: int) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    """The same bytes with broadcast and unit dimensions dropped, negative strides
    flipped, dimensions sorted by stride and contiguous ones merged: a dense view
    becomes one dimension of stride ``itemsize``."""
    dims = []
    for size, stride in zip(sizes, strides):
        if size == 1 or stride == 0:
            continue
        if stride < 0:
            offset += stride * (size - 1)
            stride = -stride
        dims.append((stride, size))
    dims.sort()
    merged: list[list[int]] = []
    for stride, size in dims:
        if merged and merged[-1][0] * merged[-1][1] == stride:
            merged[-1][1] *= size
        else:
            merged.append([stride, size])
    if not merged:
        merged = [[itemsize, 1]]
    return offset, tuple(s for _, s in merged), tuple(st for st, _ in merged), itemsize


def _non_overlapping(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...],
                     itemsize: int) -> bool:
    reach = itemsize
    for size, stride in zip(sizes, strides):  # sorted by stride
        if stride < reach:
            return False
        reach = stride * size
    return True


def _interval_union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total
