"""pytest-benchmark's ``benchmark`` fixture, served by opbench where pytest-benchmark is not
there, so a suite written for pytest-benchmark runs unchanged under opbench.

Where pytest-benchmark is installed and active, this module stays out of its way
(its fixture, marker and options are pytest-benchmark's own): it is registered
as a plugin only when pytest-benchmark is absent or blocked (``-p no:benchmark``).
Then it provides:

* the ``benchmark`` fixture with pytest-benchmark's API: ``benchmark(fn, *args,
  **kwargs)`` times ``fn(*args, **kwargs)`` with opbench (blocks, the busy
  machine's disturbance, turns in ``opbench ab``, instruction mode: whatever the
  ``opbench`` fixture does) and returns what ``fn`` returns;
  ``benchmark.pedantic(target, args=(), kwargs=None, setup=None, teardown=None,
  rounds=1, warmup_rounds=0, iterations=1)`` runs exactly ``rounds`` timed rounds
  of ``iterations`` calls (``setup`` before each, which may return ``(args,
  kwargs)``); ``benchmark.extra_info`` (a dict saved with the result),
  ``benchmark.group``, ``.name``, ``.fullname``, ``.param``, ``.params``, and after
  the run ``benchmark.stats`` (``stats.stats.min``, ``.mean``, ``.median``...,
  ``stats["mean"]``). A fixture is used once per test, as pytest-benchmark's;
* the ``@pytest.mark.benchmark(group=..., max_time=..., min_rounds=...)`` marker;
* pytest-benchmark's options where they mean something under opbench:
  ``--benchmark-disable`` (each benchmark runs once, untimed), ``--benchmark-enable``,
  ``--benchmark-skip`` / ``--benchmark-only``, ``--benchmark-max-time`` (seconds a
  benchmark measures at most), ``--benchmark-min-rounds`` (blocks at least, on top
  of ``--opbench-min-samples``), ``--benchmark-autosave`` (opbench's autosave) and
  ``--benchmark-json PATH`` (the results in pytest-benchmark's JSON, for tools
  that read it). ``--benchmark-min-time``, ``--benchmark-warmup``,
  ``--benchmark-warmup-iterations``, ``--benchmark-disable-gc``,
  ``--benchmark-timer`` and ``--benchmark-calibration-precision`` are accepted and
  have no effect (opbench sizes its blocks, warms up, times with the garbage
  collector off and with its own clock); the session header says so.

Each benchmark's key is its test's node id, pytest-benchmark's ``fullname``, so a
saved pytest-benchmark JSON file is a baseline for opbench's gate
(``opbench.store.pytest_benchmark_file``). Its results are opbench's: the summary
table, ``--opbench-save``, ``--opbench-compare``, ``opbench ab``.

Example (a test file, run with ``pytest -p no:benchmark`` where pytest-benchmark is
installed)::

    def test_sort(benchmark):
        result = benchmark(sorted, list(range(1000, 0, -1)))
        assert result[0] == 1
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from opbench.integrations.pytest_plugin.fixture import BenchmarkFixture, on_fastest_cpu
from opbench.integrations.pytest_plugin.state import state_of

__all__ = ["FixtureAlreadyUsed", "PytestBenchmarkFixture", "benchmark", "is_needed", "register"]

# The name this module is registered under as a plugin.
PLUGIN_NAME = "opbench-benchmark-compat"
# pytest-benchmark's plugin names: its entry point's, and its module's (with -p).
_THEIRS = ("benchmark", "pytest_benchmark.plugin")
# Options accepted for pytest-benchmark's suites that have no effect under opbench.
_IGNORED = {"min_time": "opbench sizes its blocks itself",
            "warmup": "opbench warms every benchmark up",
            "warmup_iterations": "opbench warms every benchmark up",
            "disable_gc": "opbench times with the garbage collector off, as timeit does",
            "timer": "opbench times with its own clock",
            "calibration_precision": "opbench sizes its blocks itself"}
# The marker's arguments that mean something under opbench.
_MARKER_ARGS = ("group", "max_time", "min_rounds", *_IGNORED)
_RECORDED = pytest.StashKey[list[tuple["PytestBenchmarkFixture", Any]]]()


class FixtureAlreadyUsed(Exception):
    """A second use of one test's ``benchmark`` fixture (pytest-benchmark refuses it too)."""


def is_needed(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-benchmark will not serve ``benchmark`` in this session: blocked
    (``-p no:benchmark``), or neither registered nor installed for autoloading."""
    if any(pluginmanager.is_blocked(name) for name in _THEIRS):
        return True
    if any(pluginmanager.has_plugin(name) for name in _THEIRS):
        return False
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return True
    return not any(ep.name == "benchmark" and ep.value.startswith("pytest_benchmark")
                   for ep in importlib.metadata.entry_points(group="pytest11"))


def register(pluginmanager: pytest.PytestPluginManager) -> None:
    """Registers this module as a plugin when pytest-benchmark will not serve
    ``benchmark`` (``is_needed``)."""
    if is_needed(pluginmanager) and not pluginmanager.has_plugin(PLUGIN_NAME):
        pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchmark", "pytest-benchmark's options, served by opbench "
                                         "(pytest-benchmark is not active)")
    add = group.addoption
    add("--benchmark-disable", action="store_true", default=False,
        help="run each benchmark once, untimed (as --opbench-disable).")
    add("--benchmark-enable", action="store_true", default=False,
        help="time the benchmarks (the default).")
    add("--benchmark-skip", action="store_true", default=False,
        help="skip the tests that use the benchmark fixture.")
    add("--benchmark-only", action="store_true", default=False,
        help="skip the tests that do not use the benchmark fixture.")
    add("--benchmark-max-time", type=float, default=None, metavar="SECONDS",
        help="seconds a benchmark measures at most (default: opbench's --opbench-max-time).")
    add("--benchmark-min-rounds", type=int, default=None, metavar="NUM",
        help="blocks a benchmark measures at least, on top of --opbench-min-samples.")
    add("--benchmark-autosave", action="store_true", default=False,
        help="save the results as this machine's next run (as --opbench-autosave).")
    add("--benchmark-json", metavar="PATH", default=None,
        help="also write the results in pytest-benchmark's JSON format to PATH.")
    for name, why in _IGNORED.items():
        add(f"--benchmark-{name.replace('_', '-')}", default=None, metavar="VALUE",
            help=f"accepted for pytest-benchmark's suites; no effect: {why}.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "benchmark(group=None, max_time=None, min_rounds=None): pytest-benchmark's "
                   "marker, served by opbench: the summary group, seconds at most, blocks "
                   "at least")
    config.stash[_RECORDED] = []
    state = state_of(config)
    if state is not None and config.getoption("benchmark_autosave"):
        state.autosave = True


def pytest_report_header(config: pytest.Config) -> list[str]:
    ignored = [f"--benchmark-{n.replace('_', '-')}" for n in _IGNORED
               if config.getoption(f"benchmark_{n}") is not None]
    lines = ["opbench: serving pytest-benchmark's `benchmark` fixture (pytest-benchmark is not "
             "active)"]
    if ignored:
        lines.append(f"opbench: no effect under opbench: {', '.join(ignored)}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip, only = config.getoption("benchmark_skip"), config.getoption("benchmark_only")
    if not (skip or only):
        return
    for item in items:
        uses = "benchmark" in getattr(item, "fixturenames", ())
        if skip and uses:
            item.add_marker(pytest.mark.skip(reason="benchmarks are skipped (--benchmark-skip)"))
        elif only and not uses:
            item.add_marker(pytest.mark.skip(reason="not a benchmark (--benchmark-only)"))


class _Stats:
    """pytest-benchmark's ``Stats`` of one benchmark, from its per-call times."""

    fields = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "ops",
              "total")

    def __init__(self, data: list[float]) -> None:
        self.data = list(data)
        ordered = sorted(self.data)
        self.rounds = len(ordered)
        self.min, self.max = ordered[0], ordered[-1]
        self.mean = statistics.fmean(ordered)
        self.stddev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
        self.median = statistics.median(ordered)
        quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
        self.q1, self.q3 = quartiles[0], quartiles[2]
        self.iqr = self.q3 - self.q1
        self.total = sum(ordered)
        self.ops = self.rounds / self.total if self.total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {field: getattr(self, field) for field in self.fields}


class _Metadata:
    """pytest-benchmark's ``benchmark.stats``: ``.stats`` (the figures), ``["mean"]``."""

    def __init__(self, fixture: PytestBenchmarkFixture, data: list[float],
                 iterations: int) -> None:
        self.name, self.fullname, self.group = fixture.name, fixture.fullname, fixture.group
        self.extra_info = fixture.extra_info
        self.iterations = iterations
        self.stats = _Stats(data)

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self.stats, key)
        except AttributeError:
            return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except AttributeError:
            return default


class _Rounds:
    """pedantic's rounds: each prepared, its ``iterations`` calls timed (with the busy
    machine's signals), then torn down; ``times`` holds the timed rounds' seconds and
    ``out`` the last call's result."""

    def __init__(self, target: Callable[..., Any],
                 prepared: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
                 teardown: Callable[..., Any] | None, iterations: int, probe: Any) -> None:
        self._target, self._prepared, self._teardown = target, prepared, teardown
        self._iterations, self._probe = iterations, probe
        self.times: list[float] = []
        self.out: Any = None

    def run(self, timed: bool) -> None:
        a, k = self._prepared()
        if self._probe is not None:
            self._probe.begin()
        start = time.perf_counter()
        for _ in range(self._iterations):
            self.out = self._target(*a, **k)
        elapsed = max(time.perf_counter() - start, 1e-9)
        if self._probe is not None:
            self._probe.end(elapsed)
        if self._teardown is not None:
            self._teardown(*a, **k)
        if timed:
            self.times.append(elapsed)


class PytestBenchmarkFixture:
    """The ``benchmark`` fixture (module doc): pytest-benchmark's API over opbench."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        node = request.node
        config = request.config
        marker = node.get_closest_marker("benchmark")
        self._options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
        unknown = set(self._options) - set(_MARKER_ARGS)
        if marker is not None and (marker.args or unknown):
            raise ValueError(f"@pytest.mark.benchmark takes only keyword arguments among "
                             f"{', '.join(_MARKER_ARGS)}; got {marker.args or sorted(unknown)}")
        self.name: str = node.name
        self.fullname: str = node.nodeid
        callspec = getattr(node, "callspec", None)
        self.param = callspec.id if callspec is not None else None
        self.params = callspec.params if callspec is not None else None
        self.group: str | None = self._options.get("group")
        self.extra_info: dict[str, Any] = {}
        self.stats: _Metadata | None = None
        self.has_error = False
        state = state_of(config)
        assert state is not None  # made by opbench's pytest_configure, before any test runs
        self._state = state
        self._config = config
        self._opbench = BenchmarkFixture(node, self._state)
        self._mode: str | None = None

    @property
    def disabled(self) -> bool:
        return bool(self._config.getoption("benchmark_disable") or self._state.disabled)

    @property
    def enabled(self) -> bool:
        return not self.disabled

    def _use(self, mode: str) -> None:
        if self._mode is not None:
            self.has_error = True
            raise FixtureAlreadyUsed(f"the benchmark fixture can be used once per test; it "
                                     f"was used already as {self._mode}")
        self._mode = mode

    def _limits(self) -> dict[str, Any]:
        """What the options and the marker ask of opbench's measurement."""
        max_time = self._options.get("max_time", self._config.getoption("benchmark_max_time"))
        rounds = self._options.get("min_rounds", self._config.getoption("benchmark_min_rounds"))
        limits: dict[str, Any] = {}
        if max_time is not None:
            limits["max_run_time"] = float(max_time)
            limits["min_run_time"] = min(self._state.min_time, float(max_time))
        if rounds is not None:
            limits["min_samples"] = max(int(rounds), self._state.min_samples)
        return limits

    def _record(self, result: Any, data: list[float] | None, iterations: int) -> None:
        if self.group is not None:
            result.info["group"] = self.group
        result.info["extra_info"] = self.extra_info  # filled in until the session saves it
        if data is not None:
            self.stats = _Metadata(self, data, iterations)
            self._config.stash[_RECORDED].append((self, result))

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any,
                 **kwargs: Any) -> Any:
        """Times ``function_to_benchmark(*args, **kwargs)`` and returns what it returns
        (from one more call after the timing, as pytest-benchmark does)."""
        self._use("benchmark(...)")
        if self.disabled:
            return function_to_benchmark(*args, **kwargs)
        fn = functools.partial(function_to_benchmark, *args, **kwargs) if args or kwargs \
            else function_to_benchmark
        try:
            result = self._opbench(fn, **self._limits())
        except Exception:
            self.has_error = True
            raise
        times = getattr(result, "times", None)
        self._record(result, list(times) if times is not None else None, 1)
        return function_to_benchmark(*args, **kwargs)

    def pedantic(self, target: Callable[..., Any], args: tuple[Any, ...] = (),
                 kwargs: dict[str, Any] | None = None, setup: Callable[[], Any] | None = None,
                 teardown: Callable[..., Any] | None = None, rounds: int = 1,
                 warmup_rounds: int = 0, iterations: int = 1) -> Any:
        """Exactly ``rounds`` timed rounds of ``iterations`` calls of ``target`` (after
        ``warmup_rounds`` untimed ones), ``setup`` before each round (it may return
        ``(args, kwargs)``) and ``teardown(*args, **kwargs)`` after; returns the last
        call's result. In instruction mode the calls are counted instead (``setup`` runs
        once)."""
        self._use("benchmark.pedantic(...)")
        for name, value, least in (("rounds", rounds, 1), ("iterations", iterations, 1),
                                   ("warmup_rounds", warmup_rounds, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        if setup is not None and iterations > 1:
            raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")
        call_args, call_kwargs = tuple(args), dict(kwargs or {})

        def prepared() -> tuple[tuple[Any, ...], dict[str, Any]]:
            got = setup() if setup is not None else None
            return (tuple(got[0]), dict(got[1])) if got else (call_args, call_kwargs)

        if self.disabled:
            a, k = prepared()
            once = target(*a, **k)
            if teardown is not None:
                teardown(*a, **k)
            return once
        if self._state.mode != "time":  # counted: one setup, the calls as opbench counts them
            a, k = prepared()
            result = self._opbench(functools.partial(target, *a, **k))
            self._record(result, None, iterations)
            return target(*a, **k)
        from opbench.core import disturbance

        probe = disturbance.Probe(1) if disturbance.enabled() else None
        rounds_run = _Rounds(target, prepared, teardown, iterations, probe)
        with self._timing():
            for i in range(warmup_rounds + rounds):
                rounds_run.run(timed=i >= warmup_rounds)
        times = rounds_run.times
        info: dict[str, Any] = {"pedantic": {"rounds": rounds, "warmup_rounds": warmup_rounds,
                                             "iterations": iterations}}
        signals = probe.record(times) if probe is not None else None
        if signals is not None:
            info[disturbance.INFO_KEY] = signals
        result = self._measurement(target, iterations, times, info)
        self._state.results.append(result)
        self._record(result, [t / iterations for t in times], iterations)
        return rounds_run.out

    @contextlib.contextmanager
    def _timing(self) -> Iterator[None]:
        """Where pedantic's rounds are timed, as the opbench fixture times its blocks: on the
        fastest CPU (or in turns, in an `opbench ab` wave), under the xdist lock."""
        turns = self._state.turns
        with self._state.timed(), (contextlib.nullcontext() if turns is not None
                                   else on_fastest_cpu(1)):
            if turns is not None:
                turns.acquire()
            try:
                yield
            finally:
                if turns is not None:
                    turns.release()

    def _measurement(self, target: Callable[..., Any], iterations: int, times: list[float],
                     info: dict[str, Any]) -> Any:
        from opbench.core.identity import pytest_key
        from opbench.core.measurement import Measurement, TaskSpec

        spec = TaskSpec(f"{getattr(target, '__qualname__', repr(target))}(...)", "pass",
                        label=self.fullname, name=pytest_key(self.fullname, None, 0))
        return Measurement(iterations, times, spec, info=info)

    def weave(self, target: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("benchmark.weave (aspectlib) is pytest-benchmark's own: "
                                  "install pytest-benchmark for it, or call benchmark(fn)")


@pytest.fixture
def benchmark(request: pytest.FixtureRequest) -> PytestBenchmarkFixture:
    """pytest-benchmark's fixture, served by opbench: ``benchmark(fn, *args, **kwargs)``."""
    return PytestBenchmarkFixture(request)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--benchmark-json``: the benchmarks in pytest-benchmark's JSON."""
    config = session.config
    path = config.getoption("benchmark_json")
    recorded = config.stash.get(_RECORDED, [])
    if not path or not recorded or hasattr(config, "workerinput"):
        return
    import json

    from opbench._files import atomic_write_text
    from opbench.environment import collect

    env = collect()
    doc = {
        "machine_info": {"node": platform.node(), "processor": platform.processor(),
                         "machine": platform.machine(), "python_implementation":
                         platform.python_implementation(), "python_version":
                         platform.python_version(), "system": platform.system(),
                         "release": platform.release(),
                         "cpu": {"brand_raw": env.get("cpu_model"), "count": env.get("cpu_count")}},
        "commit_info": {"id": env.get("git_commit")},
        "benchmarks": [{"group": f.group, "name": f.name, "fullname": f.fullname,
                        "params": f.params, "param": f.param, "extra_info": f.extra_info,
                        "options": {"timer": "opbench"},
                        "stats": {**f.stats.stats.as_dict(), "data": f.stats.stats.data,
                                  "iterations": f.stats.iterations}}
                       for f, _ in recorded if f.stats is not None],
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": "opbench-compat",
    }
    atomic_write_text(path, json.dumps(doc, indent=1, default=str))
