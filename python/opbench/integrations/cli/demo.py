"""``python -m opbench demo``: the recipe's batched-dot comparison as a Compare table.

Times ``a.mul(b).sum(-1)`` against ``torch.bmm`` over several sizes and thread
counts, then prints the table trimmed and colourised. Cells the busy machine
disturbed are measured again at the end (``opbench.core.recovery``; ``--no-recover``
keeps them as measured); those still disturbed are marked ``(busy)``.
"""
from __future__ import annotations

import argparse
import itertools
from typing import Any

from opbench.integrations.cli import UsageError, add_color_option, command_parser, use_color

_SIZES = (1, 64, 1024, 10000)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        subparsers, "demo", "batched dot: mul/sum against bmm over sizes and threads", __doc__
    )
    p.add_argument("--min-run-time", type=float, default=0.05,
                   help="seconds of measurement per cell (default 0.05)")
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="thread counts (default: 1 and 2, or 1 alone on one core)")
    p.add_argument("--sizes", type=int, nargs="+", default=list(_SIZES),
                   help="batch and feature sizes to cross (default 1 64 1024 10000)")
    p.add_argument("--no-recover", dest="recover", action="store_false",
                   help="keep cells the busy machine disturbed as measured (default: measure "
                        "them again at the end, within three quarters as much time again as "
                        "the table took)")
    add_color_option(p)
    return p


def batched_dot_mul_sum(a, b):
    """Batched dot by multiplying and summing."""
    return a.mul(b).sum(-1)


def batched_dot_bmm(a, b):
    """Batched dot by reducing to bmm."""
    a = a.reshape(-1, 1, a.shape[-1])
    b = b.reshape(-1, b.shape[-1], 1)
    return __import__("torch").bmm(a, b).flatten(-3)


def timers(sizes: list[int], threads: list[int]) -> list[Any]:
    """The demo's Timers: each pair of sizes, at each thread count, both ways."""
    import torch

    import opbench

    out = []
    for b, n in itertools.product(sizes, sizes):
        x = torch.ones((b, n))
        for num_threads in threads:
            for description, fn in (("mul/sum", batched_dot_mul_sum), ("bmm", batched_dot_bmm)):
                out.append(opbench.Timer(stmt="fn(x, x)", globals={"x": x, "fn": fn},
                                         num_threads=num_threads, label="Batched dot",
                                         sub_label=f"[{b}, {n}]", description=description))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise UsageError("the demo times torch ops: pip install torch") from None
    import opbench

    if args.min_run_time <= 0:
        raise UsageError("--min-run-time must be > 0")
    threads = args.threads or ([1, 2] if torch.get_num_threads() > 1 else [1])
    results = opbench.run_all(timers(args.sizes, threads), min_run_time=args.min_run_time,
                              recover=args.recover)
    compare = opbench.Compare(results)
    compare.trim_significant_figures()
    if use_color(args.color):
        compare.colorize()
    compare.print()
    return 0
