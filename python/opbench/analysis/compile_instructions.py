"""Instruction counts of a compiled call's layers: ``overheads(..., instructions=True)``.

Times on a shared machine wander; instruction counts do not. A child Python
runs under ``valgrind --tool=callgrind --instr-atstart=no`` (uninstrumented,
so importing torch and compiling cost minutes, not hours), imports the
function by name, loads the arguments, and for each setting compiles the
function, finds its layers (``opbench.analysis.compile_layers``) and counts each
probe with ``opbench.callgrind.in_process.count`` (the empty loop's count
taken off, so the figure is the call's own). The parent splits the counts at
the same boundaries as the times. valgrind cannot run every vector instruction
Inductor generates (AVX-512, AVX2 masked loads), so the child's Inductor
generates scalar kernels: the kernels counted differ from those timed (for a
fixed-overhead study they are a sliver of the call).

The function must be importable by its module and qualified name (at module
level of a module or of the script being run, not inside another function)
and its arguments loadable by
``torch.load``; otherwise, or without valgrind, ``count`` returns the reason.

Example (minutes: the child imports torch and compiles under valgrind)::

    counts = count(mymodule.add1, (torch.randn(10),), {}, ["requires_grad=False"], "inductor", None)
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["count"]

_NUMBER = 20  # calls per counted loop: counts are exact, so few are needed


def _main_file() -> str | None:
    """The script running as ``__main__``, which the child loads under another name (so
    its ``if __name__ == "__main__":`` block does not run), as multiprocessing does."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.abspath(path) if path and path.endswith(".py") else None


def _importable(fn: Any) -> str | None:
    """Why the child cannot import ``fn`` by name, or None."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or \
            (module == "__main__" and _main_file() is None):
        return (f"{getattr(fn, '__qualname__', fn)!r} is not importable by name (define it at "
                "module level in an importable module or script)")
    try:
        obj: Any = sys.modules["__main__"] if module == "__main__" else \
            importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return f"{module}.{qualname} cannot be imported"
    return None if obj is fn else f"{module}.{qualname} is not the function given"


def _load(module: str, qualname: str, main_file: str | None) -> Any:
    if module == "__main__" and main_file:
        spec = importlib.util.spec_from_file_location("__opbench_main__", main_file)
        assert spec is not None and spec.loader is not None
        obj: Any = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = obj
        spec.loader.exec_module(obj)
    else:
        obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def count(fn: Any, args: Sequence[Any], kwargs: dict[str, Any], columns: Sequence[str],
          backend: str, mode: str | None, num_threads: int = 1,
          timeout: float = 3600.0) -> dict[str, dict[str, float]] | str:
    """Instructions per call, by column: ``"eager"`` and each probe key of the compiled
    call (``compile_layers.BOUNDARIES``); or the reason they could not be counted."""
    from opbench.callgrind.collect import callgrind_unavailable_reason

    reason = callgrind_unavailable_reason() or _importable(fn)
    if reason is not None:
        return reason
    import torch

    from opbench.callgrind.in_process import OUT_PREFIX_ENV

    with tempfile.TemporaryDirectory(prefix="opbench_compile_counts_") as work:
        torch.save((list(args), dict(kwargs)), os.path.join(work, "args.pt"))
        spec = {"module": fn.__module__, "qualname": fn.__qualname__, "main_file": _main_file(),
                "columns": list(columns),
                "backend": backend, "mode": mode, "num_threads": num_threads,
                "args": os.path.join(work, "args.pt"), "out": os.path.join(work, "out.json")}
        with open(os.path.join(work, "spec.json"), "w", encoding="utf-8") as f:
            json.dump(spec, f)
        prefix = os.path.join(work, "callgrind.out")
        # The parent's import path, so the child finds what the parent imported.
        path = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env = dict(os.environ, **{OUT_PREFIX_ENV: prefix, "PYTHONHASHSEED": "0",
                                  "PYTHONPATH": path})
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                   f"--callgrind-out-file={prefix}", f"--log-file={prefix}.log", sys.executable,
                   "-c", "import sys; from opbench.analysis.compile_instructions import _child; "
                   "_child(sys.argv[1])", os.path.join(work, "spec.json")]
        try:
            proc = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"the counting child ran past {timeout:.0f} s"
        if proc.returncode != 0 or not os.path.exists(spec["out"]):
            return f"the counting child failed (status {proc.returncode}): " \
                   f"{proc.stderr.strip().splitlines()[-1:] or ''}"
        with open(spec["out"], encoding="utf-8") as f:
            result: dict[str, dict[str, float]] = json.load(f)
    return result


def _child(spec_path: str) -> None:
    """Runs under valgrind: counts every probe of every column, writes them as JSON."""
    import torch

    from opbench._threads import set_torch_threads
    from opbench.analysis.compile_layers import find_layers, frame_code
    from opbench.analysis.compile_settings import call_args, reset_cache, setting
    from opbench.callgrind.in_process import OUT_PREFIX_ENV
    from opbench.callgrind.in_process import count as count_in_process
    from opbench.core.measurement import TaskSpec

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    # valgrind cannot run the vector instructions Inductor picks from /proc/cpuinfo
    # (which valgrind leaves as it is): AVX-512, and AVX2's masked loads. Scalar kernels.
    import torch._inductor.config

    torch._inductor.config.cpp.simdlen = 0
    fn = _load(spec["module"], spec["qualname"], spec["main_file"])
    args, kwargs = torch.load(spec["args"], weights_only=False)
    prefix = os.environ[OUT_PREFIX_ENV]

    def per_call(call: Any, what: str) -> float:
        counts = count_in_process(call, number=_NUMBER, repeats=1, task_spec=TaskSpec(what, ""),
                                  out_prefix=prefix)
        return counts.per_run

    code = frame_code(fn)
    out: dict[str, dict[str, float]] = {}
    for column in spec["columns"]:
        with set_torch_threads(spec["num_threads"]), setting(torch, column):
            cell_args = call_args(torch, args, column)
            cell_kwargs = dict(zip(kwargs, call_args(torch, list(kwargs.values()), column)))
            figures = {"eager": per_call(functools.partial(fn, *cell_args, **cell_kwargs),
                                         "eager")}
            reset_cache(torch, code)
            compiled = torch.compile(fn, backend=spec["backend"], mode=spec["mode"])
            compiled(*cell_args, **cell_kwargs)
            compiled(*cell_args, **cell_kwargs)
            layers = find_layers(compiled, fn, tuple(cell_args), cell_kwargs)
            if layers:
                for key, probe in layers.probes.items():
                    figures[key] = per_call(probe.call, key)
            else:
                figures["compiled"] = per_call(
                    functools.partial(compiled, *cell_args, **cell_kwargs), "compiled")
            out[column] = figures
    with open(spec["out"], "w", encoding="utf-8") as f:
        json.dump(out, f)
