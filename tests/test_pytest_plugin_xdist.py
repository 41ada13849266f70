"""opbench.integrations.pytest_plugin.xdist: one lock file serialises the workers' timing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from opbench.integrations.pytest_plugin.xdist import _LOCK_KEY, _file_lock, pytest_configure_node
from plugin_doubles import FakeConfig

_TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def _held_elsewhere(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", _TRY_LOCK, str(path)], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def test_the_lock_is_held_for_the_timed_region_only(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    with _file_lock(str(path)):
        assert _held_elsewhere(path) == "held"
    assert _held_elsewhere(path) == "free"


def test_every_worker_gets_the_same_lock_file() -> None:
    config = FakeConfig()
    nodes = [SimpleNamespace(config=config, workerinput={}) for _ in range(2)]
    for node in nodes:
        pytest_configure_node(node)
    paths = {node.workerinput[_LOCK_KEY] for node in nodes}
    assert len(paths) == 1
    path = paths.pop()
    assert os.path.isfile(path)
    os.remove(path)


def test_no_lock_when_overlap_is_allowed_or_nothing_is_timed() -> None:
    for option in ("opbench_no_lock", "opbench_disable"):
        node = SimpleNamespace(config=FakeConfig(**{option: True}), workerinput={})
        pytest_configure_node(node)
        assert node.workerinput == {}
