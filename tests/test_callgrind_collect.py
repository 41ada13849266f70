"""collect_callgrind end to end, under real valgrind. Runs are slow (seconds
each), so each collection is shared through a module-scoped fixture."""
from __future__ import annotations

import functools
import math
import os
import signal
import sys
import threading
import time

import pytest

import opbench
from opbench.callgrind import collect as cg_collect
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import _NOISY_SYMBOL
from opbench.callgrind.stats import CallgrindStats

REASON = cg_collect.callgrind_unavailable_reason()
needs_valgrind = pytest.mark.skipif(REASON is not None, reason=str(REASON))


@pytest.fixture(scope="module")
def py_stats():
    """One pure-Python collection: baseline, two repeats, raw files kept, a copied global."""
    # The child fails (NameError) unless the global and its setup crossed over.
    glob = {"n": opbench.CopyIfCallgrind(7, setup="import fractions")}
    return opbench.Timer("y = x * n", setup="x = 3", globals=glob).collect_callgrind(
        number=100, repeats=2, retain_out_file=True)


@needs_valgrind
@pytest.mark.slow
def test_python_statement_repeats(py_stats):
    assert isinstance(py_stats, tuple) and len(py_stats) == 2
    first, second = py_stats
    assert first.number_per_run == 100 and first.task_spec.stmt == "y = x * n"
    # The statement costs more than the empty loop, and exactly the same in both
    # repeats (denoised: the dict lookups follow hash randomisation).
    assert first.counts() > first.baseline_exclusive_stats.sum() > 0
    assert first.counts(denoise=True) == second.counts(denoise=True)
    assert first.baseline_exclusive_stats is second.baseline_exclusive_stats
    assert "y = x * n" in repr(first) and "100 runs per measurement, 1 thread" in repr(first)
    # Inclusive rows cover the exclusive ones (a function includes its own cost).
    incl = {fn: c for c, fn in first.stats(inclusive=True)}
    assert all(incl.get(fn, c) >= c for c, fn in first.stats())


@needs_valgrind
@pytest.mark.slow
def test_retained_file_is_what_was_parsed(py_stats):
    raw = py_stats[0].stmt_callgrind_out
    assert raw is not None and "events: Ir" in raw
    parsed = parse_callgrind_out(raw.splitlines())
    assert sum(parsed.exclusive.values()) == py_stats[0].counts()


@needs_valgrind
@pytest.mark.skipif(cg_collect.shutil.which("callgrind_annotate") is None,
                    reason="callgrind_annotate not installed")
@pytest.mark.slow
def test_parser_matches_callgrind_annotate_on_real_file(py_stats, tmp_path):
    from test_callgrind import annotate_matches

    path = tmp_path / "callgrind.out.1"
    path.write_text(py_stats[0].stmt_callgrind_out)
    annotate_matches(str(path))


@needs_valgrind
@pytest.mark.slow
def test_single_result_without_baseline_for_a_callable():
    # A picklable callable stmt; repeats=None gives one CallgrindStats, not a tuple.
    stats = opbench.Timer(functools.partial(math.factorial, 20)).collect_callgrind(
        number=10, collect_baseline=False)
    assert isinstance(stats, CallgrindStats)
    assert len(stats.baseline_exclusive_stats) == 0 and stats.stmt_callgrind_out is None
    assert any("factorial" in fn for _, fn in stats.stats())


@needs_valgrind
@pytest.mark.slow
def test_denoise_removes_interpreter_noise_on_a_torch_statement():
    pytest.importorskip("torch")
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import FunctionCounts

    import torch_bugs

    stats = opbench.Timer("x += 1", setup="x = torch.ones((1,))").collect_callgrind(number=100)
    noisy = stats.stats().filter(lambda fn: _NOISY_SYMBOL.search(fn) is not None)
    assert noisy.sum() > 0
    assert stats.counts(denoise=True) == stats.counts() - noisy.sum()
    # torch 2.13's own filter (a symbol CPython 3.11 renamed) finds nothing here.
    theirs = FunctionCounts(tuple(stats.stats()), inclusive=False).denoise()
    if torch_bugs.denoise_keeps_the_py311_dict_lookup() and sys.version_info >= (3, 11):
        assert theirs.sum() == stats.counts()
    else:
        assert theirs.sum() == stats.counts(denoise=True)
    assert any("at::" in fn or "libtorch" in fn for _, fn in stats.stats())


# -- errors -------------------------------------------------------------------------------

def test_valgrind_missing_names_the_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(OSError, match="`valgrind`"):
        opbench.Timer("pass").collect_callgrind()


def test_extension_without_client_requests_says_why(monkeypatch):
    from opbench import _C

    monkeypatch.setattr(cg_collect.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(_C.callgrind, "available", lambda: False)
    with pytest.raises(OSError, match="built without valgrind's headers"):
        opbench.Timer("pass").collect_callgrind()


@needs_valgrind
def test_globals_must_be_wrapped():
    with pytest.raises(ValueError, match="wrapped in `CopyIfCallgrind`"):
        opbench.Timer("x", globals={"x": 1}).collect_callgrind()


@needs_valgrind
def test_unpicklable_global_is_named():
    glob = {"lock": opbench.CopyIfCallgrind(threading.Lock())}
    with pytest.raises(ValueError, match=r"global 'lock'.*does not serialize"):
        opbench.Timer("lock", globals=glob).collect_callgrind()


@needs_valgrind
@pytest.mark.slow
def test_child_failure_quotes_its_stderr():
    setup = ("from opbench._C import callgrind as c\n"
             "if c.running_on_valgrind(): raise RuntimeError('boom in the child')")
    with pytest.raises(OSError, match=r"(?s)child process failed.*boom in the child"):
        opbench.Timer("pass", setup=setup).collect_callgrind(number=1)


@needs_valgrind
@pytest.mark.slow
def test_ctrl_c_kills_the_child_and_removes_files(monkeypatch):
    from opbench.callgrind import worker as cg_worker

    started: list[cg_worker.Worker] = []
    real_run = cg_worker.Worker.run

    def spy(self, job, on_dump=None):
        started.append(self)
        # Ctrl-C arrives while we wait for the statement's process.
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        return real_run(self, job, on_dump)

    monkeypatch.setattr(cg_worker.Worker, "run", spy)
    setup = ("import time\nfrom opbench._C import callgrind as c\n"
             "if c.running_on_valgrind(): time.sleep(120)")
    with pytest.raises(KeyboardInterrupt):
        opbench.Timer("pass", setup=setup).collect_callgrind(number=1)
    (worker,) = started
    assert not worker.alive and not os.path.exists(worker.dir)
    # The statement's own process (the worker's child, in its process group) is gone too.
    assert group_ends(worker.pid)


def group_ends(pgid: int, timeout: float = 10.0) -> bool:
    """Whether process group `pgid` is empty within `timeout` s (a killed process
    lingers until the kernel, then init, is done with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@needs_valgrind
@pytest.mark.slow
def test_repeats_show_progress_when_asked(monkeypatch, capsys):
    monkeypatch.setenv("OPBENCH_PROGRESS", "1")
    stats = opbench.Timer("sum(range(10))").collect_callgrind(number=10, repeats=2)
    assert len(stats) == 2
    err = capsys.readouterr().err
    assert "callgrind" in err and "3/3" in err  # two repeats and the baseline
