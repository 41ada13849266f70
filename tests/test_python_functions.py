"""opbench.callgrind.python_functions: per-Python-function instruction counts from the
trampolines of opbench._C.python_frames; the counts under valgrind (slow) add up and name
the function whose own cost changed."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opbench import _C
from opbench.callgrind import _parse, python_functions
from opbench.callgrind.collect import callgrind_unavailable_reason


def test_own_counts_telescope_through_nested_and_recursive_frames() -> None:
    # outer (slot 1) calls inner (slot 2), which recurses once (its 'N context in callgrind).
    profile = _parse.ParsedProfile(
        exclusive={"???:opbench::python_frames::callout<1>(...) [_C.so]": 6,
                   "???:opbench::python_frames::callout<2>(...) [_C.so]": 6},
        inclusive={"???:opbench::python_frames::enter<1>(...) [_C.so]": 1000,
                   "???:opbench::python_frames::callout<1>(...) [_C.so]": 606,
                   "???:opbench::python_frames::enter<2>(...) [_C.so]": 600,
                   "???:opbench::python_frames::enter<2>(...)'2 [_C.so]": 250,
                   "???:opbench::python_frames::callout<2>(...) [_C.so]": 256}, total=1000)
    table = python_functions.counts(profile, {1: ("m.py:outer", 1), 2: ("m.py:inner", 9)})
    assert table["exclusive"] == {"m.py:outer": 400, "m.py:inner": 600}
    assert sum(table["exclusive"].values()) == 1000  # the own counts add up to the loop
    assert table["inclusive"] == {"m.py:outer": 1000, "m.py:inner": 850}
    assert table["lines"] == {"m.py:outer": 1, "m.py:inner": 9}


def test_names_are_relative_to_the_path_they_were_imported_from() -> None:
    def code(filename: str, qualname: str, line: int) -> object:
        return compile("def f(): pass", filename, "exec").co_consts[0].replace(
            co_qualname=qualname, co_firstlineno=line)

    codes = [None, code("/tmp/wt1/src/pkg/version.py", "Version.__lt__", 512),
             code("<opbench stmt>", "loop", 1), code("/x/harness.py", "_counted", 3),
             code("/else/where.py", "g", 7)]
    names = python_functions.names(codes, roots=["/tmp/wt1/src", "/tmp/wt1"], slots=5,
                                   harness=("/x/harness.py",))
    assert names == {1: ("pkg/version.py:Version.__lt__", 512), 4: (python_functions.OTHERS, 0)}
    assert python_functions.names(codes[:3], roots=["/tmp/wt1/src"])[1][0] == \
        "pkg/version.py:Version.__lt__"


def test_the_trampolines_see_every_python_call_and_stop_cleanly() -> None:
    frames = _C.python_frames
    if not frames.available():
        pytest.skip("python_frames needs CPython 3.11")

    def fib(n: int) -> int:
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    frames.start()
    try:
        assert fib(10) == 55
    finally:
        frames.stop()
    assert "fib" in [c.co_name for c in frames.slots() if c is not None]
    assert frames.slots()[0] is None and frames.SLOTS == 512


_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from opbench.callgrind import in_process
    from opbench.core.measurement import TaskSpec

    BASE = os.environ["VARIANT"] == "base"

    def key(v):
        return (v % 7, v) if BASE else (v % 7, v, str(v))

    class Item:
        def __init__(self, v):
            self.v = v
        def __lt__(self, other):
            return key(self.v) < key(other.v)

    ITEMS = [Item(v) for v in range(30, 0, -1)]

    def work():
        return sorted(ITEMS)[0].v

    c = in_process.count(work, number=20, repeats=1, task_spec=TaskSpec("work()", "pass"),
                         out_prefix=os.environ[in_process.OUT_PREFIX_ENV])
    print(json.dumps(c.info["python_functions"]))
""")


@pytest.mark.slow  # two processes under valgrind
@pytest.mark.skipif(callgrind_unavailable_reason() is not None or not _C.python_frames.available(),
                    reason="needs valgrind and CPython 3.11")
def test_under_valgrind_the_changed_function_heads_the_diff(tmp_path: Path) -> None:
    from opbench.callgrind.function_diff import python_diff

    script = tmp_path / "bench.py"
    script.write_text(_SCRIPT)
    tables = {}
    for variant in ("base", "head"):
        prefix = tmp_path / f"cg_{variant}"
        env = {"VARIANT": variant, "OPBENCH_CALLGRIND_OUT": str(prefix), "PYTHONHASHSEED": "0",
               "PATH": "/usr/bin:/bin"}
        run = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                              "--collect-atstart=no", f"--callgrind-out-file={prefix}",
                              f"--log-file={prefix}.log", sys.executable, str(script)],
                             capture_output=True, text=True, timeout=600, env=env,
                             cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-2000:]
        tables[variant] = json.loads(run.stdout.strip().splitlines()[-1])
    changes = python_diff(tables["base"], tables["head"], number=20)
    assert changes[0].function == "bench.py:key" and changes[0].exclusive_change > 0
    assert changes[0].short_name == "key (bench.py:8)"
    # work's own code is the same in both. (It once read +1 or more in CI when key() read
    # os.environ on every call, whose allocations shared the loop's pools with work's
    # sorted copy; read once at import, work's change was 0.0 in 11 runs here, 8 of them
    # beside two spinning processes.)
    work = [c.exclusive_change for c in changes if c.function == "bench.py:work"]
    assert not [w for w in work if w > 1], work
