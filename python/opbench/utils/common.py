"""``torch.utils.benchmark.utils.common``: Measurement, TaskSpec and the unit helpers.

``_make_temp_dir`` is here as in torch, which exports it "solely so that
microbenchmarks can reuse the util": a new directory, under ``/dev/shm``
when ``BENCHMARK_USE_DEV_SHM`` is set.

    >>> import os
    >>> from opbench.utils.common import _make_temp_dir, select_unit
    >>> select_unit(2.5e-6)
    ('us', 1e-06)
    >>> path = _make_temp_dir(prefix="doc"); os.path.isdir(path); os.rmdir(path)
    True
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid

from opbench._threads import set_torch_threads
from opbench.core.measurement import (
    Measurement,
    TaskSpec,
    ordered_unique,
    select_unit,
    trim_sigfig,
    unit_to_english,
)

__all__ = [
    "Measurement",
    "TaskSpec",
    "ordered_unique",
    "select_unit",
    "set_torch_threads",
    "trim_sigfig",
    "unit_to_english",
]

# torch's folder, so torch's and opbench's workers clean up each other's orphans.
_DEV_SHM_ROOT = "/dev/shm/pytorch_benchmark_utils"


def _make_temp_dir(prefix: str | None = None, gc_dev_shm: bool = False) -> str:
    """A new directory (the caller removes it): ``<tmp>/<prefix>__<time>__<uuid>``.

    With ``BENCHMARK_USE_DEV_SHM=1`` (or ``true``) it is made under
    ``/dev/shm/pytorch_benchmark_utils`` with the owner's pid in ``owner.pid``, and
    ``gc_dev_shm=True`` first removes the directories there whose owner has exited,
    as torch's does.

    Raises:
        AssertionError: ``BENCHMARK_USE_DEV_SHM`` is set where there is no /dev/shm
            (torch's type, so code that catches it keeps working).
    """
    use_dev_shm = (os.getenv("BENCHMARK_USE_DEV_SHM") or "").lower() in ("1", "true")
    root = tempfile.gettempdir()
    if use_dev_shm:
        if os.name != "posix" or not os.path.isdir("/dev/shm"):
            raise AssertionError(
                "BENCHMARK_USE_DEV_SHM is set but this system has no tmpfs at /dev/shm: unset it")
        root = _DEV_SHM_ROOT
        os.makedirs(root, exist_ok=True)
        if gc_dev_shm:
            _remove_orphans(root)
    name = f"{prefix or tempfile.gettempprefix()}__{int(time.time())}__{uuid.uuid4()}"
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=False)
    if use_dev_shm:
        with open(os.path.join(path, "owner.pid"), "w") as f:
            f.write(str(os.getpid()))
    return path


def _remove_orphans(root: str) -> None:
    """Removes the directories under ``root`` whose ``owner.pid`` names a dead process."""
    for entry in os.listdir(root):
        try:
            with open(os.path.join(root, entry, "owner.pid")) as f:
                owner = int(f.read())
        except (OSError, ValueError):
            continue  # not one of ours, or being written
        if owner == os.getpid():
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's
