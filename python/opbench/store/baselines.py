"""Baselines: numbered runs kept per machine, so a gate compares with this machine's last run.

``--opbench-autosave`` (pytest) and ``python -m opbench timeit --autosave`` write
each run to ``.opbench/<machine id>/<NNNN>_<commit>_<UTC time>.json`` in the
project's root, the nearest folder upwards holding ``.opbench``, ``.git``,
``pyproject.toml``, ``pytest.ini``, ... (``$OPBENCH_BASELINE_DIR`` moves it). ``python -m
opbench compare --latest NEW`` and ``--opbench-compare`` without a path
compare with the latest run of this machine.

The machine id comes from the environment a results file records: operating
system, architecture, Python, and a short hash of the CPU model and count. It
leaves out the host name on purpose: CI runners get a new one every run, yet
their timings compare; a different CPU gets a different id, because its
timings do not.

Example:
    >>> import tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> root = tempfile.mkdtemp()
    >>> first = autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))], root=root)
    >>> latest(root=root) == first, first.name.startswith("0001_")
    (True, True)
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from opbench import environment as _environment
from opbench.store.results import save

__all__ = ["ENV_VAR", "autosave", "latest", "machine_id", "project_root", "root_dir", "runs"]

ENV_VAR = "OPBENCH_BASELINE_DIR"
_RUN = re.compile(r"^(\d{4,})_.*\.json$")


# What marks a project's root: a folder of baselines already there, version control,
# or the files pytest takes its rootdir from.
_ROOT_MARKERS = (".opbench", ".git", ".hg", "pyproject.toml", "pytest.ini", "tox.ini",
                 "setup.cfg", "setup.py")


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest folder from ``start`` (default: the working directory) upwards that
    holds one of ``_ROOT_MARKERS``; ``start`` itself when none does."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in _ROOT_MARKERS):
            return folder
    return here


def root_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """Where baselines live: ``root``, else ``$OPBENCH_BASELINE_DIR``, else ``.opbench`` in
    the project root (``project_root``): the same folder for the CLI and the pytest
    plugin, from whichever subdirectory either runs."""
    if root is not None:
        return Path(root)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else project_root() / ".opbench"


def machine_id(env: dict[str, Any] | None = None) -> str:
    """``Linux-x86_64-CPython3.11-1a2b3c`` for the environment ``env`` (default: this one)."""
    env = _environment.collect() if env is None else env
    system = str(env.get("platform") or "unknown").split("-")[0]
    python = ".".join(str(env.get("python") or "0.0").split(".")[:2])
    cpu = hashlib.sha1(f"{env.get('cpu_model')}|{env.get('cpu_count')}".encode()).hexdigest()[:6]
    name = f"{system}-{env.get('machine')}-{env.get('python_implementation')}{python}-{cpu}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _git_commit() -> str | None:
    """The current commit (with ``+dirty`` for uncommitted changes), None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty.strip() else "") if head else None


def runs(root: str | os.PathLike[str] | None = None, machine: str | None = None) -> list[Path]:
    """This machine's (or ``machine``'s) saved runs, oldest first."""
    folder = root_dir(root) / (machine or machine_id())
    if not folder.is_dir():
        return []
    numbered = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _RUN.match(p.name))]
    return [p for _, p in sorted(numbered)]


def latest(root: str | os.PathLike[str] | None = None,
           machine: str | None = None) -> Path | None:
    """The latest saved run of this machine, or None when there is none."""
    found = runs(root, machine)
    return found[-1] if found else None


def autosave(results: Any, root: str | os.PathLike[str] | None = None) -> Path:
    """Saves ``results`` as this machine's next numbered run; returns its path.

    The environment recorded in the file gains ``git_commit`` (when run inside
    a git repository) and ``machine_id``.
    """
    env = _environment.collect()
    commit = _git_commit()
    env.update(git_commit=commit, machine_id=machine_id(env))
    folder = root_dir(root) / env["machine_id"]
    folder.mkdir(parents=True, exist_ok=True)
    existing = runs(root, env["machine_id"])
    number = int(_RUN.match(existing[-1].name).group(1)) + 1 if existing else 1  # type: ignore[union-attr]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    short = commit[:12].replace("+", "_") if commit else "nocommit"
    return save(results, folder / f"{number:04d}_{short}_{stamp}.json", environment=env)
