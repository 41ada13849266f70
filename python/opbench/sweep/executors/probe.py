"""What a worker reports about itself with each result: its host and process, its
GPUs (from the NVIDIA driver's /proc files), and the environment variables it
started with that change timings (allocator, thread pools).

Example:
    >>> from opbench.sweep.executors.probe import is_allocator_variable, worker_id
    >>> is_allocator_variable("MALLOC_ARENA_MAX"), is_allocator_variable("OMP_NUM_THREADS")
    (True, False)
    >>> ":" in worker_id()
    True
"""
from __future__ import annotations

import os
import socket
from typing import Any

from opbench import environment


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def _gpu_facts() -> dict[str, Any]:
    """The NVIDIA driver and GPU models, from the driver's /proc files (no library
    loaded, nothing imported); None where there is no NVIDIA driver."""
    driver = _read_first_line("/proc/driver/nvidia/version")
    models = []
    try:
        for gpu in sorted(os.listdir("/proc/driver/nvidia/gpus")):
            with open(f"/proc/driver/nvidia/gpus/{gpu}/information", encoding="utf-8") as f:
                models += [line.split(":", 1)[1].strip() for line in f
                           if line.startswith("Model:")]
    except OSError:
        pass
    return {"gpu_driver": driver, "gpus": models or None}


def worker_id() -> str:
    """``host:pid`` of this process: which worker ran a task."""
    return f"{socket.gethostname()}:{os.getpid()}"


# Environment variables that change how timed code runs whatever the Timer says, by
# their exact names (a prefix would record whatever else someone named so, a token
# included, in every results file). Those that set up the memory allocator (Dask's
# nanny gives its workers MALLOC_TRIM_THRESHOLD_=65536, which hands memory back to the
# OS on every large free): a worker whose differ from the driver's times every
# allocating statement differently (the Timer cannot undo it).
_ALLOCATOR_VARIABLES = (
    "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
    "GLIBC_TUNABLES", "MALLOC_CONF", "PYTHONMALLOC", "LD_PRELOAD")
# Then the thread pools of OpenMP (GNU's, Intel's), MKL and OpenBLAS (numpy's, which
# Timer's num_threads does not set), and the instruction set torch dispatches to.
_TIMING_VARIABLES = (
    *_ALLOCATOR_VARIABLES,
    "OMP_NUM_THREADS", "OMP_DYNAMIC", "OMP_PROC_BIND", "OMP_PLACES", "OMP_SCHEDULE",
    "OMP_WAIT_POLICY", "OMP_STACKSIZE", "OMP_MAX_ACTIVE_LEVELS", "OMP_THREAD_LIMIT",
    "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_BLOCKTIME", "KMP_HW_SUBSET",
    "KMP_LIBRARY", "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_THREADING_LAYER",
    "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
    "ATEN_CPU_CAPABILITY")


def _environment_at_start() -> dict[str, str]:
    """The environment this process started with, which is what the allocator and the
    thread pools read: later changes to os.environ do not reach them (and a Dask
    LocalCluster's nanny changes the driver's own os.environ before it spawns workers)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return dict(os.environ)
    pairs = (e.decode(errors="replace").partition("=") for e in entries if b"=" in e)
    return {k: v for k, _, v in pairs}


def timing_variables() -> dict[str, str]:
    """The environment variables this process started with that change how timed code
    runs (allocator, thread pools)."""
    return {k: v for k, v in sorted(_environment_at_start().items()) if _is_timing_variable(k)}


def _is_timing_variable(name: str) -> bool:
    return name in _TIMING_VARIABLES


def is_allocator_variable(name: str) -> bool:
    """Whether ``name`` sets up the memory allocator (glibc's MALLOC_* and tunables,
    jemalloc's MALLOC_CONF, PYTHONMALLOC, an LD_PRELOAD of jemalloc or tcmalloc)."""
    return name in _ALLOCATOR_VARIABLES


def _pool_environment() -> dict[str, str]:
    """os.environ for a pool worker, with this process's timing variables as it started
    (so the worker's allocator and thread pools are set up as this process's are)."""
    env = {k: v for k, v in os.environ.items() if not _is_timing_variable(k)}
    env.update(timing_variables())
    return env


def worker_environment(slot: dict[str, Any] | None) -> dict[str, Any]:
    """``environment.collect()`` plus the GPU driver and models, the variables that
    change timings (``timing_variables``), the worker and its slot."""
    env = environment.collect()
    env.update(_gpu_facts())
    env["variables"] = timing_variables()
    env["worker"] = worker_id()
    env["slot"] = slot
    return env
