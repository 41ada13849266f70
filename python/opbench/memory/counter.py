"""The allocation counter: where it is, whether this process has it, and how a process
is started with it.

The counter (``libopbench_memory.so``, beside ``opbench._C``) counts the C library's
allocations only in a process that loaded it first, through ``LD_PRELOAD``: a
process started by ``preload_env()``'s environment. ``attach()`` connects
``opbench._C.memory`` to it and starts counting Python objects too; in a process
without it preloaded, ``attach()`` loads it anyway and counts Python objects only.

Example:
    >>> reason = unavailable_reason()
    >>> reason is None or "allocation counter" in reason or "Linux" in reason
    True
"""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from opbench.errors import MemoryUnavailableError

__all__ = ["LIBRARY", "attach", "library_path", "preload_env", "preloaded", "restore_environment",
           "unavailable_reason"]

LIBRARY = "libopbench_memory.so"
# Set in a process started with the counter: the user's own LD_PRELOAD (maybe empty),
# which restore_environment() puts back for the processes the statement starts.
_ORIGINAL_PRELOAD = "OPBENCH_MEMORY_ORIGINAL_LD_PRELOAD"
_state = {"attached": False, "interposing": False}


def library_path() -> Path:
    """Where the counter is (it may be missing: see ``unavailable_reason``)."""
    from opbench import _C

    return Path(_C.__file__).resolve().parent / LIBRARY


def unavailable_reason() -> str | None:
    """Why memory cannot be counted on this machine, or None when it can."""
    if not sys.platform.startswith("linux"):
        return (f"memory counting needs Linux with glibc (its allocator is interposed at "
                f"process start); this is {sys.platform}.")
    if not library_path().is_file():
        return (f"opbench was built without its allocation counter ({LIBRARY}): it is built only "
                "against glibc, which has the __libc_malloc entry points it forwards to. Rebuild "
                "opbench on a glibc Linux (`pip install .` or tools/build-dev).")
    return None


def preloaded() -> bool:
    """Whether this process was started with the counter (LD_PRELOAD), so that it counts
    the native heap. Loads nothing."""
    return hasattr(ctypes.CDLL(None), "opbench_memory_version")


def preload_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) for a process started with the
    counter: ``LD_PRELOAD`` with the counter first, the user's own kept after it.

    Raises:
        MemoryUnavailableError: no counter here (``unavailable_reason``).
    """
    reason = unavailable_reason()
    if reason is not None:
        raise MemoryUnavailableError(reason)
    out = dict(os.environ if env is None else env)
    original = out.get(_ORIGINAL_PRELOAD, out.get("LD_PRELOAD", ""))
    out[_ORIGINAL_PRELOAD] = original
    out["LD_PRELOAD"] = " ".join([str(library_path()), *original.split()])
    return out


def restore_environment() -> None:
    """In a process started with ``preload_env``: gives the processes it starts the
    user's own ``LD_PRELOAD`` (the counter is loaded here already, and counts nothing
    in them)."""
    if _ORIGINAL_PRELOAD in os.environ:
        original = os.environ.pop(_ORIGINAL_PRELOAD)
        if original:
            os.environ["LD_PRELOAD"] = original
        else:
            os.environ.pop("LD_PRELOAD", None)


def attach() -> bool:
    """Connects ``opbench._C.memory`` to the counter and counts Python objects from now
    on; returns whether the native heap is counted too (the counter was preloaded).

    Raises:
        MemoryUnavailableError: no counter here, or it cannot be loaded.
    """
    if _state["attached"]:
        return _state["interposing"]
    reason = unavailable_reason()
    if reason is not None:
        raise MemoryUnavailableError(reason)
    from opbench import _C

    try:
        interposing = bool(_C.memory.attach(str(library_path())))
        _C.memory.hook_python()
    except RuntimeError as e:
        raise MemoryUnavailableError(f"the allocation counter cannot be used: {e}") from None
    _state.update(attached=True, interposing=interposing)
    return interposing
