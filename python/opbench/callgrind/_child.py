"""What crosses into the callgrind worker: one Job per statement, built in the caller.

A Job is plain data (strings, numbers, file names), pickled to the worker
(``_worker_process.py``), which runs under valgrind. Globals are written to files here,
in the caller, so a global that does not serialize is refused before any
worker starts, naming the global.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import re
import sys
import textwrap
import types
from typing import Any

from opbench.callgrind.globals import CopyIfCallgrind
from opbench.errors import SerializationError

__all__ = ["GlobalFile", "Job", "block_stmt", "cpp_job", "python_job"]

# Statements per unrolled block: a Python `for` costs instructions of its own,
# so the loop runs 100 copies of the statement per iteration (as torch does,
# which keeps counts comparable).
_BLOCK = 100

STMT_FN = "__opbench_stmt"
SETUP_FN = "__opbench_setup"


@dataclasses.dataclass(frozen=True)
class GlobalFile:
    """A global written to ``path`` with ``how`` ("pickle", "torch" or "jit"); ``setup``
    is the code its CopyIfCallgrind asks to run before it is loaded."""

    name: str
    path: str
    how: str
    setup: str | None = None


@dataclasses.dataclass(frozen=True)
class Job:
    """One statement for the worker. ``kind`` is "python" or "cpp"; ``title`` names
    the statement in messages."""

    kind: str
    title: str
    number: int
    repeats: int
    num_threads: int
    import_torch: bool
    collect_baseline: bool = False
    stmt: str = ""
    setup: str = ""
    global_setup: str = ""
    globals: tuple[GlobalFile, ...] = ()
    library: str = ""  # kind == "cpp": the compiled Timer library

    @property
    def dumps(self) -> int:
        """How many callgrind dumps the job writes (one per repeat, plus the baseline)."""
        return self.repeats + int(self.collect_baseline)


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


def _dump(what: str, value: Any, path: str, how: str) -> None:
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
            f"collect_callgrind cannot copy {what} of type {type(value).__name__} into the "
            f"callgrind process: it does not serialize ({type(e).__name__}: {e}). Create it in "
            f"`setup` instead, or pass a picklable value."
        ) from e


def load(path: str, how: str) -> Any:
    """The worker's side of _dump."""
    if how == "jit":
        return __import__("torch").jit.load(path)
    if how == "torch":
        return __import__("torch").load(path, weights_only=False)
    with open(path, "rb") as f:
        return pickle.load(f)


def _globals(user_globals: dict[str, Any], data_dir: str,
             where: str) -> tuple[list[GlobalFile], bool]:
    """Writes the wrapped globals to `data_dir`; returns them and whether loading
    them needs torch. Raises ValueError / SerializationError naming a bad global."""
    torch = _torch_module()
    files: list[GlobalFile] = []
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
                f"`CopyIfCallgrind` so that serialization is explicit ({where}global {name!r})."
            )
        how = _serializer(value.value)
        needs_torch |= how != "pickle"
        path = os.path.join(data_dir, f"{len(files)}.bin")
        _dump(f"{where}global {name!r}", value.value, path, how)
        setup = textwrap.dedent(value.setup) if value.setup is not None else None
        files.append(GlobalFile(name, path, how, setup))
    return files, needs_torch


_MENTIONS_TORCH = re.compile(r"\btorch\b")


def mentions_torch(*code: str) -> bool:
    return any(_MENTIONS_TORCH.search(c) for c in code)


def title(timer: Any) -> str:
    """The statement as messages name it: its first line, and its label if any."""
    spec = timer.task_spec
    first = (spec.stmt.strip().splitlines() or [""])[0]
    parts = [f"`{first}`"] + [p for p in (spec.label, spec.sub_label, spec.description) if p]
    return " | ".join(parts)


def python_job(timer: Any, data_dir: str, *, number: int, repeats: int,
               collect_baseline: bool, where: str = "") -> Job:
    """The Job for a Python Timer; globals and callables are written to `data_dir`.
    ``where`` prefixes the names of globals in errors (e.g. "timers[3]: ")."""
    spec = timer.task_spec
    args = timer.kwargs  # as given: globals keep their CopyIfCallgrind wrappers
    files, needs_torch = _globals(args.get("globals") or {}, data_dir, where)
    stmt, setup = spec.stmt, spec.setup
    for fn_name, key in ((STMT_FN, "stmt"), (SETUP_FN, "setup")):
        if callable(args.get(key)):
            path = os.path.join(data_dir, f"{fn_name}.bin")
            _dump(f"{where}{key}", args[key], path, "pickle")
            files.append(GlobalFile(fn_name, path, "pickle"))
            if key == "stmt":
                stmt = f"{fn_name}()"
            else:
                setup = f"{fn_name}()"
    global_setup = spec.global_setup or ""
    return Job(
        kind="python", title=title(timer), number=number, repeats=repeats,
        num_threads=spec.num_threads,
        import_torch=needs_torch or mentions_torch(stmt, setup, global_setup),
        collect_baseline=collect_baseline, stmt=stmt, setup=setup or "pass",
        global_setup=global_setup, globals=tuple(files),
    )


def cpp_job(timer: Any, *, number: int, repeats: int) -> Job:
    """The Job for a C++ Timer: the worker drives the Timer's own compiled library
    (compiled here, so compiler errors surface in the caller). No baseline, as torch."""
    from opbench.errors import CallgrindUnavailableError

    engine = timer.engine  # CppEngine
    library = engine.library_path()
    if not engine.callgrind_available():
        raise CallgrindUnavailableError(
            f"the compiled C++ statement ({library}) was built without valgrind's headers "
            "(valgrind/callgrind.h), so it cannot toggle callgrind's collection. Install the "
            "Debian package `valgrind` (it ships the headers) and delete the cached library.")
    return Job(kind="cpp", title=title(timer), number=number, repeats=repeats,
               num_threads=timer.task_spec.num_threads, import_torch=engine.needs_torch,
               library=str(library))
