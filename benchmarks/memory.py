"""Memory per call (Timer.memory) against independent counts: memray (native mode), valgrind's
DHAT, tracemalloc, known figures, and the fake CUDA driver.

Checks, each printed with its target:

1. **Counts.** Per case, opbench's figures per call against an independent tool's:
   memray (``native_traces=True``, ``trace_python_allocators=True``) for allocations and
   bytes, Python and native; DHAT for the C++ statements' native heap (the program
   points under the statement's own frames); tracemalloc for Python objects' peak and net growth; known
   figures for the C++ statements and the leaks. Target: equal, or within 1% where the
   tools count differently (the reason printed beside the row).
2. **Repeatable.** The same counts in five fresh processes (each one started with the
   allocation counter, as Timer.memory's child is).
3. **The gate.** One extra allocation per call (``ys = xs[:]`` against ``ys = xs[:]; zs
   = [0]``) caught by ``opbench.gate.compare`` in 20 of 20 runs, each side counted in a
   fresh child by ``Timer.memory``; no false alarm in 20 runs of the same code.
4. **Session cost.** A pytest session of benchmarks in memory mode (the whole session
   re-run with the counter preloaded) against the same session in time mode, sides
   alternated: target at most 3x.
5. **CUDA** on the fake driver (tests/fake_cuda): a caching allocator's statistics, as
   ``torch.cuda.memory_stats`` gives them, against the driver's own count of device
   allocations.
6. **Cost of the counter** (why a preloaded library): a malloc-heavy loop plain, with
   the counter preloaded and idle, counting, and under memray.

    python benchmarks/memory.py           # everything (a few minutes)
    python benchmarks/memory.py --quick   # small numbers, two processes, 3 gate runs
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import opbench
from opbench import gate
from opbench.memory import counter

ROOT = Path(__file__).resolve().parents[1]
TORCH_SETUP = "a = torch.ones(1000); b = torch.ones(1000); c = torch.empty(1000)"


@dataclasses.dataclass(frozen=True)
class Case:
    stmt: str
    setup: str = "pass"
    language: str = "python"
    tools: tuple[str, ...] = ()
    known: tuple[tuple[str, str, float], ...] = ()  # (source, figure, value per call)
    compare_peak: bool = True  # False for a leak: its peak is its growth, compared already


CASES = {
    "python: dict of 20 ints": Case("f()", "def f():\n    return {i: i * 1000 for i in range(20)}",
                                    tools=("memray", "tracemalloc")),
    "torch: add": Case("torch.add(a, b)", TORCH_SETUP, tools=("memray",)),
    "torch: add, out=": Case("torch.add(a, b, out=c)", TORCH_SETUP, tools=("memray",)),
    "torch: add_ (in place)": Case("c.add_(a)", TORCH_SETUP, tools=("memray",)),
    "C++: 3 news a call": Case(
        "for (int i = 0; i < 3; ++i) { auto* p = new std::int64_t[4]; "
        "opbench::do_not_optimize(p); delete[] p; }", "", language="c++", tools=("dhat",),
        known=(("native", "allocations", 3), ("native", "bytes", 96))),
    "leak: C++ new char[100]": Case("opbench::do_not_optimize(new char[100]);", "", language="c++",
                                    tools=("dhat",), known=(("native", "growth", 100),)),
    "leak: Python bytearray(100) kept": Case(
        "store[next(keys)] = bytearray(100)",
        # Keys from 1000: every call makes an int (small ints are cached), the same work
        # whatever the number of calls before it.
        "store = [None] * 10**6\nkeys = iter(range(1000, 10**6))", tools=("memray", "tracemalloc"),
        known=(("python", "growth", sys.getsizeof(bytearray(100))),), compare_peak=False),
}


def _timer(case: Case) -> opbench.Timer:
    return opbench.Timer(case.stmt, case.setup, language=case.language)


def _loop(fn: Any, calls: Any) -> None:
    for _ in calls:
        fn()


def _callable(case: Case) -> Any:
    """The statement as a callable, setup run (the tools' side: no opbench machinery)."""
    return _timer(case).engine.as_callable()


# -- the children: each prints a JSON object on its last line ------------------------------

def _opbench_child(names: list[str], number: int) -> dict[str, Any]:
    """In a process started with the counter: Timer.memory counts in place."""
    assert counter.preloaded(), "the opbench child must be started with the counter"
    out = {}
    for name in names:
        c = _timer(CASES[name]).memory(number, repeats=3)
        out[name] = {s: {f: list(v) for f, v in d.items()} for s, d in c.counts.items()}
    return out


_MEMRAY_PYTHON = ("PYMALLOC_MALLOC", "PYMALLOC_CALLOC", "PYMALLOC_REALLOC")
# CPython's functions that report calls to a profile function, and what they make: a frame
# object (and its line table) per Python call, a bound method per C method call. Objects
# made by these alone, right under a tracing frame, exist only because memray installed
# a profile hook. (The traced calls themselves run under those frames too.)
_TRACING = ("call_trace", "call_trace_protected", "trace_call_function")
_FOR_TRACING = frozenset({"gc_alloc", "_PyObject_GC_New", "_PyObject_GC_NewVar",
                          "_PyFrame_New_NoTrack", "_PyFrame_MakeAndSetFrameObject",
                          "_PyFrame_GetFrameObject", "_PyCode_CreateLineArray",
                          "_PyCode_InitLineArray", "PyCMethod_New"})


def _made_for_tracing(stack: list[str]) -> bool:
    first = next((i for i, name in enumerate(stack) if name in _TRACING), None)
    return first is not None and all(name in _FOR_TRACING for name in stack[:first])


def _memray_window(fn: Any, n: int) -> collections.Counter[str]:
    import memray

    folder = tempfile.mkdtemp(prefix="opbench_memray_")
    path = os.path.join(folder, "capture.bin")
    calls = itertools.repeat(None, n)
    gc.collect()
    gc.disable()
    try:
        with memray.Tracker(path, native_traces=True, trace_python_allocators=True):
            _loop(fn, calls)
    finally:
        gc.enable()
    tally: collections.Counter[str] = collections.Counter(dict.fromkeys(
        ("python allocations", "python bytes", "native allocations", "native bytes"), 0))
    for r in memray.FileReader(path).get_allocation_records():
        kind = memray.AllocatorType(r.allocator).name
        if "FREE" in kind or kind.startswith("MUNMAP") or kind == "MMAP":
            continue
        if _made_for_tracing([frame[0] for frame in r.native_stack_trace()]):
            continue
        source = "python" if kind in _MEMRAY_PYTHON else "native"
        tally[f"{source} allocations"] += r.n_allocations
        tally[f"{source} bytes"] += r.size
    shutil.rmtree(folder, ignore_errors=True)
    return tally


def _memray_child(names: list[str], number: int) -> dict[str, Any]:
    """memray's counts per call: a window of 2n calls less one of n (as opbench's)."""
    out = {}
    for name in names:
        fn = _callable(CASES[name])
        _loop(fn, itertools.repeat(None, number))
        short, long = _memray_window(fn, number), _memray_window(fn, 2 * number)
        out[name] = {k: (long[k] - short[k]) / number for k in short}
    return out


def _tracemalloc_window(fn: Any, n: int) -> tuple[int, int]:
    """tracemalloc's (peak above the level the calls end at, level after a collection) over
    ``n`` calls, after a collection and 10
    settling calls (opbench's window), read only after the calls: reading builds a tuple
    and ints, which would move CPython's freelists inside the window."""
    import functools
    import tracemalloc

    settle = functools.partial(_loop, fn, itertools.repeat(None, min(n, 10)))
    calls = functools.partial(_loop, fn, itertools.repeat(None, n))
    tracemalloc.start()
    gc.collect()
    gc.disable()
    try:
        settle()
        tracemalloc.reset_peak()
        calls()
        level, peak = tracemalloc.get_traced_memory()  # what the calls left, freelists too
    finally:
        gc.enable()
    gc.collect()  # the garbage they left (cycles), and CPython's freelists
    end = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()  # its next start traces afresh: levels are per window
    return peak - level, end


def _tracemalloc_child(names: list[str], number: int) -> dict[str, Any]:
    """tracemalloc's net growth per call (a window of 2n calls less one of n, as opbench's)
    and, for a statement that keeps nothing, its peak above the level its calls start and
    end at."""
    out = {}
    for name in names:
        fn = _callable(CASES[name])
        _loop(fn, itertools.repeat(None, number))
        (peak, short), (_, long) = _tracemalloc_window(fn, number), _tracemalloc_window(fn, 2 * number)
        out[name] = {"python growth": (long - short) / number}
        if CASES[name].compare_peak:
            out[name]["python peak"] = peak
    return out


def _dhat_driver(names: list[str], number: int) -> dict[str, Any]:
    """Run under DHAT: each C++ statement's compiled loop ``number`` times; the markers that
    pick its program points (its loop's frame, in its own library)."""
    import ctypes

    from opbench.engines.cpp.engine import _Library

    markers = {}
    for name in names:
        path = _timer(CASES[name]).engine.library_path()
        lib = _Library(path)
        session, elapsed = lib.open(), ctypes.c_int64(0)
        assert lib.run(session, number, ctypes.byref(elapsed)) == 0
        markers[name] = ["opbench_body_", f"in {path}"]  # the loop, not the session
    return markers


def _child_main(tool: str, names: list[str], number: int) -> None:
    run = {"opbench": _opbench_child, "memray": _memray_child, "tracemalloc": _tracemalloc_child,
           "dhat": _dhat_driver}[tool]
    print(json.dumps(run(names, number)))


def _child(tool: str, names: list[str], number: int, *, preload: bool = False,
           prefix: tuple[str, ...] = ()) -> Any:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, sys.path)))
    if preload:
        env = counter.preload_env(env)
    proc = subprocess.run([*prefix, sys.executable, __file__, "--tool", tool, "--number",
                           str(number), "--cases", json.dumps(names)], env=env,
                          capture_output=True, text=True, check=False, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"the {tool} child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _dhat(names: list[str], number: int) -> dict[str, dict[str, float]]:
    """DHAT's native figures per call: the program points under each statement's marker."""
    with tempfile.TemporaryDirectory(prefix="opbench_dhat_") as folder:
        out_file = os.path.join(folder, "dhat.json")
        markers = _child("dhat", names, number, prefix=(
            "valgrind", "--tool=dhat", "--num-callers=40", f"--dhat-out-file={out_file}"))
        with open(out_file) as f:
            profile = json.load(f)
    frames = profile["ftbl"]
    found = {}
    for name, marker in markers.items():
        pps = [pp for pp in profile["pps"]
               if any(all(m in frames[i] for m in marker) for i in pp["fs"])]
        found[name] = {"native allocations": sum(pp["tbk"] for pp in pps) / number,
                       "native bytes": sum(pp["tb"] for pp in pps) / number,
                       "native growth": sum(pp["eb"] for pp in pps) / number}
    return found


# -- 1 and 2: counts, and five fresh processes -------------------------------------------------

def _per_call(counts: dict[str, Any], source: str, figure: str, number: int) -> float:
    values = counts[source][figure]
    return values[0] if figure == "peak" else values[0] / number


def _counts(names: list[str], number: int, processes: int
            ) -> tuple[list[tuple[str, ...]], bool, bool]:
    for name in names:  # compile the C++ cases once, here
        if CASES[name].language == "c++":
            _timer(CASES[name]).engine.prepare()
    runs = [_child("opbench", names, number, preload=True) for _ in range(processes)]
    repeatable = all(run == runs[0] for run in runs[1:])
    ours = runs[0]
    theirs: dict[str, dict[str, dict[str, float]]] = collections.defaultdict(dict)
    memray_cases = [n for n in names if "memray" in CASES[n].tools]
    if importlib.util.find_spec("memray") is None:
        print("memray is not installed (pip install memray): its counts are left out")
        memray_cases = []
    if memray_cases:
        for name, figures in _child("memray", memray_cases, number).items():
            theirs["memray"][name] = figures
    tracemalloc_cases = [n for n in names if "tracemalloc" in CASES[n].tools]
    if tracemalloc_cases:
        theirs["tracemalloc"] = _child("tracemalloc", tracemalloc_cases, number)
    dhat_cases = [n for n in names if "dhat" in CASES[n].tools]
    if dhat_cases and shutil.which("valgrind"):
        theirs["DHAT"] = _dhat(dhat_cases, number)
    rows, ok = [], True
    for name in names:
        checks = [("known", source, figure, value) for source, figure, value in CASES[name].known]
        for tool, by_case in theirs.items():
            for key, value in by_case.get(name, {}).items():
                source, figure = key.split(" ", 1)
                checks.append((tool, source, figure, value))
        for tool, source, figure, value in checks:
            mine = _per_call(ours[name], source, figure, number)
            match = mine == value or (value and abs(mine - value) / abs(value) <= 0.01)
            ok &= bool(match)
            rows.append((name, f"{source} {figure}", _fmt(mine), _fmt(value), tool,
                         "equal" if mine == value else "within 1%" if match else "DIFFERS"))
    return rows, repeatable, ok


HOW_TOOLS_COUNT = """\
How each tool was made to count what opbench counts (figures per call):
  memray: a window of 2n calls less one of n, as opbench's; objects CPython makes only to
    report calls to memray's profile hook (a frame object per Python call, a bound method
    per C method call: made right under call_trace / trace_call_function) are left out by
    their stack.
  DHAT: each C++ statement's compiled loop run n times under valgrind; the program points
    whose stack holds the loop's frame in the statement's own library. (torch under DHAT
    is out of reach here: loading libtorch under DHAT had not finished its static
    initialisers after 15 minutes; memray is the torch ops' independent count.)
  tracemalloc: Python objects' net growth (2n calls less n) and, for the statement that
    keeps nothing, their peak over n calls (after a collection and 10 settling calls)
    above the level the calls start and end at, read after the calls."""


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


# -- 3: the gate -----------------------------------------------------------------------------

GATE_BASE = ("ys = xs[:]", "xs = list(range(50))")
GATE_HEAD = ("ys = xs[:]; zs = [0]", "xs = list(range(50))")  # the items of [0]: one more


def _gate_run(head: tuple[str, str]) -> bool:
    """Whether the gate fails: each side counted in a fresh child by Timer.memory."""
    base = opbench.Timer(GATE_BASE[0], GATE_BASE[1], name="copy").memory(50)
    new = opbench.Timer(head[0], head[1], name="copy").memory(50)
    return gate.compare([base], [new], threshold=0.05).exit_status != 0


# -- 4: a pytest session, memory mode against time mode --------------------------------------

SUITE = '''
import torch

A, B, C = torch.ones(1000), torch.ones(1000), torch.empty(1000)
XS = list(range(200))

def test_add(opbench):
    opbench(lambda: torch.add(A, B))

def test_add_out(opbench):
    opbench(lambda: torch.add(A, B, out=C))

def test_sorted(opbench):
    opbench(lambda: sorted(XS))

def test_dict(opbench):
    opbench(lambda: {i: i * 1000 for i in range(20)})
'''


def _session_seconds(folder: str, mode: str) -> float:
    start = time.perf_counter()
    from opbench.integrations.pytest_plugin.options import load_args

    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *load_args(), f"--opbench-mode={mode}", "test_suite.py"], cwd=folder,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the {mode} session failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return seconds


def _sessions(rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="opbench_memory_suite_") as folder:
        Path(folder, "test_suite.py").write_text(SUITE)
        times: dict[str, list[float]] = {"time": [], "memory": []}
        for r in range(rounds):  # sides alternated: the machine's drift lands on both
            for mode in (("time", "memory") if r % 2 == 0 else ("memory", "time")):
                times[mode].append(_session_seconds(folder, mode))
    return statistics.median(times["time"]), statistics.median(times["memory"])


# -- 5: CUDA on the fake driver --------------------------------------------------------------

FAKE_CUDA = """
import sys
sys.path.insert(0, {tests!r})
from fake_cuda import FakeCuda, library
from fake_cuda.allocator import CachingAllocator
from opbench.core.measurement import TaskSpec
from opbench.memory import counting

fake = FakeCuda(library())
fake.configure()
fake.set_current(0)
memory = CachingAllocator(fake)
memory.install()
kept = []
cases = {{"temporaries (4 KiB + 1 KiB)": lambda: (memory.allocate(4096), memory.allocate(1024)),
          "leak (512 B kept)": lambda: kept.append(memory.allocate(512))}}
out = {{}}
for name, fn in cases.items():
    before = fake.stat("allocs_live")
    c = counting.count(counting.python_calls(fn), number={number}, repeats=3,
                         task_spec=TaskSpec(name, "pass"), cuda=True)
    segments = fake.stat("allocs_live") - before
    out[name] = {{"counts": {{f: list(v) for f, v in c.counts["cuda"].items()}},
                 "driver": segments}}
print(json.dumps(out))
"""


def _fake_cuda(number: int) -> list[tuple[str, ...]]:
    env = counter.preload_env(dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, sys.path))))
    code = "import json\n" + FAKE_CUDA.format(tests=str(ROOT / "tests"), number=number)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False, cwd=ROOT)
    if proc.returncode != 0:
        return [("fake CUDA driver", f"unavailable: {proc.stderr.strip().splitlines()[-1]}")]
    rows = []
    for name, got in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        c = got["counts"]
        # Windows: a warm-up of `number`, then per repeat `number` and `2 * number`, each
        # after its 10 settling calls.
        calls = (10 + number) + 3 * (10 + number + 10 + 2 * number)
        per_call = c["device_allocations"][0] / number
        rows.append((name, f"{c['allocations'][0] / number:g} requests, "
                           f"{c['bytes'][0] / number:g} B, peak {c['peak'][0]} B, "
                           f"growth {c['growth'][0] / number:g} B, "
                           f"{per_call:g} device allocations a call",
                     f"driver: {got['driver']} cuMemAlloc in {calls} calls"))
    return rows


# -- 6: the counter's cost ---------------------------------------------------------------------

COST = """
import itertools, time, json, os, tempfile, torch
from opbench.memory import counter
a, b = torch.ones(1000), torch.ones(1000)
def f():
    torch.add(a, b)
calls = {calls}
def loop():
    start = time.perf_counter()
    for _ in itertools.repeat(None, calls):
        f()
    return (time.perf_counter() - start) / calls
loop()
if counter.preloaded():  # idle and counting, alternated: the machine's drift lands on both
    from opbench import _C
    counter.attach()
    def counting():
        _C.memory.begin()
        try:
            return loop()
        finally:
            _C.memory.stop()
    sides = {{"preloaded, idle": loop, "preloaded, counting": counting}}
else:  # plain and under memray, alternated
    import memray
    def tracked():
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        with memray.Tracker(path, native_traces=True, trace_python_allocators=True):
            return loop()
    sides = {{"plain": loop, "memray tracking": tracked}}
times = {{name: [] for name in sides}}
for _ in range(7):
    for name, side in sides.items():
        times[name].append(side())
print(json.dumps({{name: min(t) for name, t in times.items()}}))
"""


def _cost(calls: int) -> dict[str, float]:
    found: dict[str, float] = {}
    base = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, sys.path)))
    for env in (base, counter.preload_env(base)):
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(COST.format(calls=calls))],
                              env=env, capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            found.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return found


# -- the report ---------------------------------------------------------------------------------

def _table(header: list[str], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in [header, *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small numbers, two processes, 3 gate runs")
    parser.add_argument("--tool", help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    parser.add_argument("--number", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tool:
        _child_main(args.tool, json.loads(args.cases), args.number)
        return 0
    reason = counter.unavailable_reason()
    if reason is not None:
        print(f"memory counting is unavailable here: {reason}")
        return 0
    quick = args.quick
    number = 20 if quick else 100
    names = list(CASES)
    failed = []

    start = time.perf_counter()
    rows, repeatable, counts_ok = _counts(names, number, 2 if quick else 5)
    print(f"1. Memory per call, opbench (Timer.memory, {number} calls counted, 3 repeats) "
          "against independent counts")
    print(_table(["case", "figure", "opbench", "independent", "tool", "match"], rows))
    print(HOW_TOOLS_COUNT)
    if not counts_ok:
        failed.append("counts")
    processes = 2 if quick else 5
    print(f"\n2. Five fresh processes: {processes} processes, every case's counts "
          + ("identical in all" if repeatable else "DIFFER"))
    if not repeatable:
        failed.append("repeatability")

    runs = 3 if quick else 20
    caught = sum(_gate_run(GATE_HEAD) for _ in range(runs))
    alarms = sum(_gate_run(GATE_BASE) for _ in range(runs))
    print(f"\n3. The gate, one extra allocation per call (`{GATE_BASE[0]}` vs `{GATE_HEAD[0]}`), "
          f"each side a fresh child:\n   caught {caught} of {runs} runs; false alarms {alarms} of "
          f"{runs} runs of unchanged code (targets {runs}/{runs} and 0/{runs})")
    if caught != runs or alarms:
        failed.append("gate")

    time_s, memory_s = _sessions(1 if quick else 3)
    ratio = memory_s / time_s
    print(f"\n4. A pytest session of 4 benchmarks: time mode {time_s:.1f} s, memory mode "
          f"{memory_s:.1f} s (re-run with the counter included): {ratio:.2f}x (target at most 3x)")
    if ratio > 3 and not quick:
        failed.append("session cost")

    print("\n5. CUDA on the fake driver (tests/fake_cuda): a caching allocator's statistics, per call")
    print(_table(["statement", "opbench (cuda source)", "the driver's own count"],
                 _fake_cuda(number)))

    cost = _cost(2000 if quick else 20000)
    plain = cost.get("plain")
    print("\n6. The counter's cost: `torch.add(a, b)` on 1000 floats, seconds per call")
    print(_table(["process", "per call", "vs plain"],
                 [(k, f"{v * 1e6:.2f} us", f"{v / plain:.2f}x" if plain else "-")
                  for k, v in cost.items()]))
    print(f"\n{'all targets met' if not failed else 'MISSED: ' + ', '.join(failed)} "
          f"({time.perf_counter() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
