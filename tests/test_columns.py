"""Compare columns (opbench.analysis.columns): time, GB/s, TFLOP/s and % of peak per cell; the
default table stays torch's, byte for byte."""
from __future__ import annotations

import pytest
import torch.utils.benchmark as tb

import opbench
from opbench import Compare, TaskSpec, UsageError, save
from opbench.integrations.cli import main

PEAKS = {"bandwidth": 1e10, "flop_rate": 1e11, "dtype": "float32", "threads": 1}


def _results(module=opbench, work=True):
    out = []
    for desc, median in (("eager", 2e-3), ("fused", 1e-3)):
        for sub, extra in (("copy", {"bytes": 8e6, "flops": 0}),
                           ("gemm", {"bytes": 3e6, "flops": 2e9}), ("misc", {})):
            spec = {"stmt": "f()", "setup": "pass", "label": "ops", "sub_label": sub,
                    "description": desc}
            if module is opbench and work:
                spec.update(extra)
            info = {"peaks": PEAKS} if module is opbench else None
            kwargs = {"info": info} if info else {}
            out.append(module.Measurement(1, [median] * 5,
                                          module.TaskSpec(**spec), **kwargs))
    return out


def test_default_and_time_columns_are_torchs_table_byte_for_byte():
    theirs = str(tb.Compare(_results(tb)))
    assert str(Compare(_results())) == theirs
    assert str(Compare(_results(), columns="time")) == theirs
    assert str(Compare(_results(), columns=["time"])) == theirs


def test_throughput_columns_show_rates_and_na():
    text = str(Compare(_results(), columns=["time", "GB/s", "TFLOP/s", "% of peak"]))
    lines = text.splitlines()
    header = lines[1]
    for column in ("eager: time (ms)", "eager: GB/s", "eager: TFLOP/s", "eager: % of peak",
                   "fused: time (ms)"):
        assert column in header
    copy = next(line for line in lines if line.strip().startswith("copy"))
    gemm = next(line for line in lines if line.strip().startswith("gemm"))
    misc = next(line for line in lines if line.strip().startswith("misc"))
    # copy: 8 MB in 2 ms = 4 GB/s, 40% of 10 GB/s; in 1 ms: 8 GB/s, 80%.
    assert [c.strip() for c in copy.split("|")][1:] == [
        "2.0", "4.00", "0", "40.0", "1.0", "8.00", "0", "80.0"]
    # gemm: 2 GFLOP in 2 ms = 1 TFLOP/s, 10x the (made-up) 0.1 TFLOP/s peak: compute-bound.
    assert [c.strip() for c in gemm.split("|")][1:5] == ["2.0", "1.50", "1.00", "1000"]
    assert misc.count("n/a") == 6
    assert "GB/s: bytes per run / median time (1 GB = 1e9 bytes)." in text
    assert "n/a: work (flops=/bytes=) or peaks unknown for that result." in text


def test_rates_keep_three_significant_figures_across_magnitudes():
    from opbench.analysis.columns import _number

    assert [_number(v) for v in (1234.5, 12.34, 0.1234, 0.0001234, 1e-9, 0)] == [
        "1234", "12.3", "0.123", "0.000123", "0.000000", "0"]


def test_a_single_rate_column_keeps_the_descriptions_as_headers():
    text = str(Compare(_results(), columns="GB/s"))
    assert text.splitlines()[1].split("|")[1:] == ["  eager  ", "  fused"]
    assert "Times are in" not in text


def test_unknown_columns_are_refused_early():
    with pytest.raises(UsageError, match="among time, GB/s, TFLOP/s, % of peak; got 'GFLOPS'"):
        Compare([], columns=["time", "GFLOPS"])


def test_instruction_counts_ignore_rate_columns():
    from opbench.core.instructions import InstructionCounts

    counts = [InstructionCounts(100, (5000,), TaskSpec("f()", "pass", label="L"))]
    assert str(Compare(counts, columns="GB/s")) == str(Compare(counts))


def test_show_takes_columns(tmp_path, capsys):
    save(_results(), tmp_path / "r.json", environment={})
    assert main(["show", str(tmp_path / "r.json"), "--columns", "time,GB/s"]) == 0
    out = capsys.readouterr().out
    assert "r.json: GB/s" in out
    eager_copy = next(line for line in out.splitlines() if "| copy | eager" in line)
    assert eager_copy.split("|")[-1].strip() == "4.00"  # 8 MB in 2 ms: the declared bytes
    assert main(["show", str(tmp_path / "r.json"), "--columns", "speed"]) == 2
    assert "columns must be among" in capsys.readouterr().err
