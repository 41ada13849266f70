"""Paired A/B verdicts on real timers: opbench.compare_ab vs torch.utils.benchmark.

Two comparisons of torch statements:
- identical: ``torch.add(x, 1, out=y)`` ten times against the same statement; the
  right answer is "same".
- known difference: the same op ten times against eleven times, i.e. about 10% more
  work (a little less: the loop overhead is shared); the right answer is "slower".

opbench runs A and B interleaved with one block size and reports the ratio B/A with a
95% confidence interval and a verdict. torch.utils.benchmark has no A/B mode: the peer
row times A and then B with ``blocked_autorange`` and prints the ratio of medians, which
has no interval and no verdict, so noise and drift between the two runs go unnoticed.

Usage: python benchmarks/ab.py [--quick]
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch
import torch.utils.benchmark as tb

import opbench
from opbench.gate.ab import compare_ab

LOOP = "for _ in range({k}): torch.add(x, 1, out=y)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds in all")
    args = parser.parse_args()
    min_time, max_time = (0.1, 0.6) if args.quick else (0.5, 10.0)
    warnings.simplefilter("ignore", opbench.BenchmarkWarning)
    torch.set_num_threads(1)
    data = {"x": torch.ones(4096), "y": torch.empty(4096)}
    cases = [("identical", LOOP.format(k=10), LOOP.format(k=10), "same"),
             ("+10% work", LOOP.format(k=10), LOOP.format(k=11), "slower")]
    print(f"{'case':<11} {'tool':<22} {'ratio B/A':>9}  {'95% CI':<17} {'verdict':<13} "
          f"{'expected':<8} seconds")
    for name, stmt_a, stmt_b, expected in cases:
        start = time.perf_counter()
        r = compare_ab(opbench.Timer(stmt_a, globals=data, description="A"),
                       opbench.Timer(stmt_b, globals=data, description="B"),
                       min_run_time=min_time, max_run_time=max_time)
        ours = time.perf_counter() - start
        print(f"{name:<11} {'opbench.compare_ab':<22} {r.ratio:>9.4f}  "
              f"{r.ci_low:.4f} to {r.ci_high:.4f}  {r.verdict:<13} {expected:<8} {ours:.2f}"
              f"   ({r.n_pairs} pairs x {r.number_per_run} runs)")
        start = time.perf_counter()
        a = tb.Timer(stmt_a, globals=data).blocked_autorange(min_run_time=min_time / 2)
        b = tb.Timer(stmt_b, globals=data).blocked_autorange(min_run_time=min_time / 2)
        peer = time.perf_counter() - start
        print(f"{'':<11} {'torch (A then B)':<22} {b.median / a.median:>9.4f}  {'(none)':<17} "
              f"{'(none)':<13} {expected:<8} {peer:.2f}")


if __name__ == "__main__":
    main()
