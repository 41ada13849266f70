"""``opbench check [--seconds S]``: is this machine quiet enough to measure on, and if not, why?

Watches the machine for a moment (``--seconds``, default 1) and reports what
makes figures move, each with what to change (as ``pyperf system show`` does
for its part):

* the CPUs this process may use, and the ones other processes kept busy
  meanwhile, with the processes that used the most CPU;
* how fast this core ran against the fastest it ran during the check (a
  busy hyperthread sibling or another virtual machine slows it with nothing
  to see in the process list), and the hypervisor's steal;
* the load average and the kernel's CPU pressure (``/proc/pressure/cpu``);
* settings: the frequency governor, turbo, hyperthread siblings, isolated
  CPUs, whether this is a virtual machine.

Measurements flag what the busy machine disturbed on their own
(``Measurement.disturbed``, ``(busy)`` in tables); this command says up front.

Examples:
    opbench check
    opbench check --seconds 5

Exit status: 0 when nothing was found busy, 1 when other work held CPUs or
slowed this core during the check (settings alone do not fail it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from opbench.integrations.cli import UsageError, command_parser

# Other processes keeping this much of a CPU busy count as load.
_BUSY_CPUS = 0.25
# This core running this much slower than its best during the check counts as slowed.
_SLOWED = 1.25
_TOP = 5


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "check",
                       "is this machine quiet enough to measure on? (load, settings, fixes)",
                       __doc__)
    p.add_argument("--seconds", type=float, default=1.0, metavar="S",
                   help="how long to watch the machine (default 1)")
    return p


def _watch(seconds: float) -> tuple[list[int], dict[int, tuple[str, float]], dict[int, tuple[str, float]]]:
    """The speed probe's readings over ``seconds`` and the processes' CPU times around them."""
    from opbench import _C, environment

    before = environment.process_cpu_times()
    speeds = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        speeds.append(int(_C.cpu_speed_probe_ns(3, 1000)))
        time.sleep(0.01)
    return speeds, before, environment.process_cpu_times()


def _busiest(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
             seconds: float) -> list[tuple[float, int, str]]:
    me = os.getpid()
    used = [((after[pid][1] - t) / seconds, pid, name) for pid, (name, t) in before.items()
            if pid in after and pid != me]
    return sorted((u for u in used if u[0] >= 0.01), reverse=True)[:_TOP]


def _pressure() -> str | None:
    try:
        with open("/proc/pressure/cpu", encoding="utf-8") as f:
            some = f.readline().split()
    except OSError:
        return None
    return next((v.split("=", 1)[1] for v in some if v.startswith("avg10=")), None)


def run(args: argparse.Namespace) -> int:
    from opbench import environment

    if not 0 < args.seconds <= 600:
        raise UsageError(f"--seconds must be in (0, 600], got {args.seconds}")
    start = environment.cpu_snapshot()
    speeds, before, after = _watch(args.seconds)
    end = environment.cpu_snapshot()
    cpus = environment.allowed_cpus()
    busy, fixes = False, []
    print(f"CPUs: {os.cpu_count()} on this machine, {cpus} usable by this process"
          + (" (a virtual machine)" if environment.hypervisor() else ""))

    others = steal = None
    if start is not None and end is not None:
        others, steal = end.others_since(start), end.steal_since(start)
    if others is not None:
        print(f"Load: other processes kept {others:.2f} CPUs busy during the {args.seconds:g} s "
              f"check ({max(cpus - others, 0):.2f} free); load average "
              f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}"
              + (f"; CPU pressure {_pressure()}% (avg10)" if _pressure() is not None else ""))
        if others >= _BUSY_CPUS:
            busy = True
            fixes.append("Other processes are using the CPUs: stop them, or measure where "
                         "nothing else runs (figures they disturb are marked (busy)).")
    for share, pid, name in _busiest(before, after, args.seconds):
        print(f"  {share:5.0%} of a CPU  pid {pid:<7d} {name}")

    if len(speeds) >= 2:
        slowdown = statistics.median(speeds) / min(speeds)
        print(f"Core speed: {slowdown:.2f}x slower at the median than at its best during the "
              f"check ({min(speeds)} ns for the probe's fixed work at best)")
        if slowdown >= _SLOWED:
            busy = True
            fixes.append("This core ran slower than it can: its hyperthread sibling (in a "
                         "virtual machine, maybe another guest's) or heat slows it. Keep the "
                         "sibling idle, or measure on a machine with SMT off.")
    if steal is not None and steal >= 0.02:
        print(f"Steal: the hypervisor gave {steal:.0%} of CPU time to other guests")
        busy = True
        fixes.append("The hypervisor is running other guests on these CPUs: a dedicated "
                     "(bare-metal or pinned) machine gives steadier figures.")

    governors = environment.governors()
    if governors:
        print("Governor: " + ", ".join(f"{g} ({n} CPUs)" for g, n in sorted(governors.items())))
        if set(governors) - {"performance"}:
            fixes.append("Set the governor to performance: sudo cpupower frequency-set -g "
                         "performance")
    turbo = environment.turbo()
    if turbo is not None:
        print(f"Turbo: {'on' if turbo else 'off'}")
        if turbo:
            fixes.append("Turbo makes the clock depend on temperature and load: switch it off "
                         "for steadier figures (pyperf system tune does).")
    siblings = environment.smt_siblings()
    print("Hyperthreads: " + ("; ".join(",".join(map(str, g)) for g in siblings)
                              + " share cores" if siblings else "none shown"))
    isolated = environment.isolated_cpus()
    print("Isolated CPUs: " + (",".join(map(str, isolated)) if isolated else "none"))

    print()
    if not fixes:
        print("Nothing found that moves figures: measure away.")
    for fix in fixes:
        print(f"- {fix}")
    return 1 if busy else 0
