"""opbench.utils.common: torch's ``common`` module, and ``_make_temp_dir``, which torch exports
for microbenchmarks to reuse (a new folder, under /dev/shm when BENCHMARK_USE_DEV_SHM is set)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import opbench
from opbench.utils import common


def test_the_names_are_opbenchs() -> None:
    assert common.Measurement is opbench.Measurement and common.select_unit is opbench.select_unit
    assert common.set_torch_threads is opbench.set_torch_threads


def test_a_temp_dir_is_new_and_named_as_torch_names_it(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.delenv("BENCHMARK_USE_DEV_SHM", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    first, second = common._make_temp_dir(prefix="jit"), common._make_temp_dir()
    assert Path(first).parent == tmp_path and os.path.isdir(first) and first != second
    assert re.fullmatch(r"jit__\d+__[0-9a-f-]{36}", Path(first).name)
    assert Path(second).name.startswith("tmp__")  # tempfile's prefix, as torch's
    assert not (Path(first) / "owner.pid").exists()


def test_under_dev_shm_orphans_are_collected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    monkeypatch.setenv("BENCHMARK_USE_DEV_SHM", "1")
    monkeypatch.setattr(common, "_DEV_SHM_ROOT", str(tmp_path / "shm"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    orphan, alive, other = (tmp_path / "shm" / n for n in ("orphan", "alive", "not-ours"))
    for folder, owner in ((orphan, dead), (alive, str(os.getppid()))):
        folder.mkdir(parents=True)
        (folder / "owner.pid").write_text(owner)
    other.mkdir()
    path = Path(common._make_temp_dir(prefix="cg", gc_dev_shm=True))
    assert path.parent == tmp_path / "shm" and (path / "owner.pid").read_text() == str(os.getpid())
    assert not orphan.exists() and alive.exists() and other.exists()
    common._make_temp_dir(gc_dev_shm=True)  # its own folders are never collected
    assert path.exists()


def test_dev_shm_where_there_is_none_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHMARK_USE_DEV_SHM", "true")
    monkeypatch.setattr(os.path, "isdir", lambda p: False)
    with pytest.raises(AssertionError, match="unset it"):
        common._make_temp_dir()
