"""The roofline plot (opbench.core.roofline): real PNG/SVG files, points placed by their
work, results without work listed; matplotlib only when plotting."""
from __future__ import annotations

import subprocess
import sys

import pytest

import opbench
from opbench import Compare, Measurement, TaskSpec

pytest.importorskip("matplotlib", reason="plots need matplotlib (the `plot` extra)")

PEAKS = {"bandwidth": 1e10, "flop_rate": 1e11, "dtype": "float32", "threads": 1}


def _results():
    def m(sub, **work):
        return Measurement(1, [1e-3] * 3, TaskSpec("f()", "pass", label="ops", sub_label=sub,
                                                    **work), info={"peaks": PEAKS})
    return [m("gemm", flops=2e9, bytes=3e6), m("add", flops=1e6, bytes=1.2e7),
            m("copy", flops=0, bytes=8e6), m("misc")]


def test_png_and_svg_with_points_and_the_roof(tmp_path):
    png = opbench.plot_roofline(_results(), tmp_path / "roof.png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svg = (Compare(_results()).plot_roofline(str(tmp_path / "roof.svg"))).read_text()
    assert "ops / gemm (compute" in svg and "ops / add (memory" in svg
    assert "ridge 10.00 FLOP/B" in svg
    assert "not placed (no FLOPs, bytes or peaks): ops / copy, ops / misc" in svg


def test_nothing_to_place_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="nothing to draw on a roofline"):
        opbench.plot_roofline(_results()[2:], tmp_path / "r.png")


def test_import_opbench_does_not_import_matplotlib():
    code = ("import sys, opbench, opbench.core.roofline; opbench.plot_roofline; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
