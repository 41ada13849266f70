"""Busy machines: does opbench flag the figures other work pushed up, and recover them?

Runs the demo's table (``python -m opbench demo``: batched dot, mul/sum against
bmm, sizes crossed, 1 and 2 threads) three ways, each after a quiet run of the
same table in the same process, the quiet figure of every cell being the
reference:

* ``quiet``: nothing else running (how often does opbench cry wolf?);
* ``constant``: spinning competitor processes, one per CPU, the whole table;
* ``bursty``: the same competitors, on for ``--burst`` seconds and off as long,
  with recovery on (cells still disturbed at the end are measured again).

For each way it prints how many cells are more than 1.5x off their quiet
figure, how many of those opbench flags (``Measurement.disturbed``), and how
two peers' rules flag the same blocks: torch.utils.benchmark's IQR warning
(IQR / median >= 10%, which opbench's ``Measurement.high_variance`` is) and
pyperf's ("the standard deviation is greater than 10% of the mean"). Then the
cells within 15% of their quiet figure, and the table's time against the quiet
table's. Targets (issue 33): constant load, every cell >1.5x off flagged; quiet,
at most 5% flagged; bursty with recovery, at least 90% within 15% in at most 2x
the quiet time.

    python benchmarks/busy.py            # the demo's sizes, 3 repetitions
    python benchmarks/busy.py --quick    # a smoke run
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import opbench
from opbench.integrations.cli.demo import timers

_SPIN = "while True: pass"


@contextlib.contextmanager
def competitors(n: int, burst: float | None) -> Iterator[None]:
    """``n`` spinning processes for the block's duration; with ``burst``, each runs
    ``burst`` seconds, then stops as long (SIGSTOP / SIGCONT), in step."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(n)]
    stop = threading.Event()

    def toggle() -> None:
        running = True
        while not stop.wait(burst):
            running = not running
            for p in procs:
                os.kill(p.pid, signal.SIGCONT if running else signal.SIGSTOP)

    toggler = threading.Thread(target=toggle, daemon=True) if burst else None
    if toggler is not None:
        toggler.start()
    try:
        time.sleep(0.2)  # let them start spinning
        yield
    finally:
        stop.set()
        if toggler is not None:
            toggler.join()
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


def table(sizes: list[int], threads: list[int], min_run_time: float,
          recover: bool) -> tuple[list[Any], float]:
    """The demo's table measured once; its results and its wall time."""
    start = time.perf_counter()
    results = opbench.run_all(timers(sizes, threads), min_run_time=min_run_time,
                              recover=recover, progress=False)
    return results, time.perf_counter() - start


def pyperf_unstable(m: Any) -> bool:
    """pyperf's rule: the standard deviation is more than 10% of the mean."""
    times = m.times
    return len(times) > 1 and statistics.stdev(times) > 0.1 * statistics.mean(times)


def judge(way: str, quiet: list[Any], quiet_s: float, busy: list[Any], busy_s: float) -> dict:
    ratios = [b.median / q.median for q, b in zip(quiet, busy)]
    off = [r > 1.5 for r in ratios]
    flagged = [b.disturbed for b in busy]
    return {
        "way": way, "cells": len(busy), "off": sum(off),
        "off_flagged": sum(o and f for o, f in zip(off, flagged)),
        "off_iqr": sum(o and b.high_variance for o, b in zip(off, busy)),
        "off_pyperf": sum(o and pyperf_unstable(b) for o, b in zip(off, busy)),
        "flagged": sum(flagged),
        "iqr": sum(b.high_variance for b in busy),
        "pyperf": sum(pyperf_unstable(b) for b in busy),
        "within15": sum(abs(r - 1) <= 0.15 for r in ratios),
        "time": busy_s / quiet_s,
        "worst": max(ratios),
        "remeasured": sum(bool((b.info.get("disturbance") or {}).get("remeasured")) for b in busy),
    }


def _key(m: Any) -> tuple[Any, ...]:
    spec = m.task_spec
    return spec.label, spec.sub_label, spec.description, spec.num_threads


def against_best(rows: list[dict], tables: list[tuple[list[Any], list[Any]]]) -> None:
    """The same tables judged against each cell's best quiet figure (the lowest median of
    every table measured without competitors): a quiet reference is one table, and on a
    shared host it can itself be slow (opbench flags its cells when it is)."""
    best: dict[tuple[Any, ...], float] = {}
    for row, (quiet, busy) in zip(rows, tables):
        for m in quiet + (busy if row["way"] == "quiet" else []):
            best[_key(m)] = min(best.get(_key(m), float("inf")), m.median)
    print("\nAgainst each cell's best quiet figure (lowest median of the tables without "
          "competitors):")
    print("| way | reference cells flagged | cells >1.5x off best | flagged of those "
          "| flagged within 15% of best (false) | within 15% of best |")
    print("|---|---|---|---|---|---|")
    for row, (quiet, busy) in zip(rows, tables):
        ratios = [b.median / best[_key(b)] for b in busy]
        flags = [b.disturbed for b in busy]
        off = [r > 1.5 for r in ratios]
        print(f"| {row['way']} | {sum(q.disturbed for q in quiet)} | {sum(off)} of {len(busy)} | "
              f"{sum(o and f for o, f in zip(off, flags))} | "
              f"{sum(f and r <= 1.15 for f, r in zip(flags, ratios))} | "
              f"{sum(r <= 1.15 for r in ratios)} of {len(busy)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, one repetition")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each way (default 3)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 10000])
    parser.add_argument("--min-run-time", type=float, default=0.05)
    parser.add_argument("--burst", type=float, default=1.0, help="seconds on, then off (bursty)")
    parser.add_argument("--competitors", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ways", nargs="+", default=["quiet", "constant", "bursty"])
    parser.add_argument("--save", metavar="DIR", help="save every table (its signals included) "
                        "as DIR/<rep>-<way>-{quiet,busy}.json, for judging again offline")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.sizes, args.min_run_time = 1, [1, 64], 0.01
    import torch

    threads = [1, 2] if torch.get_num_threads() > 1 else [1]
    print(f"# {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; sizes {args.sizes}, "
          f"threads {threads}, {args.competitors} competitors, bursts of {args.burst} s")
    rows = []
    tables = []
    for rep in range(args.reps):
        for way in args.ways:
            quiet, quiet_s = table(args.sizes, threads, args.min_run_time, recover=False)
            load = None if way == "quiet" else args.burst if way == "bursty" else 0.0
            with contextlib.ExitStack() as stack:
                if load is not None:
                    stack.enter_context(competitors(args.competitors, load or None))
                busy, busy_s = table(args.sizes, threads, args.min_run_time,
                                     recover=way == "bursty")
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                for side, results in (("quiet", quiet), ("busy", busy)):
                    opbench.save(results, os.path.join(args.save, f"{rep}-{way}-{side}.json"))
            row = judge(way, quiet, quiet_s, busy, busy_s)
            rows.append(row)
            tables.append((quiet, busy))
            print(f"  rep {rep + 1} {way:8s}: {row['off']:2d} of {row['cells']} cells >1.5x off, "
                  f"{row['off_flagged']} flagged; flagged {row['flagged']}; within 15% "
                  f"{row['within15']}; time {row['time']:.2f}x; worst {row['worst']:.1f}x",
                  flush=True)
    print()
    print("| way | cells >1.5x off quiet | flagged of those: opbench / torch IQR / pyperf std "
          "| cells flagged: opbench / torch IQR / pyperf std | within 15% of quiet "
          "| time / quiet table |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['way']} | {row['off']} of {row['cells']} | {row['off_flagged']} / "
              f"{row['off_iqr']} / {row['off_pyperf']} | {row['flagged']} / {row['iqr']} / "
              f"{row['pyperf']} | {row['within15']} of {row['cells']} "
              f"({row['remeasured']} measured again) | {row['time']:.2f}x |")
    against_best(rows, tables)
    verdicts = []
    for row in rows:
        if row["way"] == "constant":
            verdicts.append(("constant: every cell >1.5x off flagged", row["off_flagged"] == row["off"]))
        if row["way"] == "quiet":
            verdicts.append(("quiet: at most 5% flagged", row["flagged"] <= 0.05 * row["cells"]))
        if row["way"] == "bursty":
            verdicts.append(("bursty: >= 90% within 15%", row["within15"] >= 0.9 * row["cells"]))
            verdicts.append(("bursty: time <= 2x quiet", row["time"] <= 2.0))
    print()
    for name in dict.fromkeys(n for n, _ in verdicts):
        ok = [v for n, v in verdicts if n == name]
        print(f"{name}: {sum(ok)} of {len(ok)} repetitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
