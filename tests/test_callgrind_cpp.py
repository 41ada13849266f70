"""collect_callgrind for language="c++" Timers, under real valgrind, on torch-free
statements (each library compiles in about a second; each collection takes a
couple of seconds). The child drives the timer's own cached library, which
toggles collection around its loop, so counts are exact multiples of the
statement's instructions plus a few of loop entry/exit."""
from __future__ import annotations

import shutil

import pytest

import opbench
from opbench.callgrind import collect as cg_collect
from opbench.callgrind.stats import CallgrindStats
from opbench.engines.cpp.engine import CppEngine as CppTimer

REASON = cg_collect.callgrind_unavailable_reason()
needs_valgrind = pytest.mark.skipif(REASON is not None, reason=str(REASON))
pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="no C++ compiler on PATH")

# Ten dependent adds through a volatile: nothing for the compiler to fold.
SETUP = "volatile std::int64_t acc = 0;"
STMT = "for (int k = 0; k < 10; ++k) acc = acc + k;"
# Loop entry and exit around the measured runs (the toggles' own branches).
MAX_FIXED = 64


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("opbench-cpp-cache")))
        yield


def _timer(stmt: str = STMT, setup: str = SETUP, global_setup: str = "") -> opbench.Timer:
    return opbench.Timer(stmt, setup=setup, global_setup=global_setup, language="c++")


@pytest.fixture(scope="module")
def runs() -> dict[int, tuple[CallgrindStats, ...]]:
    """number=100 twice (kept files) and number=200 once, baseline asked for."""
    if REASON is not None:
        pytest.skip(REASON)
    return {
        100: _timer().collect_callgrind(number=100, repeats=2, retain_out_file=True),
        200: (_timer().collect_callgrind(number=200, collect_baseline=True),),
    }


@needs_valgrind
def test_counts_scale_exactly_with_number(runs) -> None:
    c100, c200 = runs[100][0].counts(), runs[200][0].counts()
    per_run, rem = divmod(c200 - c100, 100)
    assert rem == 0 and per_run >= 10  # at least one instruction per add
    fixed = c100 - 100 * per_run
    assert 0 <= fixed <= MAX_FIXED  # no Python, ctypes or clock reads counted
    assert c200 - 2 * c100 == -fixed


@needs_valgrind
def test_repeats_are_identical_and_a_tuple(runs) -> None:
    first, second = runs[100]
    assert first.counts() == second.counts() > 0
    assert list(first.stats()) == list(second.stats())


@needs_valgrind
def test_no_baseline_for_cpp_as_torch(runs) -> None:
    (stats,) = runs[200]  # collect_baseline=True is ignored for C++, as in torch
    assert isinstance(stats, CallgrindStats)
    assert len(stats.baseline_exclusive_stats) == 0 and len(stats.baseline_inclusive_stats) == 0
    assert stats.number_per_run == 200 and stats.stmt_callgrind_out is None


@needs_valgrind
def test_repr_and_stats_name_the_statement(runs) -> None:
    stats = runs[100][0]
    text = repr(stats)
    assert STMT in text and f"setup: {SETUP}" in text
    assert "100 runs per measurement, 1 thread" in text
    # The only function with cost is the generated loop, holding the inlined
    # statement. torch drops an exclusive row equal to the program total, which
    # here would report 0 instructions; opbench keeps it.
    (row,) = list(stats.stats())
    assert row.count == stats.counts() and "opbench_body_" in row.function
    assert "events: Ir" in stats.stmt_callgrind_out


@needs_valgrind
def test_setup_runs_once_and_state_persists() -> None:
    # The loop counts up from setup's value; a statement that stops doing work
    # once state reaches a threshold shows setup was not re-run before the block.
    t = _timer(stmt="if (n < 150) { n = n + 1; }", setup="volatile int n = 0;")
    more, fewer = t.collect_callgrind(number=100, repeats=2)
    # Warm-up (1 + 10 runs) left n=11: 100 increments, then 39 and 61 skipped.
    assert more.counts() > fewer.counts() > 0


@needs_valgrind
def test_child_exception_is_reported() -> None:
    setup = ('if (opbench::callgrind::running_on_valgrind()) '
             'throw std::runtime_error("boom in the child");')
    with pytest.raises(OSError, match=r"(?s)child process failed.*boom in the child"):
        _timer(stmt="", setup=setup, global_setup="#include <stdexcept>").collect_callgrind(
            number=1)


def test_valgrind_missing_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _timer()
    t.timeit(1)  # compile while the compiler is still on PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(OSError, match="`valgrind`"):
        t.collect_callgrind()


@needs_valgrind
def test_library_without_valgrind_headers_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CppTimer, "callgrind_available", lambda self: False)
    with pytest.raises(OSError, match="built without valgrind's headers"):
        _timer().collect_callgrind()


def test_globals_are_rejected() -> None:
    with pytest.raises(ValueError, match="does not support globals"):
        opbench.Timer("", globals={"x": 1}, language="c++")
