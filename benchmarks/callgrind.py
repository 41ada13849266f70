"""collect_callgrind: opbench vs torch.utils.benchmark, side by side in one run.

Prints the wall time of ``collect_callgrind(number=100)`` for a torch statement
and a pure-Python statement under both libraries, with ratios, and the CPU time
of the valgrind children (the bar, opbench at most a third of torch's time on
the torch statement, is judged on CPU time: on a shared machine wall time
mostly measures the neighbours). Then the spread of denoised counts over 10
repeats of ``x += 1`` (bar: at most 0.05%).

    python benchmarks/callgrind.py           # full comparison (a few minutes)
    python benchmarks/callgrind.py --quick   # opbench only, pure Python, seconds
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import opbench
from opbench.callgrind.collect import callgrind_unavailable_reason

CASES = {
    "torch: x + 1": ("x + 1", "x = torch.ones(4)"),
    "python: y = x + 1": ("y = x + 1", "x = 1"),
}
STABILITY = ("x += 1", "x = torch.ones((1,))")


def _torch_timer(stmt: str, setup: str):
    import torch.utils.benchmark as tb

    return tb.Timer(stmt, setup=setup)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(fn, attempts: int = 1):
    """(wall s, children's CPU s, result) of the first successful call. torch's
    collection checks its child through `callgrind_control`, which fails now and
    then: torch gets retries."""
    for attempt in range(1, attempts + 1):
        start, cpu = time.perf_counter(), _children_cpu()
        try:
            result = fn()
        except Exception as e:
            if attempt == attempts:
                raise
            why = f"{type(e).__name__}: {str(e).strip()[:200]}"
            print(f"  (attempt {attempt} failed, retrying: {why})")
            continue
        return time.perf_counter() - start, _children_cpu() - cpu, result
    raise AssertionError("unreachable")


def _spread(stats) -> tuple[float, list[int]]:
    counts = [s.counts(denoise=True) for s in stats]
    return (max(counts) - min(counts)) / min(counts) * 100, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="opbench only, pure Python, few repeats")
    args = parser.parse_args()

    reason = callgrind_unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    # torch's collect_callgrind runs `python` from PATH, so it fails in a venv that
    # is not on PATH; give it ours so the comparison can run at all.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

    if args.quick:
        stmt, setup = CASES["python: y = x + 1"]
        seconds, _, stats = _timed(lambda: opbench.Timer(stmt, setup=setup).collect_callgrind(
            number=100, repeats=3))
        spread, counts = _spread(stats)
        print(f"opbench collect_callgrind(number=100, repeats=3) of `{stmt}`: {seconds:.2f} s; "
              f"denoised counts {counts}, spread {spread:.4f}%")
        return 0

    failures = []
    print(f"{'statement':<20}{'wall s: torch':>14}{'opbench':>9}{'ratio':>7}"
          f"{'CPU s: torch':>14}{'opbench':>9}{'ratio':>7}")
    for name, (stmt, setup) in CASES.items():
        t_s, t_cpu, _ = _timed(
            lambda: _torch_timer(stmt, setup).collect_callgrind(number=100), attempts=3)
        o_s, o_cpu, _ = _timed(
            lambda: opbench.Timer(stmt, setup=setup).collect_callgrind(number=100))
        print(f"{name:<20}{t_s:>14.2f}{o_s:>9.2f}{o_s / t_s:>7.3f}"
              f"{t_cpu:>14.2f}{o_cpu:>9.2f}{o_cpu / t_cpu:>7.3f}")
        if name.startswith("torch") and o_cpu > t_cpu / 3:
            failures.append(f"{name}: opbench used {o_cpu / t_cpu:.2f} of torch's CPU time "
                            "(bar: 1/3)")

    stmt, setup = STABILITY
    print(f"\nspread of denoised counts, 10 repeats of `{stmt}` ({setup}), number=1000:")
    libs = (("torch", _torch_timer, 3), ("opbench", lambda s, u: opbench.Timer(s, setup=u), 1))
    for lib, make, attempts in libs:
        seconds, _, stats = _timed(
            lambda: make(stmt, setup).collect_callgrind(number=1000, repeats=10), attempts)
        spread, counts = _spread(stats)
        print(f"  {lib:<8} spread {spread:.4f}%  ({seconds:.1f} s)  counts {counts}")
        if lib == "opbench" and spread > 0.05:
            failures.append(f"opbench spread {spread:.4f}% > 0.05%")

    for f in failures:
        print("BAR MISSED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
