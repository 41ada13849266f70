"""The README's examples run, so they cannot rot.

``python`` blocks run as scripts (a block defining ``test_`` functions runs
under pytest with opbench's plugin); ``py`` blocks, which need a GPU or
valgrind, are compiled to check their syntax.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from conftest import PYTEST_PLUGIN_ARGS

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```(python|py)\n(.*?)^```", README.read_text(), re.S | re.M)


def test_readme_has_examples():
    assert sum(kind == "python" for kind, _ in BLOCKS) >= 5


# Blocks that compile C++, run valgrind or start a cluster are in the slow tier.
_SLOW = re.compile(r'language="c\+\+"|collect_callgrind|distributed|\bray\b')


@pytest.mark.parametrize("kind, code", [pytest.param(*b, marks=[pytest.mark.slow] * bool(_SLOW.search(b[1])))
                                        for b in BLOCKS], ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block(kind, code, tmp_path):
    if kind == "py":
        compile(code, "README.md", "exec")
        return
    if "def test_" in code:
        (tmp_path / "test_example.py").write_text(code)
        cmd = [sys.executable, "-m", "pytest", "-q", *PYTEST_PLUGIN_ARGS, "test_example.py"]
    else:
        cmd = [sys.executable, "-c", code]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
