"""What machine produced a result, and warnings that save users from bad numbers.

``collect()`` gathers the facts a results file should carry (CPU, governor,
Python, opbench, torch, CUDA, threads, host) cheaply: it never imports torch,
it only reports on a torch that this process already imported.

The warnings use their own category, ``BenchmarkWarning``, and fire once per
process per cause: a frequency-scaling governor other than ``performance``, a
debug build of the code being timed, too few samples for the requested
confidence. Silence them all with
``warnings.simplefilter("ignore", opbench.BenchmarkWarning)``.

Example:
    >>> from opbench import environment
    >>> env = environment.collect()
    >>> env["cpu_count"] >= 1
    True
"""
from __future__ import annotations

import glob
import math
import os
import platform
import socket
import sys
import warnings
from typing import Any

__all__ = ["BenchmarkWarning", "collect", "check_machine", "warn_once", "warn_too_few_samples"]

_GOVERNOR_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"


class BenchmarkWarning(UserWarning):
    """A condition that makes timings unreliable (see ``opbench.environment``)."""


# Causes already warned about in this process: one warning per cause, or a
# benchmark loop would bury the output in copies of it.
_warned: set[str] = set()


def warn_once(key: str, message: str, stacklevel: int = 3) -> bool:
    """Issues ``message`` as a BenchmarkWarning unless ``key`` was warned about before.

    Returns True when it warned.
    """
    if key in _warned:
        return False
    _warned.add(key)
    warnings.warn(message, BenchmarkWarning, stacklevel=stacklevel)
    return True


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
    import opbench  # late: environment is imported while opbench initialises

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
        "opbench": getattr(opbench, "__version__", None),
    }
    clock = opbench._C.clock_info()
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
_governors_checked: set[str] = set()


def check_machine() -> None:
    """Warns (once per process each) about a governor other than ``performance``
    and about debug builds of the code being timed."""
    if _GOVERNOR_GLOB not in _governors_checked:
        _governors_checked.add(_GOVERNOR_GLOB)
        _check_governors()
    debug = _debug_builds()
    if debug:
        warn_once(
            "debug-build",
            f"timing a debug build ({', '.join(debug)}): unoptimised code runs at a "
            "different speed and in different proportions; measure a release build.",
        )


def _check_governors() -> None:
    others = sorted(g for g in governors() if g != "performance")
    if others:
        warn_once(
            "governor",
            f"CPU frequency scaling governor is {'/'.join(others)}, not 'performance': "
            "clock speed changes under load and skews timings. Fix: "
            "`sudo cpupower frequency-set -g performance` (or write 'performance' to "
            "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor).",
        )


def warn_too_few_samples(n: int, confidence: float) -> None:
    """Warns (once per process) that ``n`` samples cannot bound a median at ``confidence``."""
    # The widest order-statistic interval, min to max, covers the median with
    # probability 1 - 2 * 0.5**n: the smallest n where that reaches `confidence`.
    needed = math.ceil(math.log2(2 / (1 - confidence))) if confidence < 1 else math.inf
    warn_once(
        "too-few-samples",
        f"too few samples ({n}) for a {confidence:.0%} confidence interval of the median: "
        f"it needs at least {needed}. Measure longer, e.g. "
        "Timer.blocked_autorange(min_run_time=...) or a noise-targeted run (converge).",
    )
