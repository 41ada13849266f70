"""``opbench compile-overheads MODULE:FUNCTION --shape 1``: torch.compile's fixed overhead.

Times FUNCTION eager and under ``torch.compile`` (rows), with and without
``requires_grad`` and under ``inference_mode`` (columns), and splits each
compiled call by layer (Dynamo, AOTAutograd, Inductor, kernels): the table of
``opbench.analysis.compile.overheads``. MODULE is an importable module name or a path
to a ``.py`` file; each ``--shape`` gives FUNCTION one argument,
``torch.randn(shape)`` (``--shape 10``, ``--shape 3,4``; ``--shape ""`` for a
0-d tensor).

Examples:
    opbench compile-overheads mymodels:add1 --shape 10
    opbench compile-overheads ./bench.py:layer --shape 8,64 --columns requires_grad=True
    opbench compile-overheads mymodels:add1 --shape 10 --profile
    opbench compile-overheads mymodels:add1 --shape 10 --instructions   # valgrind: minutes

Exit status: 0 on success, 1 when FUNCTION raises or torch.compile recompiles
while timing (the failed guard is printed), 2 for bad input (a MODULE:FUNCTION
that cannot be imported, a bad shape or column, torch missing).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from opbench.integrations.cli import UsageError, command_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from opbench.analysis.compile_overheads import COLUMNS

    p = command_parser(subparsers, "compile-overheads",
                       "torch.compile's fixed overhead per call, eager vs compiled, by layer",
                       __doc__)
    p.add_argument("target", metavar="MODULE:FUNCTION",
                   help="the function to measure: module name or .py path, a colon, its name")
    p.add_argument("--shape", action="append", default=[], metavar="DIMS",
                   help="one tensor argument, torch.randn(DIMS): '10', '3,4' (repeatable)")
    p.add_argument("--dtype", default="float32", help="the arguments' dtype (default float32)")
    p.add_argument("--device", default="cpu", help="the arguments' device (default cpu)")
    p.add_argument("--columns", nargs="+", default=list(COLUMNS), metavar="COLUMN",
                   help=f"settings to measure, of {', '.join(COLUMNS)} (default: all)")
    p.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    p.add_argument("--mode", default=None, help="torch.compile mode")
    p.add_argument("--rounds", type=int, default=3, metavar="N",
                   help="rounds per cell; each keeps its least-disturbed one (default 3)")
    p.add_argument("--min-run-time", type=float, default=0.2, metavar="S",
                   help="seconds per cell per round at least (default 0.2)")
    p.add_argument("--max-run-time", type=float, default=2.0, metavar="S",
                   help="seconds per cell per round at most (default 2)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads while timing (default 1)")
    p.add_argument("--no-split", action="store_true", help="skip the split by layer")
    p.add_argument("--profile", action="store_true",
                   help="print a cProfile view of each compiled call under its split")
    p.add_argument("--instructions", action="store_true",
                   help="also count instructions per call of each cell and layer under "
                        "callgrind (needs valgrind; minutes)")
    return p


def load_function(target: str) -> Callable[..., Any]:
    """``module:function`` or ``path.py:function`` (``function`` may be dotted:
    ``module:Class.method``); UsageError naming what is missing."""
    module_name, sep, name = target.rpartition(":")
    if not sep or not module_name or not name:
        raise UsageError(f"expected MODULE:FUNCTION (e.g. mymodels:add1), got {target!r}")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            if not os.path.isfile(module_name):
                raise UsageError(f"no such file: {module_name}")
            spec = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(module_name))[0], module_name)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())  # as `python -m` would find it
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"cannot import {module_name!r}: {e}") from e
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{module_name!r} has no {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{target} is a {type(obj).__name__}, not a function")
    return obj  # type: ignore[no-any-return]


def parse_shape(text: str) -> tuple[int, ...]:
    """'3,4' (or '3x4') -> (3, 4); '' -> () (a 0-d tensor)."""
    parts = [p for p in text.replace("x", ",").split(",") if p.strip()]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise UsageError(f"--shape must be integers separated by commas, got {text!r}") from None
    if any(d < 0 for d in shape):
        raise UsageError(f"--shape dimensions must be >= 0, got {text!r}")
    return shape


def run(args: argparse.Namespace) -> int:
    from opbench.analysis.compile_overheads import COLUMNS
    from opbench.errors import RecompileError

    bad = [c for c in args.columns if c not in COLUMNS]
    if bad:
        raise UsageError(f"unknown column(s) {', '.join(bad)}: choose from {', '.join(COLUMNS)}")
    for option, value in (("--rounds", args.rounds), ("--threads", args.threads)):
        if value < 1:
            raise UsageError(f"{option} must be >= 1, got {value}")
    shapes = [parse_shape(s) for s in args.shape]
    fn = load_function(args.target)
    try:
        import torch
    except ImportError:
        raise UsageError("compile-overheads measures torch.compile: install torch") from None
    dtype = getattr(torch, args.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise UsageError(f"--dtype {args.dtype!r} is not a torch dtype")
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        raise UsageError(f"--device {args.device!r}: {e}") from None
    # Inductor finds its C++ compiler on PATH; the interpreter's folder may hold it.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    tensors = [torch.randn(shape, dtype=dtype, device=device) for shape in shapes]

    from opbench.analysis.compile_overheads import overheads

    try:
        result = overheads(fn, *tensors, columns=args.columns, backend=args.backend,
                           mode=args.mode, rounds=args.rounds, min_run_time=args.min_run_time,
                           max_run_time=max(args.max_run_time, args.min_run_time),
                           num_threads=args.threads, split=not args.no_split,
                           profile=args.profile, instructions=args.instructions,
                           label=args.target)
    except RecompileError as e:
        print(f"{args._parser.prog}: {e}", file=sys.stderr)
        return 1
    print(result)
    return 0
