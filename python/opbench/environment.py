"""What machine produced a result, and warnings that save users from bad numbers.

``collect()`` gathers the facts a results file should carry (CPU, governor,
Python, opbench, torch, CUDA, threads, host) cheaply: it never imports torch,
it only reports on a torch that this process already imported.

``cpu_snapshot()`` reads how busy the CPUs were (``/proc/stat``) and how much of
that was this process, so that ``opbench.core.disturbance`` can say how many CPUs
other processes held while a measurement ran.

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
import time
from pathlib import Path
from typing import Any, NamedTuple

from opbench import _C
from opbench._version import __version__
from opbench.errors import MachineWarning, SampleSizeWarning, WarningRecord, warn

__all__ = ["BASELINE_DIR_ENV", "CpuSnapshot", "allowed_cpus", "check_machine", "collect",
           "cpu_snapshot", "governors", "hypervisor", "isolated_cpus", "machine_id",
           "process_cpu_times", "project_root", "root_dir", "smt_siblings", "turbo",
           "warn_too_few_samples"]

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


def allowed_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), else every CPU."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class CpuSnapshot(NamedTuple):
    """Cumulative CPU time of the machine and of this process at one moment, in seconds.

    The difference of two snapshots says what the CPUs did in between: ``busy``
    (running anything: user, nice, system, interrupts), ``steal`` (a virtual
    machine's CPUs running another guest), ``total`` (every state, idle included)
    and ``own`` (this process, all its threads).
    """

    wall: float
    busy: float
    steal: float
    total: float
    own: float

    def others_since(self, earlier: CpuSnapshot) -> float | None:
        """CPUs that other processes kept busy, on average, since ``earlier``; None when
        too little time passed for ``/proc/stat``'s 10 ms ticks to say."""
        elapsed = self.wall - earlier.wall
        if elapsed < _MIN_USAGE_WINDOW_S:
            return None
        return max(0.0, ((self.busy - earlier.busy) - (self.own - earlier.own)) / elapsed)

    def steal_since(self, earlier: CpuSnapshot) -> float | None:
        """The fraction of CPU time the hypervisor gave to other guests since ``earlier``."""
        total = self.total - earlier.total
        if self.wall - earlier.wall < _MIN_USAGE_WINDOW_S or total <= 0:
            return None
        return max(0.0, (self.steal - earlier.steal) / total)


# /proc/stat counts in ticks of 1/CLK_TCK s (10 ms): over a shorter window the
# busy count is mostly rounding.
_MIN_USAGE_WINDOW_S = 0.25
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def cpu_snapshot() -> CpuSnapshot | None:
    """The machine's and this process's CPU time now; None where ``/proc/stat`` is not
    readable (not Linux).

    Example:
        >>> a = cpu_snapshot()
        >>> a is None or a.total >= a.busy >= 0
        True
    """
    text = _read("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    # user nice system idle iowait irq softirq steal guest guest_nice (guest time
    # is already inside user and nice).
    fields = [int(v) for v in text.split("\n", 1)[0].split()[1:9]]
    fields += [0] * (8 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    own = os.times()
    return CpuSnapshot(
        wall=time.monotonic(),
        busy=(user + nice + system + irq + softirq) * _TICK_S,
        steal=steal * _TICK_S,
        total=(user + nice + system + idle + iowait + irq + softirq + steal) * _TICK_S,
        own=own.user + own.system,
    )


def hypervisor() -> bool:
    """Whether this is a virtual machine (the CPU's ``hypervisor`` flag): its CPUs may
    share physical cores with other guests, whose load this guest cannot see."""
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("flags"):
            return " hypervisor" in f" {line.split(':', 1)[-1]} "
    return False


def smt_siblings() -> list[list[int]]:
    """Groups of CPUs that are hyperthreads of one core (only groups of two or more);
    empty where the topology is not shown or there is no SMT."""
    groups: set[tuple[int, ...]] = set()
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list"):
        cpus = _cpu_list(_read(path) or "")
        if len(cpus) > 1:
            groups.add(tuple(cpus))
    return [list(g) for g in sorted(groups)]


def isolated_cpus() -> list[int]:
    """CPUs the kernel keeps other work off (``isolcpus=``); empty when none."""
    return _cpu_list(_read("/sys/devices/system/cpu/isolated") or "")


def turbo() -> bool | None:
    """Whether the CPU may boost above its base clock (True), may not (False), or None
    where neither intel_pstate nor cpufreq says."""
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None and no_turbo.strip() in ("0", "1"):
        return no_turbo.strip() == "0"
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    if boost is not None and boost.strip() in ("0", "1"):
        return boost.strip() == "1"
    return None


def _cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]`` (the kernel's CPU list format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        if first.strip().isdigit():
            cpus.extend(range(int(first), int(last if last.strip().isdigit() else first) + 1))
    return cpus


def process_cpu_times() -> dict[int, tuple[str, float]]:
    """pid -> (command name, seconds of CPU it has used) for every process readable in
    ``/proc``; empty where there is no ``/proc``."""
    out: dict[int, tuple[str, float]] = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        text = _read(path)
        if not text or ")" not in text:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        try:
            out[int(path.split("/")[2])] = (name, (int(fields[11]) + int(fields[12])) * _TICK_S)
        except (IndexError, ValueError):
            continue
    return out


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
    """Where per-machine files live (baselines, ``opbench.core.peaks``): ``root``, else
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
