"""pytest-xdist: benchmarks on different workers would share the machine's cores while
timing and read each other's load as slowness, so a lock shared by all workers
serialises the timed regions (the controller creates it and hands each worker its
path), and every worker sends its results to the controller (see ``saving``)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

# Key under which an xdist worker hands its results to the controller, and the
# controller hands workers the path of the lock.
_WORKER_KEY = "opbench_results"
_LOCK_KEY = "opbench_lock"


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: give each worker the path of the lock that serialises timing."""
    config = node.config
    if config.getoption("opbench_no_lock") or config.getoption("opbench_disable"):
        return
    path = getattr(config, "_opbench_lock_path", None)
    if path is None:
        fd, path = tempfile.mkstemp(prefix="opbench_xdist_", suffix=".lock")
        os.close(fd)
        config._opbench_lock_path = path  # type: ignore[attr-defined]
    node.workerinput[_LOCK_KEY] = path
