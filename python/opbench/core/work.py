"""Work: the FLOPs and bytes of one run of a statement, declared by the user or counted.

Declared work is a number (``Timer(..., flops=2 * n**3, bytes=3 * 4 * n**2)``)
or a callable of the statement's inputs: its parameters are looked up by name
among the Timer's globals and, for a string statement, the names its setup
defines (``flops=lambda a, b: 2 * a.shape[0] * a.shape[1] * b.shape[1]``).

Counted work (``flops="count"``, ``bytes="count"``) runs a torch statement
once under two dispatch modes:

* FLOPs by torch's own counter, ``torch.utils.flop_counter.FlopCounterMode``
  (matmuls, convolutions, attention), with formulas of opbench's for the
  element-wise arithmetic it leaves out (``add``, ``sub``, ``mul``, ``div``:
  one FLOP per output element, two with ``alpha``; ``sum``: one per input
  element folded; ``mean``: one per input element). An op that does
  arithmetic neither knows (``exp``, ``softmax``...) makes the FLOPs unknown
  (None, the ops named in ``info``), never a silent zero; ops that only move
  data (``copy_``, ``cat``, views, fills) count zero.
* Bytes as the distinct bytes read plus the distinct bytes written by the
  ATen ops the statement runs: each op's tensor inputs are read, its outputs
  written; an in-place op's mutated argument is read and written (``copy_``,
  fills and ``out=`` arguments are written only); views and outputs that alias
  an input move nothing; each storage region counts once per direction however
  many ops touch it, the union of the views taken of it (a column of a matrix
  is that column's bytes). Intermediates count: in eager mode they go through
  memory.

A statement that cannot be counted (C++, no torch op run, a sparse or
meta tensor, an op that raises under the modes) gets None and ``info`` says
why. Example:

    >>> import torch
    >>> x, y = torch.ones(1000), torch.empty(1000)
    >>> w = count(lambda: y.copy_(x))
    >>> w.flops, w.bytes, w.bytes_read, w.bytes_written
    (0, 8000, 4000, 4000)
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Any

from opbench.errors import UsageError

__all__ = ["COUNT", "Work", "check_declared", "count", "for_timer", "resolve"]

#: The value of ``flops=`` / ``bytes=`` that asks for counting.
COUNT = "count"

@dataclasses.dataclass(frozen=True)
class Work:
    """What one run of a statement does, as counted (``count``).

    Attributes:
        flops: floating-point operations, None when an op's arithmetic is unknown.
        bytes: ``bytes_read + bytes_written``, None when uncountable.
        bytes_read, bytes_written: the two halves.
        ops: ATen op overload -> calls, in first-run order.
        dtype: the dtype of the largest tensor the statement touched, which the
            FLOP-rate peak is taken for.
        device: ``"cpu"`` or ``"cuda"`` (where the tensors lived).
        unknown_flops: the ops whose arithmetic neither torch nor opbench counts.
        reason: why nothing could be counted (then every figure is None).
    """

    flops: int | None
    bytes: int | None
    bytes_read: int | None = None
    bytes_written: int | None = None
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    dtype: str | None = None
    device: str | None = None
    unknown_flops: tuple[str, ...] = ()
    reason: str | None = None

    def info(self) -> dict[str, Any]:
        """The JSON-able record a Measurement's ``info["work"]`` keeps."""
        record: dict[str, Any] = {"counted": True, "method": _METHOD}
        record.update({k: v for k, v in dataclasses.asdict(self).items()
                       if v not in (None, (), {})})
        if self.unknown_flops:
            record["unknown_flops"] = list(self.unknown_flops)
        return record


_METHOD = ("run once under torch dispatch modes: FLOPs by torch.utils.flop_counter."
           "FlopCounterMode (+ opbench formulas for add/sub/mul/div/sum/mean); bytes: "
           "distinct storage bytes read + written by the ATen ops, views and aliases free")


def _uncounted(reason: str) -> Work:
    return Work(flops=None, bytes=None, reason=reason)


# -- declared work -----------------------------------------------------------------

def check_declared(what: str, value: Any) -> None:
    """Raises early for a ``flops=`` / ``bytes=`` that is none of: None, a finite number
    >= 0, a callable, or ``"count"``."""
    if value is None or value == COUNT or callable(value):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise UsageError(f"{what} must be a number >= 0 (per run of the statement), a callable "
                         f"of the statement's inputs, or {COUNT!r}; got {value!r}")


def resolve(what: str, value: Any, inputs: dict[str, Any]) -> float | int:
    """A declared ``value`` as a number: itself, or the callable called with the
    ``inputs`` its parameters name (``**kwargs`` receives them all).

    Raises:
        UsageError: a parameter names no input, or the result is not a number >= 0.
    """
    if callable(value):
        kwargs: dict[str, Any] = {}
        for p in inspect.signature(value).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                kwargs.update({k: v for k, v in inputs.items() if not k.startswith("__")})
            elif p.name in inputs:
                kwargs[p.name] = inputs[p.name]
            elif p.default is p.empty:
                known = sorted(k for k in inputs if not k.startswith("__"))
                raise UsageError(f"{what}: the callable's parameter {p.name!r} names no input "
                                 f"of the statement (globals and names setup defines: "
                                 f"{', '.join(known) or 'none'})")
        value = value(**kwargs)
        if hasattr(value, "item") and callable(value.item):  # a 0-d tensor or numpy scalar
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise UsageError(f"{what}: the callable must return a number >= 0, got {value!r}")
    check_declared(what, value)
    return value  # type: ignore[no-any-return]


# -- counting -----------------------------------------------------------------------

def count(fn: Callable[[], Any]) -> Work:
    """Runs ``fn`` once and counts its FLOPs and bytes (see the module doc).

    Never raises for what it cannot count: the Work then carries None figures
    and the ``reason``. Needs torch.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        return _uncounted("torch is not installed (work is counted from ATen ops)")
    from opbench.core import _work_modes

    return Work(**{"flops": None, "bytes": None, **_work_modes.run_counted(fn)})


# -- a Timer's work ---------------------------------------------------------------------

def for_timer(timer: Any, globals_: dict[str, Any], info: dict[str, Any]) -> Any:
    """Resolves a Timer's ``flops=`` / ``bytes=`` when its measuring starts: callables
    called with the statement's inputs, ``"count"`` counted (``info["work"]``), and
    this machine's peaks attached (``info["peaks"]``) when any work is known.
    Returns the TaskSpec with the declared numbers."""
    import dataclasses as _dc

    kw = timer.kwargs
    spec = timer.task_spec
    python = timer.language.name == "PYTHON"
    wanted = {k: kw[k] for k in ("flops", "bytes") if kw[k] is not None}
    needs_run = any(v == COUNT for v in wanted.values()) or (
        python and isinstance(kw["setup"], str) and spec.setup not in ("", "pass")
        and any(callable(v) for v in wanted.values()))
    fn, inputs = None, dict(globals_)
    if needs_run and python:
        from opbench.engines.python import PythonEngine, default_timer

        stmt, setup = (kw[k] if callable(kw[k]) else getattr(spec, k) for k in ("stmt", "setup"))
        fn = PythonEngine(stmt, setup, default_timer, inputs).as_callable()
        if not callable(stmt):  # a string ran in a namespace of its own
            inputs = dict(fn.__globals__)
        # Either way `inputs` now holds the globals and the names setup defined.
    resolved = {k: resolve(k, v, inputs) for k, v in wanted.items() if callable(v)}
    counted: Work | None = None
    if any(v == COUNT for v in wanted.values()):
        counted = count(fn) if fn is not None else _uncounted(
            "only Python statements are counted (this one is C++): declare flops=/bytes=")
        # Only what was asked for is counted work (the rest stays declared or unknown).
        record = counted.info()
        for what, extra in (("flops", ("unknown_flops",)),
                            ("bytes", ("bytes_read", "bytes_written"))):
            if wanted.get(what) != COUNT:
                for key in (what, *extra):
                    record.pop(key, None)
        info["work"] = record
    spec = _dc.replace(spec, **resolved)
    if spec.flops is not None or spec.bytes is not None or (counted and (
            counted.flops is not None or counted.bytes is not None)):
        _attach_peaks(timer, spec, counted, info)
    return spec


def _attach_peaks(timer: Any, spec: Any, counted: Work | None, info: dict[str, Any]) -> None:
    """``info["peaks"]``: this machine's ceilings for the statement's device, threads and
    dtype (measured now if never before); left out, with the reason, without torch."""
    from opbench.core import peaks

    device = (counted.device if counted and counted.device else
              "cuda" if timer.kwargs.get("device_timing") else "cpu")
    dtype = counted.dtype if counted and counted.dtype else "float32"
    try:
        peak = peaks.get(device, spec.num_threads, (dtype,))
    except UsageError as e:
        info["peaks"] = {"unavailable": str(e)}
        return
    info["peaks"] = peak.for_dtype(dtype)
