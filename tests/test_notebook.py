"""Notebooks: the %opbench / %%opbench magics in a real IPython shell and a real kernel, and
the rich displays (Measurement, Compare, the gate's report) rendered in headless Chromium."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import opbench
from opbench import Measurement, TaskSpec
from opbench.errors import UsageError

IPython = pytest.importorskip("IPython")
REQUIRED = os.environ.get("OPBENCH_REQUIRE_CHROMIUM") == "1"


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "opbench")
    return ip


def test_the_line_magic_times_in_the_notebooks_names(shell):
    shell.user_ns["xs"] = list(range(100))
    m = shell.run_line_magic("opbench", "-o -q -r 4 --min-run-time 0.01 sorted(xs)")
    assert isinstance(m, Measurement) and len(m.times) == 4 and m.stmt == "sorted(xs)"
    assert shell.run_line_magic("opbench", "-q -r 3 --min-run-time 0.01 sorted(xs)") is None


def test_the_cell_magic_takes_setup_from_its_first_line(shell):
    m = shell.run_cell_magic("opbench", "-o -q -n 50 -r 3 ys = list(range(10))", "sum(ys)\n")
    assert (m.number_per_run, len(m.times)) == (50, 3)
    assert (m.stmt, m.setup) == ("sum(ys)", "ys = list(range(10))")


def test_n_alone_means_seven_blocks_as_timeit(shell):
    m = shell.run_line_magic("opbench", "-o -q -n 20 pass")
    assert (m.number_per_run, len(m.times)) == (20, 7)


def test_opbenchs_own_options(shell):
    m = shell.run_line_magic("opbench", "-o -q --threads 2 --label L --description d "
                                        "--no-recover --converge 50% --min-run-time 0.01 pass")
    assert (m.num_threads, m.label, m.description) == (2, "L", "d")
    assert "converged" in m.info


def test_bad_options_and_statements_are_refused_at_once(shell):
    with pytest.raises(UsageError, match="-n must be positive"):
        shell.run_line_magic("opbench", "-n 0 pass")
    with pytest.raises(UsageError, match="--converge must look like"):
        shell.run_line_magic("opbench", "--converge fast pass")
    with pytest.raises(UsageError, match="nothing to time"):
        shell.run_line_magic("opbench", "-q")
    with pytest.raises(SyntaxError):
        shell.run_line_magic("opbench", "-q -r 2 1 +")


def test_an_exception_inside_the_statement_is_its_own(shell):
    with pytest.raises(ZeroDivisionError):
        shell.run_line_magic("opbench", "-q -r 2 1 / 0")


# -- rich display --------------------------------------------------------------------------

def _noisy():
    return Measurement(1, [1e-3, 1.5e-3, 1e-3, 2e-3], TaskSpec("f()", "pass", label="L",
                                                                description="a"))


def test_a_measurement_shows_torchs_text_with_its_warnings_in_red():
    html = _noisy()._repr_html_()
    assert html.startswith('<pre class="opbench-measurement">L\na\n  Median: 1.25 ms')
    assert "object at 0x" not in html
    assert '<span style="color:#cf222e;font-weight:bold">  WARNING: Interquartile' in html


def test_a_compare_renders_coloured_as_the_terminal():
    quick = Measurement(1, [1e-6] * 4, TaskSpec("f()", "pass", label="L", description="b"))
    compare = opbench.Compare([_noisy(), quick])
    assert 'class="num best"' not in compare._repr_html_()  # not colourised: plain cells
    compare.colorize(rowwise=True)
    html = compare._repr_html_()
    assert 'class="num very-bad"' in html and 'class="num best"' in html


def _gate_report():
    from opbench import gate

    # 40 runs a side: enough for a 95% interval of the 10th percentile (stats.run_figure).
    old = [Measurement(1, [1e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    new = [Measurement(1, [2e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    return gate.compare(old, new)


def test_the_gates_report_renders_its_failure_in_red():
    html = _gate_report()._repr_html_()
    assert '<span style="color:#cf222e;font-weight:bold">FAILED: 1 regression' in html
    assert "REGRESSION</span>" in html


@pytest.mark.slow
def test_a_real_notebook_runs_in_a_real_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext opbench\nimport opbench\nxs = list(range(1000))"),
        nbformat.v4.new_code_cell("m = %opbench -o -r 5 --min-run-time 0.01 sorted(xs)\n"
                                  "m.number_per_run > 0"),
        nbformat.v4.new_code_cell("%%opbench -n 100 -r 3 ys = xs[::-1]\nsorted(ys)"),
        nbformat.v4.new_code_cell(
            "c = opbench.Compare([m, opbench.Timer('sorted(xs)', globals={'xs': xs}, "
            "description='again').timeit(100)])\nc.colorize()\nc"),
    ]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert not errors, errors
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html[0].startswith('<pre class="opbench-measurement">sorted(xs)')
    assert html[1].startswith('<pre class="opbench-measurement">sorted(ys)\nsetup: ys = xs[::-1]')
    assert '<table class="opbench-compare">' in html[2] and 'class="num best"' in html[2]
    assert any(o.get("data", {}).get("text/plain") == "True" for o in outputs)


@pytest.mark.slow
@pytest.mark.skipif(not REQUIRED and not Path("/usr/bin/chromium").exists(),
                    reason="headless Chromium not installed (apt-get install chromium; .ci/run does)")
def test_the_rich_displays_render_in_a_browser(tmp_path):
    import chromium

    busy = Measurement(1, [9e-3] * 6, TaskSpec("g()", "pass", label="L", description="b",
                                                 num_threads=2),
                       info={"disturbance": {"waits": [1.0] * 6, "threads": 2, "cpus": 2,
                                             "others": 1.9}})
    compare = opbench.Compare([_noisy(), busy])
    compare.colorize()
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><meta charset=utf-8><title>views</title><body>"
                    + _noisy()._repr_html_() + compare._repr_html_()
                    + _gate_report()._repr_html_() + "</body>")
    with chromium.Browser() as b:
        b.open(page)
        assert b.errors() == []
        style = "getComputedStyle(document.querySelector({!r})).color"
        red = "rgb(207, 34, 46)"
        assert b.evaluate(style.format(".opbench-measurement span")) == red
        assert b.evaluate(style.format(".opbench-gate span")) == red
        assert b.evaluate(style.format("td.busy")) == "rgb(154, 103, 0)"
        assert b.evaluate("document.querySelector('td.busy').textContent") == "9.0 (busy)"
        assert "(busy) 1 of 2 cells" in b.evaluate("document.querySelector('tfoot').textContent")
        b.screenshot(tmp_path / "views.png")
