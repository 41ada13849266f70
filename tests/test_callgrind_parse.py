"""opbench.callgrind._parse: callgrind's output format read into per-function counts
(a full synthetic profile and callgrind_annotate's agreement are in tests/test_callgrind.py)."""
from __future__ import annotations

import pytest

from opbench.callgrind._parse import parse_callgrind_out

PROFILE = """\
# callgrind format
version: 1
positions: line
events: Ir
fl=(1) /src/a.c
fn=(1) main
10 100
cfl=(1)
cfn=(2) work
calls=2 20
20 400
+1 5
fn=(2)
30 380
totals: 885
"""


def test_compressed_names_and_inclusive_costs() -> None:
    p = parse_callgrind_out(PROFILE.splitlines())
    assert p.total == 885
    assert p.exclusive == {"/src/a.c:main": 105, "/src/a.c:work": 380}
    # main is called by nobody: its own cost and its calls; work: the calls into it.
    assert p.inclusive == {"/src/a.c:main": 505, "/src/a.c:work": 400}


def test_an_undefined_name_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"undefined name \(7\) in fn="):
        parse_callgrind_out(["events: Ir", "fl=(1) a.c", "fn=(7)", "1 5"])
