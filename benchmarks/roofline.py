"""Throughput and roofline: opbench's counted work and achieved bandwidth against
independent figures, in one run.

Four torch statements, each timed by ``opbench.Timer(..., flops="count",
bytes="count")``:

* a large ``copy_`` (two buffers of 8 x the last-level cache, float32),
* a large ``add`` (``torch.add(x, y, out=z)``, same size),
* a GEMM (``a @ b``, float32, 1024 x 1024),
* a tiny op (``x + y`` on 16 elements).

Checks, against figures computed without opbench:

* counted FLOPs and bytes equal the hand figures from the shapes, exactly
  (copy: 0 FLOPs, 2 x N x 4 bytes; add: N FLOPs, 3 x N x 4 bytes; GEMM:
  2 n^3 FLOPs, 3 x n^2 x 4 bytes; tiny: 16 FLOPs, 3 x 16 x 4 bytes). A
  mismatch is a bug: the exit status is 1.
* the achieved bandwidth of the large copy (opbench: counted bytes / median)
  is within 10% of a plain numpy copy of the same size (``np.copyto``, timed
  with ``timeit``: bytes / median of the repeats), the two sides alternated in
  rounds on one thread; the median of the per-round ratios is reported.
* against peaks measured in this run (``opbench.core.peaks``, into a temporary
  folder): the GEMM is compute-bound, the copy memory-bound.

The machine is shared and noisy: timing claims print PASS/FAIL and the exit
status is 0 either way unless --strict.

Usage: python benchmarks/roofline.py [--quick] [--strict] [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import timeit


def _llc_floats() -> int:
    from opbench.core import peaks

    return (peaks._llc_bytes() or 32 << 20) // 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a timing claim fails")
    parser.add_argument("--rounds", type=int, default=None, help="copy rounds (default 7)")
    args = parser.parse_args()
    os.environ.setdefault("OPBENCH_BASELINE_DIR", tempfile.mkdtemp(prefix="opbench-peaks-"))

    import numpy as np
    import torch

    import opbench
    from opbench.core import peaks

    torch.set_num_threads(1)
    n_big = (2 if args.quick else 8) * _llc_floats()
    n_gemm = 256 if args.quick else 1024
    rounds = args.rounds or (1 if args.quick else 7)
    min_run_time = 0.05 if args.quick else 0.3

    peak = peaks.get("cpu", 1, ("float32",), refresh=True)
    print(f"peaks measured now (1 thread): copy {peak.copy / 1e9:.2f} GB/s, triad "
          f"{peak.triad / 1e9:.2f} GB/s, float32 matmul {peak.flop_rates['float32'] / 1e9:.1f} "
          f"GFLOP/s, ridge {peak.ridge('float32'):.2f} FLOP/byte")

    x, y, z = (torch.rand(n_big) for _ in range(3))
    a, b = torch.rand(n_gemm, n_gemm), torch.rand(n_gemm, n_gemm)
    u, v = torch.rand(16), torch.rand(16)
    cases = [
        ("large copy_", "y.copy_(x)", {"x": x, "y": y}, 0, 2 * n_big * 4),
        ("large add", "torch.add(x, y, out=z)", {"x": x, "y": y, "z": z}, n_big, 3 * n_big * 4),
        ("GEMM", "a @ b", {"a": a, "b": b}, 2 * n_gemm**3, 3 * n_gemm**2 * 4),
        ("tiny add", "u + v", {"u": u, "v": v}, 16, 3 * 16 * 4),
    ]
    failures, hard = [], []
    results = {}
    print(f"\n{'case':<12} {'FLOPs hand':>14} {'counted':>14} {'bytes hand':>14} "
          f"{'counted':>14}  {'median':>10} {'GB/s':>8} {'GFLOP/s':>9} {'bound':>8} {'% peak':>7}")
    for name, stmt, env, flops, nbytes in cases:
        m = opbench.Timer(stmt, globals=env, label="roofline", sub_label=name, flops="count",
                          bytes="count").blocked_autorange(min_run_time=min_run_time)
        results[name] = m
        exact = (m.flops, m.bytes) == (flops, nbytes)
        if not exact:
            hard.append(f"{name}: counted {m.flops} FLOPs / {m.bytes} bytes, hand figures "
                        f"{flops} / {nbytes}")
        print(f"{name:<12} {flops:>14,} {m.flops:>14,} {nbytes:>14,} {m.bytes:>14,}  "
              f"{m.median * 1e6:>8.1f}us {m.byte_rate / 1e9:>8.2f} {m.flop_rate / 1e9:>9.2f} "
              f"{m.bound:>8} {m.efficiency * 100:>6.1f}%  {'exact' if exact else 'MISMATCH'}")

    print(f"\ncopy of {n_big * 4 >> 20} MiB, 1 thread: opbench (counted bytes / median) vs "
          "numpy np.copyto timed with timeit (bytes / median), alternated")
    src, dst = np.random.rand(n_big).astype(np.float32), np.empty(n_big, dtype=np.float32)
    copy_bytes = 2 * n_big * 4
    ratios = []
    for r in range(rounds):
        ours = opbench.Timer("y.copy_(x)", globals={"x": x, "y": y}, bytes="count") \
            .blocked_autorange(min_run_time=min_run_time).byte_rate
        number = max(1, int(min_run_time / 5 / (copy_bytes / 1e10)))
        totals = timeit.repeat(lambda: np.copyto(dst, src), number=number, repeat=11)
        theirs = copy_bytes / (statistics.median(totals) / number)
        ratios.append(ours / theirs)
        print(f"  round {r + 1}: opbench {ours / 1e9:.2f} GB/s, numpy {theirs / 1e9:.2f} GB/s, "
              f"ratio {ours / theirs:.3f}")
    ratio = statistics.median(ratios)
    checks = [
        (f"copy bandwidth within 10% of numpy's (median ratio {ratio:.3f})",
         abs(ratio - 1) <= 0.10),
        (f"GEMM compute-bound (intensity {results['GEMM'].arithmetic_intensity:.1f} FLOP/byte)",
         results["GEMM"].bound == "compute"),
        (f"copy memory-bound (intensity {results['large copy_'].arithmetic_intensity:.1f})",
         results["large copy_"].bound == "memory"),
    ]
    print()
    for text, ok in checks:
        print(f"  claim: {text}: {'PASS' if ok else 'FAIL'}")
        if not ok:
            failures.append(text)
    print(f"  claim: counted FLOPs and bytes equal the hand figures: "
          f"{'FAIL' if hard else 'PASS'}")
    for line in hard:
        print(f"    {line}")
    print()
    print(opbench.Compare(list(results.values()), columns=["time", "GB/s", "TFLOP/s",
                                                           "% of peak"]))
    return 1 if hard or (args.strict and failures) else 0


if __name__ == "__main__":
    sys.exit(main())
