"""The fixed cost of a tiny op: eager against torch.compile, with autograd and inference mode.

``x + 1`` on ``x = torch.randn(10)`` does almost no arithmetic, so its time
is the framework's fixed overhead per call: Python dispatch, the dispatcher,
autograd bookkeeping, and for ``torch.compile`` the guard checks. One table:
per-call time (opbench ``blocked_autorange`` median), the ratio to the eager
row with the same autograd setting, the cold first call (for compiled rows,
the compilation), and instructions per call under callgrind (denoised).

Cases: plain, ``requires_grad=True`` (autograd records a graph per call), and
ambient ``torch.inference_mode()`` (entered once in setup, as a serving loop
would, not per call).

    python benchmarks/compile_overhead.py                 # all rows (minutes: compiles, callgrind)
    python benchmarks/compile_overhead.py --quick         # eager rows only, no callgrind: seconds
    python benchmarks/compile_overhead.py --backend aot_eager   # no C++ code generation
"""
from __future__ import annotations

import argparse
import os
import sys

import opbench
from opbench._text import text_table
from opbench.core.first_call import measure_first_call

# Setup strings (not globals): the callgrind child process rebuilds everything
# from them. The inference-mode guard lives as long as the setup's frame, i.e.
# for the timed loop, and is released afterwards.
_INPUTS = {
    "": "x = torch.randn(10)",
    "requires_grad": "x = torch.randn(10, requires_grad=True)",
    "inference_mode": "_guard = torch._C._InferenceMode(True)\nx = torch.randn(10)",
}
_EAGER = "f = lambda x: x + 1"
_COMPILED = "f = torch.compile(lambda x: x + 1, backend={backend!r})"
_CALLGRIND_NUMBER = 100


def _callgrind_reason(quick: bool) -> str | None:
    if quick:
        return "--quick"
    try:
        from opbench.callgrind.collect import callgrind_unavailable_reason
    except ImportError as e:
        return f"opbench.callgrind unavailable: {e}"
    return callgrind_unavailable_reason()


def _row(name: str, setup: str, *, min_run_time: float, callgrind: str | None) -> dict:
    timer = opbench.Timer("f(x)", setup=setup, label="x + 1", sub_label=name)
    first = measure_first_call(timer)  # before anything warms the statement up
    per_call = timer.blocked_autorange(min_run_time=min_run_time).median
    if callgrind is None:
        stats = timer.collect_callgrind(number=_CALLGRIND_NUMBER)
        instructions = f"{stats.counts(denoise=True) / _CALLGRIND_NUMBER:,.0f}"
    else:
        instructions = f"n/a ({callgrind})"
    return {"name": name, "per_call": per_call, "first": first, "instructions": instructions}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="eager rows only (no compilation), short timing, no callgrind")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument("--callgrind-compiled", action="store_true",
                        help="also count compiled rows (compiles again under valgrind: slow)")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: this benchmark needs torch (pip install torch)")
        return 0
    # torch.compile's inductor reads the compiler from PATH; the venv may not be on it.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

    min_run_time = 0.05 if args.quick else 0.5
    callgrind = _callgrind_reason(args.quick)
    rows = []
    for mode, inputs in _INPUTS.items():
        suffix = f", {mode}" if mode else ""
        rows.append(_row(f"eager{suffix}", f"{inputs}\n{_EAGER}", min_run_time=min_run_time,
                         callgrind=callgrind))
        if args.quick:
            continue
        compiled = f"{inputs}\n{_COMPILED.format(backend=args.backend)}"
        rows.append(_row(
            f"compiled ({args.backend}){suffix}", compiled, min_run_time=min_run_time,
            callgrind=callgrind or (None if args.callgrind_compiled else "--callgrind-compiled"),
        ))

    eager = {r["name"].partition(", ")[2]: r["per_call"] for r in rows if r["name"].startswith("eager")}
    table = [
        [r["name"], _us(r["per_call"]), f"{r['per_call'] / eager[r['name'].partition(', ')[2]]:.2f}",
         f"{r['first'] * 1e3:,.3f}", r["instructions"]]
        for r in rows
    ]
    headers = ["case: f(x) = x + 1, x = randn(10)", "per call (us)", "x eager", "first call (ms)",
               "instructions/call"]
    print(text_table(headers, table, [False, True, True, True, True]))
    if callgrind is not None and not args.quick:
        print(f"\ninstructions n/a: {callgrind}")
    elif not args.quick and not args.callgrind_compiled:
        print("\ncompiled rows' instructions n/a: each would compile again under valgrind "
              "(minutes); run with --callgrind-compiled to count them.")
    if args.quick:
        print("\n--quick: torch.compile rows skipped (each compile takes tens of seconds here); "
              "instruction counts skipped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
