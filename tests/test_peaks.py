"""Peaks (opbench.core.peaks): measured once per machine and thread count, cached with how,
shown by `opbench peaks` (its tests: test_cli_peaks.py). Real measurements here use tiny
buffers (the code path, not the figures); everything else uses the fake_peaks fixture."""
from __future__ import annotations

import json

import pytest
import torch

from opbench import UsageError
from opbench.core import peaks


def test_get_measures_once_then_reads_the_cache(fake_peaks):
    first = peaks.get("cpu", 2, ("float32",))
    again = peaks.get("cpu", 2, ("float32",))
    assert fake_peaks == [("cpu", 2, ("float32",))]
    assert again == first and again.ridge("float32") == 10.0
    assert peaks.path().is_file() and peaks.path().parent.name == peaks.environment.machine_id()
    doc = json.loads(peaks.path().read_text())
    assert doc["format"] == "opbench-peaks" and doc["peaks"]["cpu/2"]["how"] == {"fake": True}


def test_each_thread_count_and_dtype_is_measured_when_first_asked(fake_peaks):
    peaks.get("cpu", 1, ("float32",))
    peaks.get("cpu", 2, ("float32",))
    p = peaks.get("cpu", 1, ("float32", "bfloat16"))
    assert fake_peaks == [("cpu", 1, ("float32",)), ("cpu", 2, ("float32",)),
                          ("cpu", 1, ("bfloat16",))]
    assert set(p.flop_rates) == {"float32", "bfloat16"}
    assert set(peaks.load()) == {"cpu/1", "cpu/2"}


def test_refresh_measures_again(fake_peaks):
    peaks.get("cpu", 1)
    peaks.get("cpu", 1, refresh=True)
    assert len(fake_peaks) == 2


def test_a_corrupt_cache_is_measured_over(fake_peaks):
    peaks.path().parent.mkdir(parents=True)
    peaks.path().write_text("{not json")
    assert peaks.load() == {}
    assert peaks.get("cpu", 1).bandwidth == 1e10


def test_measure_runs_stream_and_matmul_and_says_how(monkeypatch):
    monkeypatch.setattr(peaks, "_MIN_BUFFER", 1 << 16)
    monkeypatch.setattr(peaks, "_llc_bytes", lambda: 1 << 12)
    monkeypatch.setattr(peaks, "_MATMUL_MAX_N", 256)
    p = peaks.measure("cpu", 1, ("float32", "float64", "no_such_dtype"))
    assert p.copy > 0 and p.triad > 0 and p.bandwidth == max(p.copy, p.triad)
    assert set(p.flop_rates) == {"float32", "float64"} and all(r > 0 for r in
                                                                p.flop_rates.values())
    assert p.how["buffer_bytes"] == 1 << 16 and p.how["matmul"]["float32"]["n"] == 256
    assert "not a torch dtype" in p.how["unsupported"]["no_such_dtype"]
    assert p.datasheet is None and p.threads == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
def test_cuda_peaks_without_a_gpu_are_a_clear_error():
    with pytest.raises(UsageError, match="no CUDA device"):
        peaks.measure("cuda:0")
    with pytest.raises(UsageError, match="'cpu' or 'cuda"):
        peaks.get("tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_peaks_on_a_gpu_carry_the_datasheet():  # pragma: no cover (no GPU in CI)
    p = peaks.measure("cuda:0", None, ("float32",))
    assert p.bandwidth > 0 and p.datasheet["name"] and p.threads is None


def test_datasheet_figures_come_from_the_drivers_clocks_and_bus(monkeypatch):
    from types import SimpleNamespace

    # An H100 SXM as the driver reports it: 132 SMs at 1.98 GHz, HBM3 at 2.619 GHz x 5120 bits.
    props = SimpleNamespace(name="NVIDIA H100", major=9, minor=0, multi_processor_count=132,
                            clock_rate=1_980_000, memory_clock_rate=2_619_000,
                            memory_bus_width=5120)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: props)
    ds = peaks._datasheet(torch, "cuda:0")
    assert ds["bandwidth"] == 2 * 2_619_000e3 * 5120 / 8  # 3.35 TB/s
    assert ds["float32_flop_rate"] == 2 * 128 * 132 * 1_980_000e3  # 66.9 TFLOP/s
    unknown = SimpleNamespace(**{**vars(props), "major": 5, "memory_bus_width": 0})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: unknown)
    assert peaks._datasheet(torch, "cuda:0")["bandwidth"] is None
    assert peaks._datasheet(torch, "cuda:0")["float32_flop_rate"] is None
