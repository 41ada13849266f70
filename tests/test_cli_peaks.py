"""``opbench peaks`` (opbench.integrations.cli.peaks): shows this machine's cached peaks,
measuring what is not cached; peaks come from the fake_peaks fixture, never measured."""
from __future__ import annotations

from opbench.core import peaks
from opbench.integrations.cli import main


def test_the_command_shows_and_refreshes(fake_peaks, capsys):
    assert main(["peaks", "--threads", "2", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert "cpu/2" in out and "10.00 GB/s" in out and "ridge 10.00 FLOP/byte" in out
    assert main(["peaks", "--threads", "2", "--dtype", "float32", "--refresh"]) == 0
    assert len(fake_peaks) == 2
    assert main(["peaks", "--threads", "0"]) == 2


def test_the_defaults_are_one_cpu_thread_and_two_dtypes(fake_peaks, capsys):
    assert main(["peaks"]) == 0
    assert fake_peaks == [("cpu", 1, ("float32", "bfloat16"))]
    out = capsys.readouterr().out
    assert out.startswith(f"{peaks.path()}:\n") and "cpu/1 (measured 2026-01-01" in out
    assert "float32" in out and "bfloat16" in out


def test_a_gpu_is_measured_once_its_thread_count_ignored(fake_peaks, capsys):
    # Measuring is faked, so this runs without a GPU: the command's part is the slot asked.
    assert main(["peaks", "--device", "cuda", "--threads", "4", "--dtype", "float16"]) == 0
    assert fake_peaks == [("cuda:0", None, ("float16",))]
    assert main(["peaks", "--device", "cuda:0", "--dtype", "float16"]) == 0
    assert len(fake_peaks) == 1  # cached
    out = capsys.readouterr().out
    assert "cuda:0 (measured" in out and "float16" in out


def test_an_unknown_device_is_named(fake_peaks, capsys):
    assert main(["peaks", "--device", "tpu"]) == 2
    assert "'cpu' or 'cuda[:N]', not 'tpu'" in capsys.readouterr().err and fake_peaks == []


def test_a_thread_count_below_one_is_refused_before_measuring(fake_peaks, capsys):
    assert main(["peaks", "--threads", "0", "--refresh"]) == 2
    assert "error: --threads must be >= 1, got 0" in capsys.readouterr().err
    assert fake_peaks == [] and not peaks.path().exists()
