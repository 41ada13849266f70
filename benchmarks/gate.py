"""The regression gate, end to end: does it catch real regressions and stay quiet on none?

Each run saves a baseline of a small Python function (a loop of N additions)
and then runs the suite again with the function unchanged, 10% slower, 2x
slower (time mode) or 1% slower (instruction mode), recording whether the gate
failed the session. Every session is a real pytest run in a fresh process,
on the same statements for both tools:

* opbench: ``--opbench-save`` then ``--opbench-compare --opbench-fail-above 5%``
  (time mode), and ``--opbench-mode=instructions`` with a 0.5% threshold;
* pytest-benchmark: ``--benchmark-autosave`` then ``--benchmark-compare
  --benchmark-compare-fail=median:5%`` (it has no instruction mode).

"caught" counts failed sessions on a slower function (higher is better),
"false alarms" failed sessions on the unchanged one (lower is better). The
machine is shared and noisy; only the shares within one run of this script
mean anything. Where a difference comes from: opbench fails on a confidence
interval of the ratio (Hodges-Lehmann) beyond the threshold, so noise that
moves a median by more than 5% by chance does not fail it; pytest-benchmark
fails whenever the new median is 5% above the old one. Instruction counts
do not depend on load: their repeats agree to a few instructions here, so a
1% change stands far outside them.

Usage: python benchmarks/gate.py [--quick] [--runs N]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

from opbench.integrations.pytest_plugin.options import load_args

N = 3000  # loop length of the benchmarked function: tens of microseconds

SUITE = textwrap.dedent("""
    import os

    N = int(os.environ["GATE_N"])

    def work():
        total = 0
        for i in range(N):
            total += i
        return total

    def test_opbench(opbench):
        opbench(work)

    def test_pytest_benchmark(benchmark):
        benchmark(work)
""")


def _session(folder: str, n: int, *args: str) -> int:
    env = dict(os.environ, GATE_N=str(n))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *load_args(), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"pytest {' '.join(args)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.returncode


_PB = ("--benchmark-storage=pb", "--benchmark-disable-gc")


def _time_run(factors: dict[str, float]) -> dict[str, dict[str, bool]]:
    """One baseline and one session per factor; whether each tool failed each."""
    failed: dict[str, dict[str, bool]] = {"opbench": {}, "pytest-benchmark": {}}
    with tempfile.TemporaryDirectory(prefix="opbench_gate_") as folder:
        with open(os.path.join(folder, "test_gate.py"), "w") as f:
            f.write(SUITE)
        _session(folder, N, "--opbench-save", "base.json", "--benchmark-autosave", *_PB)
        for name, factor in factors.items():
            n = round(N * factor)
            failed["opbench"][name] = _session(
                folder, n, "-k", "test_opbench", "--opbench-compare", "base.json",
                "--opbench-fail-above", "5%") == 1
            failed["pytest-benchmark"][name] = _session(
                folder, n, "-k", "test_pytest_benchmark", "--benchmark-compare",
                "--benchmark-compare-fail=median:5%", *_PB) == 1
    return failed


def _instruction_run(factors: dict[str, float]) -> dict[str, bool]:
    with tempfile.TemporaryDirectory(prefix="opbench_gate_") as folder:
        with open(os.path.join(folder, "test_gate.py"), "w") as f:
            f.write(SUITE)
        common = ("-k", "test_opbench", "--opbench-mode=instructions")
        _session(folder, N, *common, "--opbench-save", "base.json")
        return {name: _session(folder, round(N * factor), *common, "--opbench-compare",
                               "base.json", "--opbench-fail-above", "0.5%") == 1
                for name, factor in factors.items()}


def _session_seconds(rounds: int) -> tuple[float, float]:
    """Wall seconds of one session of the whole suite (both tools' tests, as a user's
    suite would hold them) in time mode and in instruction mode: the least of
    ``rounds`` rounds, the modes alternated (a shared machine's load hits both)."""
    best = {"time": float("inf"), "instructions": float("inf")}
    with tempfile.TemporaryDirectory(prefix="opbench_gate_") as folder:
        with open(os.path.join(folder, "test_gate.py"), "w") as f:
            f.write(SUITE)
        for _ in range(rounds):
            for mode in best:
                start = time.perf_counter()
                _session(folder, N, f"--opbench-mode={mode}", *_PB)
                best[mode] = min(best[mode], time.perf_counter() - start)
    return best["time"], best["instructions"]


def _row(mode: str, tool: str, outcomes: list[dict[str, bool]], columns: list[str]) -> str:
    cells = []
    for column in columns:
        seen = [o[column] for o in outcomes if column in o]
        cells.append(f"{sum(seen)}/{len(seen)}" if seen else "-")
    return f"{mode:<13} {tool:<36} " + " ".join(f"{c:>13}" for c in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each (a smoke test)")
    parser.add_argument("--runs", type=int, default=20, help="runs of each mode (default 20)")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    time_factors = {"identical": 1.0, "+10%": 1.1, "2x": 2.0}
    instr_factors = {"identical": 1.0, "+1%": 1.01}
    if args.quick:
        time_factors = {"identical": 1.0, "2x": 2.0}

    start = time.perf_counter()
    timed = [_time_run(time_factors) for _ in range(runs)]
    time_seconds = time.perf_counter() - start
    counted: list[dict[str, bool]] = []
    instr_seconds = 0.0
    has_valgrind = shutil.which("valgrind") is not None
    if has_valgrind:
        start = time.perf_counter()
        counted = [_instruction_run(instr_factors) for _ in range(runs)]
        instr_seconds = time.perf_counter() - start

    columns = ["identical", "+1%", "+10%", "2x"]
    print(f"Regression gate on a {N}-addition loop, {runs} run(s) per mode; cells: failed "
          "sessions / sessions")
    print(f"{'mode':<13} {'tool':<36} " + " ".join(f"{c:>13}" for c in
                                                  ["false alarms", "+1% caught", "+10% caught",
                                                   "2x caught"]))
    print(_row("time", "opbench (--opbench-fail-above 5%)", [t["opbench"] for t in timed],
               columns))
    print(_row("time", "pytest-benchmark (median:5%)", [t["pytest-benchmark"] for t in timed],
               columns))
    if has_valgrind:
        print(_row("instructions", "opbench (--opbench-fail-above 0.5%)", counted, columns))
    else:
        print(f"{'instructions':<13} opbench: skipped, valgrind is not installed")
    print(f"\nwall time: time mode {time_seconds:.0f} s, instruction mode {instr_seconds:.0f} s")
    if has_valgrind:
        timed_s, counted_s = _session_seconds(1 if args.quick else 3)
        print(f"one session of the suite: time mode {timed_s:.1f} s, instruction mode "
              f"{counted_s:.1f} s: {counted_s / timed_s:.2f}x")


if __name__ == "__main__":
    main()
