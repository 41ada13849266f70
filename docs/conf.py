"""Sphinx configuration of opbench's documentation site (``sphinx-build -W docs docs/build/html``)."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
try:  # the installed opbench (CI), or the checkout's (tools/build-dev puts python/ on the path)
    import opbench
except ImportError:
    sys.path.insert(0, str(HERE.parent / "python"))
    import opbench

project = "opbench"
author = "the opbench authors"
copyright = "the opbench authors"
release = version = opbench.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "opbench_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# figures/ holds the benchmarks' recorded tables, included by the pages that show them.
exclude_patterns = ["build", "_build", "figures", "screenshots", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
# Program output and shell lines are shown as written; ```python blocks are highlighted.
highlight_language = "none"

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = f"opbench {release}"
html_theme_options = {"description": "Micro-benchmarks for PyTorch, Python and C++",
                      "fixed_sidebar": True}
html_static_path: list[str] = []
# No network: the site opens from the file system (the Chromium test does exactly that).
html_use_opensearch = ""
# Search result summaries are fetched from the page sources, which a browser refuses
# over file://; the titles and object names are found without them.
html_show_search_summary = False
