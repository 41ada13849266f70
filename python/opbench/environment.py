"""What machine produced a result, and warnings that save users from bad numbers.

``collect()`` gathers the facts a results file should carry (CPU, governor,
Python, opbench, torch, CUDA, threads, host) cheaply: it never imports torch,
it only reports on a torch that this process already imported.

``check_machine()`` warns (``MachineWarning``, shown once per process per
cause, recorded on every result measured meanwhile; see ``opbench.errors``)
about a frequency-scaling governor other than ``performance`` and about
debug builds of the code being timed; ``warn_too_few_samples`` warns
(``SampleSizeWarning``) when no confidence interval can be formed.

Example:
    >>> from opbench import environment
    >>> env = environment.collect()
    >>> env["cpu_count"] >= 1
    True
"""
from __future__ import annotations

import glob
import hashlib
import math
import os
import platform
import re
import socket
import sys
from pathlib import Path
from typing import Any

from opbench import _C
from opbench._version import __version__
from opbench.errors import MachineWarning, SampleSizeWarning, WarningRecord, warn

__all__ = ["BASELINE_DIR_ENV", "check_machine", "collect", "machine_id", "project_root",
           "root_dir", "warn_too_few_samples"]

_GOVERNOR_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def governors() -> dict[str, int]:
    """Scaling governor -> number of CPUs using it; empty where sysfs hides it
    (containers, VMs, macOS)."""
    counts: dict[str, int] = {}
    for path in glob.glob(_GOVERNOR_GLOB):
        text = _read(path)
        if text and text.strip():
            counts[text.strip()] = counts.get(text.strip(), 0) + 1
    return counts


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo")
    for line in (text or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Processor", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or None


def _torch_facts() -> dict[str, Any]:
    # Only a torch already imported: importing it costs a second or more and
    # would be a side effect of asking for metadata.
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return {"torch": None}
    facts: dict[str, Any] = {
        "torch": str(torch.__version__),
        "torch_debug": bool(getattr(torch.version, "debug", False)),
        "cuda": getattr(torch.version, "cuda", None),
        "num_threads": torch.get_num_threads(),
        "device": None,
    }
    try:
        if torch.cuda.is_available():
            facts["device"] = torch.cuda.get_device_name(torch.cuda.current_device())
    except Exception:  # a broken driver must not break saving results
        pass
    return facts


def collect() -> dict[str, Any]:
    """The machine and software that produced the numbers: JSON-able facts only.

    Keys: hostname, platform, machine, cpu_model, cpu_count, cpu_affinity,
    governor (one name, ``"a/b"`` when CPUs differ, None when unreadable),
    python, python_implementation, opbench, torch, torch_debug, cuda, device,
    num_threads (torch's pool; None without torch), clock_read_cost_ns and
    clock_resolution_ns (the timing clock, measured once per process).
    """
    counts = governors()
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(affinity) if affinity is not None else None,
        "governor": "/".join(sorted(counts)) if counts else None,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "opbench": __version__,
    }
    clock = _C.clock_info()
    env["clock_read_cost_ns"] = clock["read_cost_ns"]
    env["clock_resolution_ns"] = clock["resolution_ns"]
    env.update({"torch_debug": None, "cuda": None, "device": None, "num_threads": None})
    env.update(_torch_facts())
    return env


def _debug_builds() -> list[str]:
    """Builds in this process compiled for debugging, whose timings mislead."""
    found = []
    if hasattr(sys, "gettotalrefcount"):  # only debug builds of CPython define it
        found.append("Python")
    torch = sys.modules.get("torch")
    if torch is not None and getattr(getattr(torch, "version", None), "debug", False):
        found.append("torch")
    # opbench._C reports its own build type (NDEBUG); an extension without the
    # flag is taken to be a release build.
    native = sys.modules.get("opbench._C")
    if native is not None and getattr(native, "debug_build", False):
        found.append("opbench._C")
    return found


# Every Timer measurement calls check_machine. The governor is a fact of the
# machine, so its sysfs files (one per CPU) are read once per process, not on
# every measurement of a sweep; keyed by where they are read from.
_slow_governors: dict[str, list[str]] = {}


def check_machine() -> None:
    """Warns about a governor other than ``performance`` and about debug builds of the
    code being timed: shown once per process each, recorded every time (each
    Measurement taken meanwhile carries the warning)."""
    others = _slow_governors.get(_GOVERNOR_GLOB)
    if others is None:
        others = _slow_governors[_GOVERNOR_GLOB] = sorted(
            g for g in governors() if g != "performance")
    if others:
        warn(
            MachineWarning,
            f"CPU frequency scaling governor is {'/'.join(others)}, not 'performance': "
            "clock speed changes under load and skews timings. Fix: "
            "`sudo cpupower frequency-set -g performance` (or write 'performance' to "
            "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor).",
            once="governor",
        )
    debug = _debug_builds()
    if debug:
        warn(
            MachineWarning,
            f"timing a debug build ({', '.join(debug)}): unoptimised code runs at a "
            "different speed and in different proportions; measure a release build.",
            once="debug-build",
        )


def warn_too_few_samples(n: int, confidence: float) -> WarningRecord:
    """Warns (shown once per process) that ``n`` samples cannot bound a median at
    ``confidence``; returns the warning's record."""
    # The widest order-statistic interval, min to max, covers the median with
    # probability 1 - 2 * 0.5**n: the smallest n where that reaches `confidence`.
    needed = math.ceil(math.log2(2 / (1 - confidence))) if confidence < 1 else math.inf
    return warn(
        SampleSizeWarning,
        f"too few samples ({n}) for a {confidence:.0%} confidence interval of the median: "
        f"it needs at least {needed}. Measure longer, e.g. "
        "Timer.blocked_autorange(min_run_time=...) or a noise-targeted run (converge).",
        once="too-few-samples",
    )


# -- this machine's folder (baselines, measured peaks) -------------------------------

BASELINE_DIR_ENV = "OPBENCH_BASELINE_DIR"


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
    """Where per-machine files live (baselines, ``opbench.peaks``): ``root``, else
    ``$OPBENCH_BASELINE_DIR``, else ``.opbench`` in the project root (``project_root``):
    the same folder for the CLI and the pytest plugin, from whichever subdirectory
    either runs."""
    if root is not None:
        return Path(root)
    env = os.environ.get(BASELINE_DIR_ENV)
    return Path(env) if env else project_root() / ".opbench"


def machine_id(env: dict[str, Any] | None = None) -> str:
    """``Linux-x86_64-CPython3.11-1a2b3c`` for the environment ``env`` (default: this one)."""
    env = collect() if env is None else env
    system = str(env.get("platform") or "unknown").split("-")[0]
    python = ".".join(str(env.get("python") or "0.0").split(".")[:2])
    cpu = hashlib.sha1(f"{env.get('cpu_model')}|{env.get('cpu_count')}".encode()).hexdigest()[:6]
    name = f"{system}-{env.get('machine')}-{env.get('python_implementation')}{python}-{cpu}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)
