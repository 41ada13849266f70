"""A task of a sweep: one Timer and the method to call on it, as bytes, and how a
worker runs it.

The Timer travels by its constructor arguments (``Timer.__reduce__``), pickled
by cloudpickle where installed (lambdas and closures by value), else by pickle;
a global that cannot be sent is named before anything is submitted. On the
worker, ``run_task`` reserves the task's slot (``opbench.sweep.placement``),
rebuilds the Timer, measures, and returns an outcome dict with the worker's
environment (``probe``); an exception in the task comes back as an error
outcome, never as a lost worker.

Example:
    >>> import pickle
    >>> import opbench
    >>> from opbench.sweep.executors.task import run_task
    >>> payload = pickle.dumps((opbench.Timer("1 + 1"), "timeit", {"number": 10}))
    >>> run_task(payload, (1, 0))["value"].number_per_run
    10
"""
from __future__ import annotations

import dataclasses
import importlib
import io
import pickle
import traceback
import types
from typing import Any

from opbench.errors import SerializationError
from opbench.sweep import placement
from opbench.sweep.executors.probe import worker_environment, worker_id
from opbench.sweep.placement import Needs


@dataclasses.dataclass
class Task:
    """One measurement to run: ``timers[index]``, sent as ``payload``."""

    index: int
    title: str
    payload: bytes
    needs: Needs
    attempts: int = 0  # submissions so far
    avoid: str | None = None  # the worker that died running it


# -- sending timers -----------------------------------------------------------

def _pickler() -> type[pickle.Pickler]:
    """cloudpickle's pickler where installed (lambdas, closures, __main__ functions by
    value; Dask and Ray both bring it), else pickle's, taught to send modules by name."""
    try:
        from cloudpickle import CloudPickler  # type: ignore[import-untyped]

        return CloudPickler  # type: ignore[no-any-return]
    except ImportError:
        pass

    class _ModulesByName(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.ModuleType):
                return importlib.import_module, (obj.__name__,)
            return NotImplemented

    return _ModulesByName


def _dumps(value: Any, pickler: type[pickle.Pickler]) -> bytes:
    buffer = io.BytesIO()
    pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def _culprit(timer: Any, kwargs: dict[str, Any], pickler: type[pickle.Pickler]) -> str:
    """Names the first argument (a global by name) that does not serialize, and why."""
    arguments = dict(timer.kwargs)
    candidates = [(f"global {name!r}", value)
                  for name, value in (arguments.pop("globals", None) or {}).items()]
    candidates += [(f"argument {name}=", value) for name, value in arguments.items()]
    candidates += [(f"run_all keyword {name}=", value) for name, value in kwargs.items()]
    for what, value in candidates:
        try:
            _dumps(value, pickler)
        except Exception as e:
            return f"{what} (of type {type(value).__name__}) does not serialize: " \
                   f"{type(e).__name__}: {e}"
    return "it does not serialize"


def serialize(timer: Any, method: str, kwargs: dict[str, Any], index: int) -> bytes:
    """``(timer, method, kwargs)`` as bytes for a worker.

    Raises:
        SerializationError: naming the timer and the global (or argument) that
            cannot be sent, before anything is submitted.
    """
    pickler = _pickler()
    try:
        return _dumps((timer, method, kwargs), pickler)
    except Exception as e:
        hint = "" if pickler.__module__.startswith("cloudpickle") else \
            " (install cloudpickle to send lambdas and closures)"
        raise SerializationError(
            f"timers[{index}] cannot be sent to a worker: {_culprit(timer, kwargs, pickler)}. "
            f"Create it in `setup` instead, or pass a picklable value{hint}."
        ) from e


def run_task(payload: bytes, needs: tuple[int, int]) -> dict[str, Any]:
    """Runs one task on the worker, alone in its slot: the outcome dict."""
    slot = None
    try:
        with placement.reserve(Needs(*needs)) as slot:
            timer, method, kwargs = pickle.loads(payload)
            value = getattr(timer, method)(**kwargs)
    except Exception as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(), "worker": worker_id(),
                "environment": worker_environment(slot)}
    return {"status": "ok", "value": value, "worker": worker_id(),
            "environment": worker_environment(slot)}


def _lost(worker: str | None, reason: str) -> dict[str, Any]:
    return {"status": "lost", "error": reason, "worker": worker, "traceback": None,
            "environment": None}
