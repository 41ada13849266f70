"""Shared test helpers: a deterministic mock timer and paired torch/opbench objects.

Nothing here imports torch (nor numpy) at module level: torch-free tests run
where torch is not installed. The helpers that compare torch objects import it
when called."""
from __future__ import annotations

import os
import random
import re
import signal
import zlib

import pytest

# Whether the machine is busy must not change what a test sees: measurements take no
# disturbance signals here (nor in the processes tests start), unless a test turns
# them on (test_disturbance.py drives the verdicts with recorded signals).
os.environ["OPBENCH_DISTURBANCE"] = "off"

# A shell that starts pytest in the background (`cmd &` without job control) leaves
# SIGINT ignored, and the processes the Ctrl-C tests start inherit that: they would
# never see the interrupt they are tested on. A handler here is reset to the default
# in every child at exec, so each child Python turns SIGINT into KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from opbench.integrations.pytest_plugin.options import load_args


class MockTimer:
    """A deterministic stand-in for timeit.Timer, injected through `_timer_cls`.

    Each statement has a cost per run (COSTS), a fixed per-call overhead and
    seeded noise; two instances built from the same statement return the same
    sequence of times, so torch and opbench see identical clocks.
    """

    COSTS = {
        "pass": 1.5e-9,  # above 1 ns: below it torch 2.13 prints seconds
        "ns_stmt": 5e-9,
        "us_stmt": 3.2e-6,
        "ms_stmt": 1.7e-3,
        "x = 1\ny = x + 1": 45e-9,
    }
    OVERHEAD = 60e-9
    NOISE = 0.05

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self._cost = self.COSTS.get(stmt, 2e-6)
        self._rng = random.Random(zlib.crc32(f"{stmt}|{setup}".encode()))

    def timeit(self, number):
        noise = 1 + self.NOISE * (self._rng.random() - 0.5) * 2
        spike = 3.0 if self._rng.random() < 0.03 else 1.0  # occasional outlier
        return (self.OVERHEAD + self._cost * number * spike) * noise


# Arguments that load opbench's pytest plugin in an inner pytest run.
PYTEST_PLUGIN_ARGS = load_args()


def standalone_env() -> dict[str, str]:
    """This process's environment less what pytest, xdist and coverage put in it, for a
    program the tests start as a user would (pytest-benchmark switches itself off where it
    sees an xdist worker's variables)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "COV_CORE", "COVERAGE_"))}


def strip_object_line(text: str) -> str:
    """Drops the `<module.Measurement object at 0x...>` line, which names the class path."""
    return re.sub(r"^<[\w.]+ object at 0x[0-9a-f]+>\n", "", text)


# -- fuzzer parity (test_fuzzer.py, test_op_fuzzers.py) ------------------------

def _corrected_check_distribution(self, distribution):
    """torch's FuzzedParameter._check_distribution with the normalisation test the right way up."""
    if not isinstance(distribution, dict):
        assert distribution in ("loguniform", "uniform"), f"Unknown distribution: {distribution}"
        return distribution
    assert all(p >= 0 for p in distribution.values()), "Probabilities cannot be negative"
    assert abs(sum(distribution.values()) - 1) <= 1e-5, "Distribution is not normalized"
    assert self._minval is None and self._maxval is None
    return distribution


@pytest.fixture
def torch_fuzzer(monkeypatch):
    import torch.utils.benchmark as tb
    import torch.utils.benchmark.utils.fuzzer as torch_fuzzer_module

    import torch_bugs

    if torch_bugs.fuzzer_rejects_normalized_distributions():
        monkeypatch.setattr(torch_fuzzer_module.FuzzedParameter, "_check_distribution",
                            _corrected_check_distribution)
    return tb


def assert_same_value(ours, theirs, where):
    import numpy as np
    import torch

    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == theirs.dtype, where
        assert np.array_equal(ours, theirs), where
    elif isinstance(theirs, torch.Tensor):
        _assert_same_tensor(ours, theirs, where)
    else:
        assert type(ours) is type(theirs) and ours == theirs, (where, ours, theirs)


def _assert_same_tensor(ours, theirs, where):
    import torch

    assert (ours.dtype, ours.shape, ours.device, ours.layout) == (
        theirs.dtype, theirs.shape, theirs.device, theirs.layout), where
    if theirs.is_sparse:
        assert ours.is_coalesced() == theirs.is_coalesced(), where
        assert torch.equal(ours._indices(), theirs._indices()), where
        assert torch.equal(ours._values(), theirs._values()), where
    else:
        # Same strides: the memory layout (permutation, steps) is part of the input.
        assert ours.stride() == theirs.stride(), where
        if theirs.device.type != "meta":  # meta tensors (shape-only tests) hold no values
            assert torch.equal(ours, theirs), where


def assert_same_takes(ours, theirs, n):
    """Compare two `take(n)` streams item by item (each item is freed before the next)."""
    count = 0
    for step, (mine, ref) in enumerate(zip(ours, theirs)):
        for part, (a, b) in zip(("tensors", "properties", "params"), zip(mine, ref)):
            assert list(a) == list(b), (step, part)  # same names, same order
            for key in b:
                if part == "properties":
                    assert list(a[key]) == list(b[key]), (step, key)
                    for prop in b[key]:
                        assert_same_value(a[key][prop], b[key][prop], (step, key, prop))
                else:
                    assert_same_value(a[key], b[key], (step, part, key))
        del mine, ref, a, b  # free this step's (possibly huge) tensors before the next
        count += 1
    assert count == n


@pytest.fixture
def fake_peaks(tmp_path, monkeypatch):
    """This machine's peaks as fixed figures, never measured: 10 GB/s and, per dtype,
    100 GFLOP/s (ridge 10 FLOP/byte); the per-machine folder moved to tmp_path.
    Returns the list of (device, threads, dtypes) that would have been measured."""
    from opbench.core import peaks

    monkeypatch.setenv("OPBENCH_BASELINE_DIR", str(tmp_path / "machine"))
    calls = []

    def measure(device="cpu", threads=1, dtypes=("float32",), *, bandwidth=True):
        calls.append((device, threads, tuple(dtypes)))
        return peaks.Peak(device=device, threads=threads, bandwidth=1e10, copy=1e10,
                          triad=0.9e10, flop_rates={d: 1e11 for d in dtypes},
                          how={"fake": True}, measured="2026-01-01T00:00:00+00:00")

    monkeypatch.setattr(peaks, "measure", measure)
    return calls


# -- history_repo's 30 commits, shared by the tests of bisect, find, history and report

@pytest.fixture(scope="session")
def history_commits(tmp_path_factory):
    """history_repo's git repository, not measured: (repo, commits, oldest first)."""
    import history_repo

    path = tmp_path_factory.mktemp("bisect") / "repo"
    return path, history_repo.build(path)


@pytest.fixture(scope="session")
def measured_history(tmp_path_factory):
    """history_repo's 30 commits measured and autosaved one by one: (store, commits)."""
    import history_repo

    base = tmp_path_factory.mktemp("history")
    commits = history_repo.build(base / "repo", base / "store")
    return base / "store", commits


@pytest.fixture
def measured_store(measured_history, tmp_path):
    """A copy of measured_history's store a test may damage or prune."""
    import shutil

    shutil.copytree(measured_history[0], tmp_path / "store", symlinks=True)
    return tmp_path / "store"
