"""Writes the documentation's screenshots (headless Chromium, as tests/test_docs.py drives it).

    python docs/screenshots/make_screenshots.py SITE      # SITE: a built site (sphinx-build)

* ``guide-page.png``: a guide page of the built site (``ab.html``);
* ``notebook-compare.png``: a Compare as a notebook shows it: the notebook is run in a
  real kernel (nbclient, ipykernel) and the ``text/html`` output it gave, the
  Compare's ``_repr_html_``, is rendered in a notebook's output cell.
"""
from __future__ import annotations

import html
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

import chromium  # noqa: E402

CELLS = [
    "%load_ext opbench\nimport opbench, torch",
    "results = []\n"
    "for n in (16, 256, 1024):\n"
    "    x = torch.ones(n, n)\n"
    "    for description, stmt in ((\"mul/sum\", \"x.mul(x).sum(-1)\"), (\"matmul\", \"x @ x\"),\n"
    "                              (\"einsum\", \"torch.einsum('ij,ij->i', x, x)\")):\n"
    "        results.append(opbench.Timer(stmt, globals={\"x\": x, \"torch\": torch}, label=\"row dot\",\n"
    "                                     sub_label=f\"n={n}\", description=description)\n"
    "                       .blocked_autorange(min_run_time=0.05))\n"
    "compare = opbench.Compare(results)\n"
    "compare.trim_significant_figures()\n"
    "compare.colorize()\n"
    "compare",
]

PAGE = """<!doctype html><meta charset=utf-8><title>notebook</title>
<style>
html {{ overflow: hidden; }}
body {{ font-family: system-ui, sans-serif; margin: 24px; background: #fff; }}
.cell {{ display: flex; margin: 8px 0; }}
.prompt {{ width: 72px; color: #307fc1; font-family: monospace; text-align: right; padding: 6px 8px 0 0; }}
.out .prompt {{ color: #bf5b3d; }}
.input {{ flex: 1; background: #f7f7f7; border: 1px solid #e0e0e0; padding: 6px 10px;
         font-family: monospace; white-space: pre; font-size: 13px; }}
.output {{ flex: 1; padding: 6px 10px; font-size: 13px; }}
</style>
<body>{cells}</body>"""


def notebook_compare_html() -> str:
    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    parts = []
    for i, cell in enumerate(nb.cells, 1):
        parts.append(f'<div class="cell"><div class="prompt">In [{i}]:</div>'
                     f'<div class="input">{html.escape(cell.source)}</div></div>')
        for output in cell.get("outputs", []):
            shown = output.get("data", {}).get("text/html")
            if shown:
                parts.append(f'<div class="cell out"><div class="prompt">Out[{i}]:</div>'
                             f'<div class="output">{shown}</div></div>')
    assert any("opbench-compare" in p for p in parts), "the kernel gave no Compare HTML"
    return PAGE.format(cells="".join(parts))


def main(site: Path) -> None:
    page = HERE / "_notebook.html"
    page.write_text(notebook_compare_html())
    try:
        with chromium.Browser(width=900, height=480) as b:
            b.open(page)
            assert b.errors() == [], b.errors()
            b.screenshot(HERE / "notebook-compare.png")
    finally:
        page.unlink()
    with chromium.Browser(width=1200, height=900) as b:
        b.open(site / "ab.html")
        assert b.errors() == [], b.errors()
        b.screenshot(HERE / "guide-page.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
