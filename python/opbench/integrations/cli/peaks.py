"""``opbench peaks [--refresh] [--threads N] [--device DEV] [--dtype D]...``: this machine's peaks.

Shows the memory bandwidth (STREAM copy and triad) and matmul FLOP rates
measured on this machine, cached in ``.opbench/<machine id>/peaks.json``
(``$OPBENCH_BASELINE_DIR`` moves it), with how they were measured and the
ridge point (FLOPs per byte) that splits memory-bound from compute-bound.
Measurements and Compare's "% of peak" are judged against them.

With nothing cached for the asked device and thread count, or with
``--refresh``, measures first (a few seconds; do it on a quiet machine).

Examples:
    opbench peaks                      # show (measure for 1 thread if never measured)
    opbench peaks --refresh --threads 2 --dtype float32 --dtype bfloat16
    opbench peaks --device cuda:0

Exit status: 0; 2 without torch, or for a device torch does not see.
"""
from __future__ import annotations

import argparse

from opbench.integrations.cli import UsageError, command_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "peaks",
                       "show (or measure) this machine's peak bandwidth and FLOP rates",
                       __doc__)
    p.add_argument("--refresh", action="store_true",
                   help="measure again, replacing the cached figures")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads to measure with on the CPU (default 1)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    p.add_argument("--dtype", action="append", default=None, metavar="D",
                   help="matmul dtypes, repeatable (default: float32 and bfloat16)")
    return p


def run(args: argparse.Namespace) -> int:
    from opbench.core import peaks

    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}")
    dtypes = args.dtype or ["float32", "bfloat16"]
    peaks.get(args.device, args.threads, dtypes, refresh=args.refresh)
    print(f"{peaks.path()}:")
    print(peaks.describe(peaks.load()))
    return 0
