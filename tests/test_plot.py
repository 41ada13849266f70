"""Plots: real PNG and SVG files from Measurements, a Compare, or a missing matplotlib."""
from __future__ import annotations

import builtins
import os

import pytest

import opbench
from opbench.analysis.plot import iqr_interval, plot_bars, plot_speedup

pytest.importorskip("matplotlib", reason="plots need matplotlib (the `plot` extra)")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _sweep() -> list[opbench.Measurement]:
    ms = []
    for size in (16, 256, 4096):
        for desc, factor in (("eager", 1.0), ("compiled", 0.5), ("scripted", 1.25)):
            times = [size * 1e-8 * factor * (1 + 0.02 * i) for i in range(8)]
            spec = opbench.TaskSpec("f(x)", "pass", label="add", sub_label=f"n={size}",
                                    description=desc)
            ms.append(opbench.Measurement(1, times, spec))
    return ms


def test_bars_png(tmp_path):
    path = plot_bars(_sweep(), tmp_path / "bars.png", title="sweep")
    assert path == tmp_path / "bars.png"
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    assert os.listdir(tmp_path) == ["bars.png"]  # written atomically, nothing left over


def test_bars_svg_from_a_compare_has_labels(tmp_path):
    ms = _sweep()
    ms.append(opbench.Measurement(1, [1e-3, 1.1e-3], opbench.TaskSpec(
        "g(x)", "pass", label="mul", sub_label="n=16", description="eager")))
    svg = plot_bars(opbench.Compare(ms), tmp_path / "bars.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for text in ("add", "mul", "n=4096", "eager", "compiled", "scripted", "time per run"):
        assert text in svg, text


def test_bars_whiskers_default_to_the_iqr():
    m = opbench.Measurement(1, [1.0, 2.0, 3.0, 4.0, 5.0], opbench.TaskSpec("f()", "pass"))
    assert iqr_interval(m) == (2.0, 4.0)


def test_bars_take_a_custom_interval(tmp_path):
    seen = []

    def interval(m):
        seen.append(m.description)
        return m.median * 0.9, m.median * 1.1

    plot_bars(_sweep(), tmp_path / "b.png", interval=interval)
    assert sorted(set(seen)) == ["compiled", "eager", "scripted"] and len(seen) == 9


def test_speedup_heatmap(tmp_path):
    svg = plot_speedup(_sweep(), tmp_path / "heat.svg", baseline="eager").read_text()
    # compiled is twice as fast as eager, scripted 0.8x, at every size
    assert svg.count("2.00x") == 3 and svg.count("0.80x") == 3
    assert "1.00x" not in svg  # the baseline is not a column of its own
    for text in ("n=16", "n=256", "n=4096", "compiled", "scripted", "speed-up vs eager"):
        assert text in svg, text
    png = plot_speedup(_sweep(), tmp_path / "heat.png", baseline="eager").read_bytes()
    assert png.startswith(PNG_MAGIC)


def test_speedup_by_env(tmp_path):
    ms = []
    for env, factor in (("before", 1.0), ("after", 0.25)):
        for size in (1, 2):
            spec = opbench.TaskSpec("f(x)", "pass", label="op", sub_label=f"n={size}",
                                    description="eager", env=env)
            ms.append(opbench.Measurement(1, [size * 1e-6 * factor] * 3, spec))
    svg = plot_speedup(ms, tmp_path / "ab.svg", baseline="before", by="env").read_text()
    assert svg.count("4.00x") == 2 and "after" in svg


def test_bad_input_is_reported(tmp_path):
    with pytest.raises(ValueError, match="no result has description='nope'"):
        plot_speedup(_sweep(), tmp_path / "x.png", baseline="nope")
    with pytest.raises(ValueError, match="by must be one of"):
        plot_speedup(_sweep(), tmp_path / "x.png", baseline="eager", by="label")
    with pytest.raises(ValueError, match=r"end the name in \.png"):
        plot_bars(_sweep(), tmp_path / "x.unknown")
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_bars([], tmp_path / "x.png")
    with pytest.raises(TypeError, match=r"results\[0\] is a str"):
        plot_bars(["not a measurement"], tmp_path / "x.png")
    assert os.listdir(tmp_path) == []


def test_missing_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_bars(_sweep(), tmp_path / "x.png")
