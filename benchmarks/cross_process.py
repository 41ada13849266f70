"""Do instruction counts of unchanged code agree between processes?

The instruction gate (``--opbench-mode=instructions --opbench-fail-above 0.5%``)
promises that a 1% change is caught and an unchanged function never called
changed: that rests on counts agreeing between two sessions, not only between
the repeats of one. Each process here is fresh and started as differently as
a CI runner might start it: another working directory (its length moves every
path string, ``sys.path`` included) and an environment 3 to 15 KB larger
(which shifts the stack and every allocation start-up makes).

Counted in each process (opbench):

* an allocating Python function (a loop of int additions past the small-int
  cache: a new int per step), a non-allocating one, and a torch statement
  (``torch.softmax`` of a 32x64 tensor), by the pytest plugin in instruction
  mode, the gate's own path;
* a C++ statement, by ``Timer.collect_callgrind`` (C++ is counted by
  collect_callgrind's worker, as ``opbench timeit --callgrind`` counts).

The peer (without ``--quick``): torch's ``Timer.collect_callgrind`` of the same
torch statement and allocating function (as strings), one fresh process each,
denoised and baseline-subtracted as torch's ``counts(denoise=True)`` allows.

Prints, per statement, the instructions per run of each process and the spread
``(max - min) / median`` between processes. Usage:
``python benchmarks/cross_process.py [--quick] [--processes N]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from opbench.integrations.pytest_plugin.options import load_args

SUITE = textwrap.dedent("""
    import torch

    def allocating():
        total = 0
        for i in range(300):
            total += i
        return total

    def not_allocating():
        x = 0
        for _ in range(50):
            x = x and 1
        return x

    X = torch.ones(32, 64)

    def test_allocating(opbench):
        opbench(allocating)

    def test_not_allocating(opbench):
        opbench(not_allocating)

    def test_torch(opbench):
        opbench("torch.softmax(x, -1)", globals={"x": X})
""")
CPP = "auto v = std::vector<int>(64, 1); opbench::do_not_optimize(v.data());"
ROWS = {"test_suite.py::test_allocating": "Python, allocating",
        "test_suite.py::test_not_allocating": "Python, not allocating",
        "test_suite.py::test_torch": "torch.softmax(x, -1)", "cpp": "C++ std::vector"}

_CPP_COUNT = textwrap.dedent("""
    import sys
    import opbench
    t = opbench.Timer(sys.argv[1], global_setup="#include <vector>", language="c++", name="cpp")
    opbench.save([t.collect_callgrind(number=100, repeats=3)], sys.argv[2])
""")
_TORCH_PEER = textwrap.dedent("""
    import json, sys
    import torch
    import torch.utils.benchmark as tb
    stmt, setup = sys.argv[1], sys.argv[2]
    stats = tb.Timer(stmt, setup=setup).collect_callgrind(number=100)
    print(json.dumps((stats.counts(denoise=True) - stats.baseline_exclusive_stats.denoise().sum())
                     / 100))
""")
_PEER_STATEMENTS = {
    "Python, allocating": ("total = 0\nfor i in range(300):\n    total += i", "pass"),
    "torch.softmax(x, -1)": ("torch.softmax(x, -1)", "import torch\nx = torch.ones(32, 64)"),
}


def _place(root: str, k: int) -> tuple[str, dict[str, str]]:
    """Process ``k``'s working directory (a name of 7k letters) and environment (3k KB
    of padding more than this one's)."""
    folder = os.path.join(root, "d" * (7 * k) + f"_{k}")
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, OPBENCH_CROSS_PROCESS_PAD="x" * (3000 * k))
    env.pop("PYTEST_ADDOPTS", None)
    return folder, env


def _opbench_process(root: str, k: int) -> dict[str, float]:
    folder, env = _place(root, k)
    with open(os.path.join(folder, "test_suite.py"), "w") as f:
        f.write(SUITE)
    out = os.path.join(folder, "counts.json")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *load_args(), "--opbench-mode=instructions", "--opbench-save",
                           out, "test_suite.py"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"pytest failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    cpp = os.path.join(folder, "cpp.json")
    done = subprocess.run([sys.executable, "-c", _CPP_COUNT, CPP, cpp], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"collect_callgrind failed:\n{done.stderr[-3000:]}")
    from opbench.core import identity
    from opbench.store.results import load

    counts = [*load(out).instructions, *load(cpp).instructions]
    return {ROWS[identity.key(c)]: c.per_run for c in counts}


def _peer_process(root: str, k: int, stmt: str, setup: str) -> float:
    folder, env = _place(root, k)
    # torch's collect_callgrind starts `python` from PATH: this interpreter's.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    done = subprocess.run([sys.executable, "-c", _TORCH_PEER, stmt, setup], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"torch's collect_callgrind failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def spread(values: list[float]) -> float:
    """``(max - min) / median``: how far apart the processes' counts lie."""
    return (max(values) - min(values)) / statistics.median(values)


def measure(processes: int, peer: bool = False) -> dict[str, dict[str, list[float]]]:
    """Counts per run of each statement in ``processes`` fresh processes: {"opbench":
    {row: [count, ...]}, "torch": {...}} (torch only with ``peer``)."""
    out: dict[str, dict[str, list[float]]] = {"opbench": {}, "torch": {}}
    with tempfile.TemporaryDirectory(prefix="opbench_cross_process_") as root:
        for k in range(1, processes + 1):
            for row, value in _opbench_process(root, k).items():
                out["opbench"].setdefault(row, []).append(value)
            print(f"process {k}: " + ", ".join(f"{row} {values[-1]:,.1f}"
                                              for row, values in out["opbench"].items()),
                  flush=True)
            if peer:
                for row, (stmt, setup) in _PEER_STATEMENTS.items():
                    out["torch"].setdefault(row, []).append(_peer_process(root, k, stmt, setup))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one process, no peer (a smoke run)")
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--no-peer", action="store_true", help="opbench alone")
    args = parser.parse_args()
    processes = 1 if args.quick else args.processes
    found = measure(processes, peer=not (args.quick or args.no_peer))
    print(f"Instructions per run in {processes} fresh processes (working directories of "
          "7 to 35 letters, environments 3 to 15 KB larger); spread = (max - min) / median")
    print(f"{'statement':<24} {'tool':<8} {'spread':>8}  per run, each process")
    for tool, rows in found.items():
        for row, values in rows.items():
            print(f"{row:<24} {tool:<8} {spread(values):>8.4%}  "
                  + ", ".join(f"{v:,.1f}" for v in values))


if __name__ == "__main__":
    main()
