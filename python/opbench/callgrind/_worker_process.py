"""The callgrind worker: the program that runs under valgrind and serves statements.

``opbench.callgrind.worker`` starts it as ``valgrind --tool=callgrind
--instr-atstart=no --collect-atstart=no --callgrind-out-file=DIR/callgrind.out.%p
... python -c "from opbench.callgrind._worker_process import main; main()" REQUESTS REPLIES
DIR`` and sends it Jobs (``_child.Job``) over a pipe, one at a time.

The worker is a fork server. It starts Python under valgrind once, imports
torch and the modules it is asked to once, and forks a child per statement;
the child runs the statement (on a thread of its own: see ``_on_new_thread``),
with instrumentation switched on only for its measured loops (for a C++
statement, from just before its thread starts: see csrc/bindings/callgrind.cpp)
and collection exactly around each loop, dumps each loop to
``callgrind.out.<child pid>.N``, and exits. So every statement starts from the
same process state, whatever ran before it (a statement measured in a sweep
counts what it counts alone), and a statement that crashes takes only its own
child with it.

In the child, the statement runs in a fresh ``__main__`` module, installed in
``sys.modules``: code written for torch's child script (which runs everything
at the top level of ``__main__``) finds its names where unpickling looks for
them. Its output goes to ``DIR/job.<child pid>.log``.

Protocol: the caller writes the Job to ``DIR/job.pickle`` and sends the byte
``J`` (any other byte, or closing the pipe, ends the worker). Replies are
length-prefixed pickles: ``("ready", pid)`` once, then per job ``("started",
child pid)``, the child's ``("done",)`` or ``("error", exception pickle or
None, exception text, traceback text)`` (none if it died), and ``("exited",
wait status)``.
"""
from __future__ import annotations

import gc
import importlib
import os
import pickle
import struct
import sys
import textwrap
import threading
import traceback
import types
from typing import Any, Callable, TypeVar

from opbench.callgrind._child import Job, block_stmt, load

_HEADER = struct.Struct("<Q")
JOB_FILE = "job.pickle"
PRELOAD_FILE = "preload.txt"


def send(fd: int, message: Any) -> None:
    """Writes one message (a length-prefixed pickle) to a pipe."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        data = data[os.write(fd, data):]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(fd: int) -> Any:
    """Reads one message; None when the other end has closed the pipe."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    payload = _read_exactly(fd, _HEADER.unpack(header)[0])
    return None if payload is None else pickle.loads(payload)


# -- statements ---------------------------------------------------------------------------

def _reset(cg: Any) -> None:
    # glibc's malloc consolidates its free lists lazily, at moments that depend
    # on the heap's history; done inside a measured loop that costs ~1% of a
    # small torch op's count, in some repeats and not others. Trimming before
    # every loop starts each one from the same heap.
    gc.collect()
    cg.trim_heap()


def _measured(body: str) -> str:
    return f"__opbench_toggle()\n{body}__opbench_toggle()\n"


def _measure(code: types.CodeType, ns: dict[str, Any], cg: Any, collect: bool = True) -> None:
    """Runs `code` (a fresh copy: see _run_python) once uncounted, then once more,
    counted if `collect`, from a heap made the same as before every loop."""
    ns["__opbench_toggle"] = cg.running_on_valgrind  # a no-op builtin, like the toggle
    exec(code, ns)
    if collect:
        ns["__opbench_toggle"] = cg.toggle_collect
    _reset(cg)
    cg.prime_small_objects()
    # The collector off while counting, as timeit times: when a collection runs
    # depends on every allocation since the worker started (the statements it
    # served before), so it would move one statement's count between sweeps.
    gc.disable()
    try:
        exec(code, ns)
    except BaseException:
        if collect:
            # The loop's first toggle ran, its last did not: collection is on.
            cg.toggle_collect()
            cg.zero_stats()
        raise
    finally:
        gc.enable()
        cg.release_small_objects()


def _set_threads(n: int) -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)


def _exec(code: str, ns: dict[str, Any], name: str) -> None:
    exec(compile(code, name, "exec"), ns)


def _run_python(job: Job, cg: Any) -> None:
    main = types.ModuleType("__main__")
    ns = main.__dict__
    sys.modules["__main__"] = main
    if job.import_torch:
        import torch

        ns["torch"] = torch
    _set_threads(job.num_threads)
    for g in job.globals:
        if g.setup is not None:
            _exec(g.setup, ns, f"<CopyIfCallgrind setup of {g.name}>")
        ns[g.name] = load(g.path, g.how)
    _exec(job.global_setup, ns, "<global_setup>")
    _exec(job.setup, ns, "<setup>")
    stmt = compile(_measured(block_stmt(job.stmt, job.number)), "<stmt>", "exec")
    base = compile(_measured(block_stmt("pass", job.number)), "<baseline>", "exec")
    # Warm-up, uninstrumented: the statement's own caches (imports, allocator pools).
    _exec(f"for _ in range({min(job.number, 10)}):\n{textwrap.indent(job.stmt, '    ')}",
          ns, "<warmup>")
    # Freeze what setup built so the collections before each loop (instrumented) are cheap.
    gc.collect()
    gc.freeze()
    # CPython specialises a code object's bytecode as it runs it, retrying failed
    # specialisations with exponential backoff: one code object run repeatedly
    # pays those retries in some repeats and not others. A fresh copy per loop,
    # run once with collection off (the toggles swapped for a no-op builtin of the
    # same kind), makes every measured run the second run of its code: identical.
    # The copies are made now: made between loops, these large objects would
    # land among the statement's own allocations, differently every time.
    copies = [stmt.replace() for _ in range(job.repeats + 1)]
    base_copy = base.replace()
    # One whole cycle uncounted: the first counted loop then starts from the heap
    # every later one starts from (what a cycle leaves), not from what setup left.
    _measure(copies.pop(), ns, cg, collect=False)
    cg.start_instrumentation()
    for code in copies:
        _measure(code, ns, cg)
        cg.dump_stats("opbench stmt")
    if job.collect_baseline:
        _measure(base_copy, ns, cg)
        cg.dump_stats("opbench baseline")
    cg.stop_instrumentation()


_LIBRARIES: dict[str, Any] = {}


def _run_cpp(job: Job, cg: Any) -> None:
    import ctypes
    from pathlib import Path

    if job.import_torch:
        import torch  # noqa: F401  (libtorch's symbols, for the library to bind against)
    _set_threads(job.num_threads)
    from opbench.engines.cpp.engine import _Library

    lib = _LIBRARIES.get(job.library)
    if lib is None:
        lib = _LIBRARIES[job.library] = _Library(Path(job.library))

    def address(fn: Any) -> int:
        return ctypes.cast(fn, ctypes.c_void_p).value or 0

    error = cg.measure_cpp_timer(
        address(lib.open), address(lib.run), address(lib.set_collect), address(lib.error),
        address(lib.close), warmup=min(job.number, 10), number=job.number,
        repeats=job.repeats, reason="opbench stmt")
    if error:
        raise RuntimeError(error)


def exception_pickle(e: BaseException) -> bytes | None:
    """``e`` pickled, or None when it does not pickle or cannot be rebuilt (the memory
    child sends its statement's exception back the same way)."""
    try:
        data = pickle.dumps(e)
        pickle.loads(data)  # some exceptions pickle but cannot be rebuilt
        return data
    except Exception:
        return None


def _failure(fn: Callable[..., None], *args: Any) -> tuple[bytes | None, str, str] | None:
    """Runs fn(*args); None, or its exception as (pickle, text, traceback)."""
    try:
        fn(*args)
    except BaseException as e:  # the statement's own error, whatever it is
        return exception_pickle(e), f"{type(e).__name__}: {e}", traceback.format_exc()
    return None


_T = TypeVar("_T")


def _on_new_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """fn(*args) on a new thread (fn must not raise).

    Why: glibc's malloc gives each thread an arena, and torch's CPU allocator
    (posix_memalign, which bypasses malloc's per-thread cache) carves every
    tensor from the arena's free chunks, so a statement's count depends on what
    its arena held before. The main thread's arena holds the worker's start-up,
    interpreter and imports, whose pattern of allocations follows the hash seed
    and differs from one worker to the next; a new thread's arena holds only
    what this statement's setup and runs put there, so the statement counts the
    same in every worker, in a sweep or alone. (Setup runs on the same thread,
    so thread-local state it sets, such as inference mode, holds in the loop.)
    """
    out: list[_T] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)),
                              name="opbench-callgrind-statement", daemon=True)
    thread.start()
    thread.join()
    return out[0]


def _child(cg: Any, replies: int, work_dir: str) -> None:
    """A forked child: runs the job the caller left in JOB_FILE, sends its outcome, exits."""
    try:
        with open(os.path.join(work_dir, JOB_FILE), "rb") as f:
            job: Job = pickle.load(f)
        log = os.open(os.path.join(work_dir, f"job.{os.getpid()}.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        cg.pad_heap_top()
        if job.kind == "cpp":
            failure = _failure(_run_cpp, job, cg)
        else:
            failure = _on_new_thread(_failure, _run_python, job, cg)
        send(replies, ("error", *failure) if failure else ("done",))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        # Skip interpreter teardown (slow under valgrind, and nothing left to measure).
        os._exit(0)


def _fork(cg: Any, replies: int, work_dir: str | None) -> None:
    """One turn of the server's loop: fork, report the child's pid, wait, report its
    exit status. The same few objects are made and freed every turn, so the server
    is in the same state at every fork (``work_dir`` None: a child that exits at once)."""
    pid = os.fork()
    if pid == 0:
        if work_dir is None:
            os._exit(0)
        _child(cg, replies, work_dir)
    send(replies, ("started", pid))
    send(replies, ("exited", os.waitpid(pid, 0)[1]))


def main() -> None:
    """The worker's main loop. argv: the request and reply pipes' file descriptors and
    the folder it shares with the caller (whose PRELOAD_FILE names modules to import
    first)."""
    requests, replies, work_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    from opbench._C import callgrind as cg

    if not cg.running_on_valgrind():
        sys.exit("opbench callgrind worker: not running under valgrind")
    # Imported once, here: every child inherits them. A module that fails to
    # import is left to the statements that need it.
    with open(os.path.join(work_dir, PRELOAD_FILE)) as f:
        for name in f.read().split():
            try:
                importlib.import_module(name)
            except BaseException:
                pass
    sys.stdout.flush()
    sys.stderr.flush()
    # Switching instrumentation on discards every translation valgrind holds, and
    # the imports left many (seconds to discard in each child): discard them once
    # here. The objects made so far are frozen, so that no child's collections
    # traverse them.
    cg.start_instrumentation()
    cg.stop_instrumentation()
    gc.collect()
    gc.freeze()
    # One turn with no job: the first real fork then happens in the state every later
    # one does (the objects a turn makes have been made and freed once).
    _fork(cg, replies, None)
    send(replies, ("ready", os.getpid()))
    # A job is announced by one byte (a cached bytes object: nothing allocated here);
    # the job itself is read from a file by the child, never by the server.
    while os.read(requests, 1) == b"J":
        _fork(cg, replies, work_dir)
    os._exit(0)
