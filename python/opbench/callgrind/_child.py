"""The program the callgrind child runs: generated Python, plus the globals it loads.

The child runs under ``valgrind --instr-atstart=no --collect-atstart=no``, so
the interpreter start, ``import torch``, the user's setup and the warm-up all
run uninstrumented (several times faster than instrumented). Only then does it
switch instrumentation on, and each measured loop is bracketed by collect
toggles and followed by a dump, one output file per loop.
"""
from __future__ import annotations

import os
import pickle
import re
import sys
import textwrap
import types
from typing import Any

from opbench.callgrind.globals import CopyIfCallgrind
from opbench.errors import SerializationError

# Statements per unrolled block: a Python `for` costs instructions of its own,
# so the loop runs 100 copies of the statement per iteration (as torch does,
# which keeps counts comparable).
_BLOCK = 100

STMT_FN = "__opbench_stmt"
SETUP_FN = "__opbench_setup"


def block_stmt(stmt: str, number: int) -> str:
    """`stmt` repeated `number` times, as an unrolled loop of 100-statement blocks."""
    loops = number // _BLOCK
    if loops == 1:  # `for _ in range(1)` would only add instructions
        loops = 0
    remainder = number - _BLOCK * loops
    out = ""
    if loops:
        body = textwrap.indent("\n".join([stmt] * _BLOCK), " " * 4)
        out += f"for _ in range({loops}):\n{body}\n"
    if remainder:
        out += "\n".join([stmt] * remainder) + "\n"
    return out


def _torch_module() -> types.ModuleType | None:
    return sys.modules.get("torch")


def _serializer(value: Any) -> str:
    """How a global crosses into the child: "jit", "torch" or "pickle"."""
    torch = _torch_module()
    if torch is not None:
        if isinstance(value, (torch.jit.ScriptFunction, torch.jit.ScriptModule)):
            return "jit"
        if isinstance(value, torch.nn.Module):
            return "torch"
    return "pickle"


def _dump(name: str, value: Any, path: str, how: str) -> None:
    try:
        if how == "jit":
            _torch_module().jit.save(value, path)  # type: ignore[union-attr]
        elif how == "torch":
            _torch_module().save(value, path)  # type: ignore[union-attr]
        else:
            with open(path, "wb") as f:
                pickle.dump(value, f)
    except Exception as e:  # pickle raises several types; all mean the same here
        raise SerializationError(
            f"collect_callgrind cannot copy {name} of type {type(value).__name__} into the "
            f"callgrind process: it does not serialize ({type(e).__name__}: {e}). Create it in "
            f"`setup` instead, or pass a picklable value."
        ) from e


def _load_line(name: str, path: str, how: str) -> str:
    if how == "jit":
        return f"{name} = __import__('torch').jit.load({path!r})"
    if how == "torch":
        return f"{name} = __import__('torch').load({path!r}, weights_only=False)"
    # __import__: the user's namespace gets the loaded name and nothing else.
    return f"with open({path!r}, 'rb') as __f:\n    {name} = __import__('pickle').load(__f)"


def globals_loader(user_globals: dict[str, Any], data_dir: str) -> tuple[str, bool]:
    """Writes the wrapped globals to `data_dir`; returns the code that loads them
    and whether that code needs torch. Raises ValueError naming a bad global."""
    torch = _torch_module()
    lines: list[str] = []
    needs_torch = False
    for name, value in user_globals.items():
        if name == "__builtins__":
            continue  # the child has its own
        if name == "torch":
            if isinstance(value, types.ModuleType) and value.__name__ == "torch" and value is torch:
                needs_torch = True  # the child imports torch itself
                continue
            raise ValueError("`collect_callgrind` does not support mocking out `torch`.")
        if not isinstance(value, CopyIfCallgrind):
            raise ValueError(
                "`collect_callgrind` requires that globals be wrapped in "
                "`CopyIfCallgrind` so that serialization is explicit."
            )
        how = _serializer(value.value)
        needs_torch |= how != "pickle"
        path = os.path.join(data_dir, f"{len(lines)}.bin")
        _dump(f"global {name!r}", value.value, path, how)
        if value.setup is not None:
            lines.append(textwrap.dedent(value.setup))
        lines.append(_load_line(name, path, how))
    return "\n".join(lines), needs_torch


def callable_loader(name: str, fn: Any, data_dir: str, what: str) -> str:
    """Pickles a callable stmt/setup; returns the code that loads it as `name`."""
    path = os.path.join(data_dir, f"{name}.bin")
    _dump(what, fn, path, "pickle")
    return _load_line(name, path, "pickle")


_MENTIONS_TORCH = re.compile(r"\btorch\b")


def mentions_torch(*code: str) -> bool:
    return any(_MENTIONS_TORCH.search(c) for c in code)


# Child code defining `__trim(0)`. glibc's malloc consolidates its free lists
# lazily, at moments that depend on the heap's history; done inside a measured
# loop that costs ~1% of a small torch op's count, in some repeats and not
# others. Trimming before every loop starts each one from the same heap.
_MALLOC_TRIM = """\
try:
    import ctypes
    __trim = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError):
    __trim = lambda pad: 0
"""


def script(
    *,
    stmt: str,
    setup: str,
    global_setup: str,
    load_code: str,
    number: int,
    repeats: int,
    collect_baseline: bool,
    import_torch: bool,
    num_threads: int,
) -> str:
    """The child program. User code runs in its own namespace, at module level
    (names are globals, as in torch's generated script)."""
    torch_lines = (
        f"import torch\ntorch.set_num_threads({num_threads})\n__ns['torch'] = torch\n"
        if import_torch else ""
    )

    def measured(body: str) -> str:
        return f"__opbench_toggle()\n{body}__opbench_toggle()\n"

    return f"""\
import gc, os, pickle, sys
from opbench._C import callgrind as __cg
if not __cg.running_on_valgrind():
    sys.exit("opbench callgrind child: not running under valgrind")
__ns = {{"__name__": "__main__", "__opbench_toggle": __cg.toggle_collect}}
{torch_lines}
def __run(code, name):
    exec(compile(code, name, "exec"), __ns)

__run({load_code!r}, "<globals>")
__run({global_setup!r}, "<global_setup>")
__run({setup!r}, "<setup>")
__stmt = compile({measured(block_stmt(stmt, number))!r}, "<stmt>", "exec")
__base = compile({measured(block_stmt("pass", number))!r}, "<baseline>", "exec")

# Warm-up, uninstrumented: the statement's own caches (imports, allocator pools).
__warm = "for _ in range({min(number, 10)}):\\n" + {textwrap.indent(stmt, "    ")!r}
exec(compile(__warm, "<warmup>", "exec"), __ns)

{_MALLOC_TRIM}
def __reset():
    gc.collect()
    __trim(0)

# Freeze what setup built so the per-repeat collection (instrumented) is cheap.
gc.collect()
gc.freeze()


def __measure(code, reason):
    # CPython specialises a code object's bytecode as it runs it, retrying failed
    # specialisations with exponential backoff: one code object run repeatedly
    # pays those retries in some repeats and not others. A fresh copy per repeat,
    # run once with collection off (the toggles swapped for a no-op builtin of the
    # same kind), makes every measured run the second run of its code: identical.
    code = code.replace()
    __ns["__opbench_toggle"] = __cg.running_on_valgrind
    exec(code, __ns)
    __ns["__opbench_toggle"] = __cg.toggle_collect
    __reset()
    exec(code, __ns)
    __cg.dump_stats(reason)

__cg.start_instrumentation()
for __i in range({repeats}):
    __measure(__stmt, "opbench stmt")
{'__measure(__base, "opbench baseline")' if collect_baseline else ''}
__cg.stop_instrumentation()
sys.stdout.flush()
sys.stderr.flush()
# Skip interpreter teardown (slow under valgrind, and nothing left to measure).
os._exit(0)
"""


def cpp_script(*, library: str, number: int, repeats: int, import_torch: bool,
               num_threads: int) -> str:
    """The child program for a C++ timer: drives the timer's own compiled library
    (the file the parent built and cached) through the same ctypes entry points.

    The library runs setup and a warm-up block uninstrumented; from then on it
    toggles collection around each measured loop itself (in C++), so a count is
    `number` runs of the statement plus a handful of loop entry/exit
    instructions: no Python, no ctypes call, no clock read.
    """
    torch_lines = (f"import torch\ntorch.set_num_threads({num_threads})\n"
                   if import_torch else "")
    return f"""\
import ctypes, os, sys
from pathlib import Path
from opbench._C import callgrind as __cg
if not __cg.running_on_valgrind():
    sys.exit("opbench callgrind child: not running under valgrind")
{torch_lines}
from opbench.engines.cpp import _Library

__lib = _Library(Path({library!r}))
__session = __lib.open()
if not __session:
    sys.exit("could not allocate the C++ timer's session")
__elapsed = ctypes.c_int64(0)


{_MALLOC_TRIM}

def __block(n):
    __trim(0)
    if __lib.run(__session, n, ctypes.byref(__elapsed)) != 0:
        sys.exit("C++ statement threw: " + __lib.error(__session).decode(errors="replace"))


# Setup and warm-up runs (as many as torch's, min(number, 10)), uncounted:
# first-call costs (lazy symbol binding, static initialisers, allocator pools).
__block({min(number, 10)})
__lib.set_collect(__session, 1)
__cg.start_instrumentation()
for __i in range({repeats}):
    __block({number})
    __cg.dump_stats("opbench stmt")
__cg.stop_instrumentation()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # skip teardown (slow under valgrind, nothing left to measure)
"""
