"""The fixed cost of a tiny op: eager against torch.compile, split by layer, against timeit.

``x + 1`` on ``x = torch.randn(10)`` does almost no arithmetic, so its time
is the framework's fixed overhead per call. ``opbench.analysis.compile.overheads``
measures the thread's table (rows eager / compiled; columns
``requires_grad=False``, ``requires_grad=True``, ``inference_mode``: per call,
first call, recompiles) and splits each compiled call by layer (Dynamo,
AOTAutograd, Inductor, kernels). The peer, for each cell, is the thread's own
method, ``timeit.repeat(call, number=1000)`` (median of the repeats, in µs per
call). The two alternate over several rounds on the same callable and each
keeps its least-disturbed round (a compiled call here ranges 25-57 µs within
one run under timeit, torch and opbench alike).

Printed: the table, the figures side by side (opbench / timeit per cell), the
split of each compiled cell, and two verdicts: every cell within 15% of
timeit's, and each split's layers within 10% of the compiled cell's figure.

    python benchmarks/compile_overhead.py                 # all cells, Inductor (about a minute)
    python benchmarks/compile_overhead.py --quick         # one cell pair, the "eager" backend: seconds
    python benchmarks/compile_overhead.py --profile       # with the cProfile view of each compiled call
    python benchmarks/compile_overhead.py --instructions  # and instruction counts (valgrind: minutes)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

CELL_TOLERANCE = 0.15


def add1(x: Any) -> Any:
    return x + 1


def _timeit_peer(repeat: int) -> Callable[[Callable[[], Any]], float]:
    def peer(call: Callable[[], Any]) -> float:
        # The thread: np.median(timeit.repeat(lambda: fn(x), number=1000, repeat=...)).
        return statistics.median(timeit.repeat(call, number=1000, repeat=repeat)) / 1000

    return peer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one column, the 'eager' backend (no Inductor: no split), short runs")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per cell (default 5)")
    parser.add_argument("--profile", action="store_true", help="add the cProfile views")
    parser.add_argument("--instructions", action="store_true",
                        help="add instructions per call of each cell and layer (valgrind; "
                             "about five minutes a column here)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: this benchmark needs torch (pip install torch)")
        return 0
    # torch.compile's inductor reads the compiler from PATH; the venv may not be on it.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    import opbench.analysis.compile

    options: dict[str, Any] = {"rounds": args.rounds, "min_run_time": 0.2, "max_run_time": 1.0,
                               "profile": args.profile, "instructions": args.instructions}
    if args.quick:
        options.update(columns=["requires_grad=False"], rounds=2, min_run_time=0.02,
                       max_run_time=0.1)
    result = opbench.analysis.compile.overheads(
        add1, torch.randn(10), backend="eager" if args.quick else args.backend,
        independent=_timeit_peer(5 if args.quick else 50), label="f(x) = x + 1, x = randn(10)",
        **options)
    print(result)

    ratios = [m.median / result.independent[(str(m.task_spec.sub_label),
                                              str(m.task_spec.description))] for m in result]
    within = sum(abs(r - 1) <= CELL_TOLERANCE for r in ratios)
    print(f"\ncells within {CELL_TOLERANCE:.0%} of timeit's figure: {within} of {len(ratios)} "
          f"(opbench / timeit from {min(ratios):.3f} to {max(ratios):.3f})")
    for column, split in result.splits.items():
        verdict = (f"skipped ({split.reason})" if split.reason else
                   f"layers sum to {split.sum_ratio:.3f} x the compiled cell "
                   f"({'within' if split.sum_agrees else 'NOT within'} 10%)")
        print(f"split, {column}: {verdict}")
    if args.quick:
        print("\n--quick: one column, backend 'eager' (Inductor compiles take tens of seconds "
              "here), so no split.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
