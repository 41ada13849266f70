"""collect_callgrind_all: one callgrind worker serving many statements, under real valgrind.

Counts from a sweep equal counts from one-statement collect_callgrind calls;
faults (a statement that raises, one that crashes its process, a worker that
dies, an unpicklable global, Ctrl-C) are reported and survived as documented;
repeated C++ collections are identical; CopyIfCallgrind's setup runs where
unpickling looks. Collections are shared through module-scoped fixtures.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import opbench
from opbench.callgrind import collect as cg_collect
from opbench.callgrind import worker as cg_worker
from opbench.callgrind.stats import CallgrindStats
from opbench.callgrind.worker import ChildTraceback
from test_callgrind_collect import group_ends
from test_callgrind_cpp import SETUP as CPP_SETUP  # ten adds through a volatile: no allocation
from test_callgrind_cpp import STMT as CPP_STMT

pytestmark = pytest.mark.skipif(cg_collect.callgrind_unavailable_reason() is not None,
                                reason=str(cg_collect.callgrind_unavailable_reason()))
HAS_COMPILER = any(shutil.which(c) for c in ("c++", "g++", "clang++"))
needs_compiler = pytest.mark.skipif(not HAS_COMPILER, reason="no C++ compiler on PATH")

# Only under valgrind, i.e. in the worker (every statement first runs once here).
UNDER_VALGRIND = "from opbench._C import callgrind as _cg\nif _cg.running_on_valgrind(): "
# Allocates as torch's CPU allocator does (posix_memalign, 64-byte aligned) plus a
# small object: counts that depend on the state of glibc's heap.
CPP_ALLOC = """
void* data = nullptr;
if (posix_memalign(&data, 64, 48) != 0) throw std::bad_alloc();
auto* meta = new std::array<std::int64_t, 24>();
opbench::do_not_optimize(data);
opbench::do_not_optimize(meta);
delete meta;
free(data);
"""
CPP_ALLOC_INCLUDES = "#include <array>\n#include <cstdlib>\n#include <new>"


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("opbench-cpp-cache")))
        yield
    cg_worker.discard_shared()


def python_timers() -> list[opbench.Timer]:
    return [
        opbench.Timer("y = x * n", setup="x = 3",
                      globals={"n": opbench.CopyIfCallgrind(7)}, label="mul"),
        opbench.Timer("sorted(xs)", setup="xs = list(range(50, 0, -1))", label="sort"),
    ]


def cpp_timer(stmt: str = CPP_STMT, setup: str = CPP_SETUP,
              global_setup: str = "") -> opbench.Timer:
    return opbench.Timer(stmt, setup=setup, global_setup=global_setup, language="c++")


@pytest.fixture(scope="module")
def sweep() -> dict:
    """One sweep (Python and C++ statements, 2 repeats), then each statement alone."""
    timers = python_timers()
    if HAS_COMPILER:
        timers.append(cpp_timer())
    swept = opbench.collect_callgrind_all(timers, number=100, repeats=2)
    pid = cg_worker._shared.pid
    alone = [t.collect_callgrind(number=100, repeats=2) for t in timers]
    return {"timers": timers, "swept": swept, "alone": alone, "pid": pid}


@pytest.mark.slow
def test_sweep_returns_one_result_per_timer_in_order(sweep) -> None:
    assert len(sweep["swept"]) == len(sweep["timers"])
    for timer, result in zip(sweep["timers"], sweep["swept"]):
        assert isinstance(result, tuple) and len(result) == 2  # repeats=2
        assert all(isinstance(s, CallgrindStats) for s in result)
        assert result[0].task_spec.stmt == timer.task_spec.stmt
        assert result[0].number_per_run == 100
    # The Python statements' baselines were collected; C++ has none (as torch).
    assert sweep["swept"][0][0].baseline_exclusive_stats.sum() > 0


def _close(a: int, b: int, number: int = 100) -> bool:
    """Within 0.1% or 2 instructions a run, whichever is more."""
    return abs(a - b) <= max(1e-3 * max(a, b), 2 * number)


@pytest.mark.slow
def test_python_counts_equal_one_at_a_time(sweep) -> None:
    # Denoised (dict lookups follow each process's hash seed), and close: what is
    # left differs between processes and repeats by an instruction or two per
    # freed object, where the allocator's pools and arenas happen to lie (seen: 1 a
    # run of 516 between processes, once in ten CI runs; 4 a run of 4,950 between
    # repeats, for a list freed each run). C++ statements, below, count exactly.
    for swept, alone in zip(sweep["swept"][:2], sweep["alone"][:2]):
        ours = [s.counts(denoise=True) for s in swept]
        theirs = [s.counts(denoise=True) for s in alone]
        assert _close(*ours) and _close(*theirs), (ours, theirs)
        assert _close(ours[0], theirs[0]), (ours, theirs)


@needs_compiler
@pytest.mark.slow
def test_cpp_counts_equal_one_at_a_time_exactly(sweep) -> None:
    swept, alone = sweep["swept"][2], sweep["alone"][2]
    assert [s.counts() for s in swept] == [s.counts() for s in alone]
    assert list(swept[0].stats()) == list(alone[0].stats())


@pytest.mark.slow
def test_worker_serves_later_sweeps(sweep) -> None:
    # The sweep's worker is still up and serves the next call; repeats=1 gives a
    # CallgrindStats per Timer, not a tuple.
    (stats,) = opbench.collect_callgrind_all(python_timers()[:1], number=100)
    assert isinstance(stats, CallgrindStats)
    assert stats.counts(denoise=True) == sweep["swept"][0][0].counts(denoise=True)
    assert cg_worker._shared.pid == sweep["pid"]


@pytest.mark.slow
def test_progress_bar_over_the_sweep(monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPBENCH_PROGRESS", "1")
    opbench.collect_callgrind_all(python_timers(), number=10)
    err = capsys.readouterr().err
    assert "callgrind  2/2" in err and "`y = x * n` | mul" in err


@pytest.mark.slow
def test_changed_environment_gets_a_new_worker(monkeypatch) -> None:
    opbench.collect_callgrind_all(python_timers()[:1], number=10)
    before = cg_worker._shared.pid
    monkeypatch.setenv("OPBENCH_TEST_MARKER", "1")  # the worker's environment is the caller's
    t = opbench.Timer("import os\nv = os.environ['OPBENCH_TEST_MARKER']")
    (stats,) = opbench.collect_callgrind_all([t], number=10)
    assert stats.counts() > 0 and cg_worker._shared.pid != before


# -- faults -------------------------------------------------------------------------------

@pytest.mark.slow
def test_statement_error_is_its_own_and_the_worker_goes_on() -> None:
    bad = opbench.Timer("pass", setup=UNDER_VALGRIND + "1 / 0", label="bad")
    good = python_timers()[1]
    swept = opbench.collect_callgrind_all([good, bad, good], number=10, return_exceptions=True)
    assert isinstance(swept[0], CallgrindStats) and isinstance(swept[2], CallgrindStats)
    error = swept[1]
    assert isinstance(error, ZeroDivisionError)
    assert isinstance(error.__cause__, ChildTraceback)
    assert "<setup>" in str(error.__cause__) and "ZeroDivisionError" in str(error.__cause__)
    assert swept[0].counts() == swept[2].counts()
    # By default the error is raised; the worker that served it serves the next call.
    pid = cg_worker._shared.pid
    with pytest.raises(ZeroDivisionError):
        opbench.collect_callgrind_all([bad], number=10)
    opbench.collect_callgrind_all([good], number=10)
    assert cg_worker._shared.pid == pid


@pytest.mark.slow
def test_crashing_statement_is_named_and_the_rest_collected() -> None:
    crash = opbench.Timer("pass", setup=UNDER_VALGRIND + "import ctypes; ctypes.string_at(0)",
                          label="crasher")
    good = python_timers()[1]
    swept = opbench.collect_callgrind_all([crash, good], number=10, return_exceptions=True)
    error = swept[0]
    assert isinstance(error, opbench.CallgrindError) and isinstance(error, OSError)
    assert "timers[0], `pass` | crasher" in str(error) and "SIGSEGV" in str(error)
    assert isinstance(swept[1], CallgrindStats) and swept[1].counts() > 0
    with pytest.raises(opbench.CallgrindError, match="SIGSEGV"):
        opbench.collect_callgrind_all([crash], number=10)


@pytest.mark.slow
def test_dead_worker_is_reported_and_replaced() -> None:
    # The statement kills the worker itself: the sweep names it, and a new worker
    # serves the statements after it.
    killer = opbench.Timer(
        "pass", setup=UNDER_VALGRIND + "import os, signal; os.kill(os.getppid(), signal.SIGKILL)",
        label="killer")
    good = python_timers()[1]
    opbench.collect_callgrind_all([good], number=10)
    first = cg_worker._shared.pid
    swept = opbench.collect_callgrind_all([killer, good], number=10, return_exceptions=True)
    assert isinstance(swept[0], opbench.CallgrindError)
    assert "timers[0], `pass` | killer" in str(swept[0]) and "SIGKILL" in str(swept[0])
    assert isinstance(swept[1], CallgrindStats)
    assert cg_worker._shared.pid != first


def test_unpicklable_global_refused_before_the_worker_starts(monkeypatch) -> None:
    cg_worker.discard_shared()
    started = []
    monkeypatch.setattr(cg_worker.Worker, "_start", lambda self: started.append(self))
    timers = [python_timers()[1],
              opbench.Timer("lock", globals={"lock": opbench.CopyIfCallgrind(threading.Lock())})]
    with pytest.raises(opbench.SerializationError, match=r"timers\[1\]: global 'lock'"):
        opbench.collect_callgrind_all(timers, number=10)
    with pytest.raises(ValueError, match=r"CopyIfCallgrind.*timers\[0\]: global 'x'"):
        opbench.collect_callgrind_all([opbench.Timer("x", globals={"x": 1})], number=10)
    assert started == []


@pytest.mark.slow
def test_ctrl_c_ends_the_worker_and_removes_its_files(monkeypatch) -> None:
    opbench.collect_callgrind_all(python_timers()[1:], number=10)
    worker = cg_worker._shared
    sweep_dirs = []
    real_mkdtemp = cg_collect.tempfile.TemporaryDirectory

    def spy(*args, **kwargs):
        d = real_mkdtemp(*args, **kwargs)
        sweep_dirs.append(d.name)
        return d

    monkeypatch.setattr(cg_collect.tempfile, "TemporaryDirectory", spy)
    sleeper = opbench.Timer("pass", setup=UNDER_VALGRIND + "import time; time.sleep(120)")
    threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        opbench.collect_callgrind_all([sleeper], number=10)
    assert cg_worker._shared is None and not worker.alive
    assert group_ends(worker.pid)  # the worker and the statement's process
    assert not os.path.exists(worker.dir) and sweep_dirs and not os.path.exists(sweep_dirs[0])


# -- deterministic C++ counts -------------------------------------------------------------

@needs_compiler
@pytest.mark.slow
def test_cpp_collections_do_not_depend_on_the_heap_history(tmp_path, monkeypatch) -> None:
    # Counts of a statement that allocates depend on the state of the malloc heap
    # it allocates from. Before, that was the interpreter's main heap, shaped by
    # everything imported at start-up (as `import torch`, which differs with the
    # hash seed): counts differed from one collection to the next, and between
    # repeats. A start-up whose heap history follows the hash seed:
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""\
        keep = []
        for i, name in enumerate(sorted({f"k{i}" for i in range(300)}, key=hash)):
            block = bytearray(520 + 16 * (i % 9))
            if hash(name) % 3:
                keep.append(block)
        """))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    t = cpp_timer(CPP_ALLOC, setup="", global_setup=CPP_ALLOC_INCLUDES)
    counts = []
    for seed in ("1", "2", "3"):
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        counts.append([s.counts() for s in t.collect_callgrind(number=100, repeats=2)])
    assert counts[0] == counts[1] == counts[2]
    assert counts[0][0] == counts[0][1]
    # In a sweep, after other statements, the same again.
    swept = opbench.collect_callgrind_all([python_timers()[1], t], number=100, repeats=2)
    assert [s.counts() for s in swept[1]] == counts[0]


# -- CopyIfCallgrind's setup runs where unpickling looks (drop-in parity) -----------------

CALLER = '''\
import opbench

class Counter:  # pickled as __main__.Counter: resolvable only in the child's __main__
    def __init__(self, n):
        self.n = n

    def step(self):
        return self.n + 1

if __name__ == "__main__":
    via_import = opbench.CopyIfCallgrind(Counter(3), setup="from caller import Counter")
    via_definition = opbench.CopyIfCallgrind(Counter(4), setup={definition!r})
    for name, value in (("via_import", via_import), ("via_definition", via_definition)):
        stats = opbench.Timer("c.step()", globals={{"c": value}}).collect_callgrind(number=10)
        print(name, stats.counts() > 0)
'''

DEFINITION = '''\
class Counter:
    def __init__(self, n):
        self.n = n

    def step(self):
        return self.n + 1
'''


@pytest.mark.slow
def test_copy_if_callgrind_setup_resolves_classes_of_the_callers_main(tmp_path) -> None:
    # As torch: the class of a global pickled from the calling script (`__main__`)
    # resolves when the wrapper's setup imports it (from the script as a module)
    # or defines it.
    script = tmp_path / "caller.py"
    script.write_text(CALLER.format(definition=DEFINITION))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["via_import", "True", "via_definition", "True"]
