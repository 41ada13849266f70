"""FunctionCounts / CallgrindStats parity with torch, the callgrind-format parser,
and collect_callgrind's errors that need no valgrind run."""
from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest

from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import _NOISY_SYMBOL, FunctionCount, FunctionCounts
from opbench.callgrind.stats import CallgrindStats
from opbench.core.measurement import TaskSpec

torch = pytest.importorskip("torch")
from torch.utils.benchmark.utils import common as t_common  # noqa: E402
from torch.utils.benchmark.utils.valgrind_wrapper import timer_interface as t_cg  # noqa: E402

import torch_bugs  # noqa: E402

PY = "/tmp/python-build/Python-3.11.7/"
# Fixed synthetic profile: long names, ties, negatives, library suffixes, >18 rows.
ROWS = [
    (5000, f"{PY}Python/ceval.c:_PyEval_EvalFrameDefault [/usr/lib/libpython3.11.so.1.0]"),
    (4000, f"{PY}Objects/dictobject.c:unicodekeys_lookup_unicode [/usr/lib/libpython3.11.so.1.0]"),
    (3000, f"{PY}Objects/dictobject.c:lookdict_unicode [/usr/lib/libpython3.11.so.1.0]"),
    (2500, "/home/u/pytorch/build/../aten/src/ATen/native/BinaryOps.cpp:at::native::add"
           " [libtorch_cpu.so]"),
    (2500, "/home/u/pytorch/build/aten/src/ATen/Ops.cpp:at::_ops::add::call [libtorch_cpu.so]"),
    (-700, "???:negative_row"),
] + [(100 + i, f"/src/lib{i % 3}/f{i}.c:function_{i}" + "x" * (i * 7)) for i in range(20)]


def pair(rows=ROWS, inclusive=False, linewidth=None):
    data = tuple(sorted((FunctionCount(c, f) for c, f in rows), reverse=True))
    t_data = tuple(sorted((t_cg.FunctionCount(c, f) for c, f in rows), reverse=True))
    return (FunctionCounts(data, inclusive, _linewidth=linewidth),
            t_cg.FunctionCounts(t_data, inclusive, _linewidth=linewidth))


def body(obj) -> str:
    """repr without its first line (which names the class and address)."""
    return repr(obj).partition("\n")[2]


def same(ours: FunctionCounts, theirs) -> None:
    assert [tuple(r) for r in ours] == [tuple(r) for r in theirs]
    assert ours.inclusive == theirs.inclusive


@pytest.mark.parametrize("inclusive", [False, True])
@pytest.mark.parametrize("linewidth", [None, 60, 200])
def test_function_counts_repr_matches_torch(inclusive, linewidth):
    ours, theirs = pair(inclusive=inclusive, linewidth=linewidth)
    assert body(ours) == body(theirs)
    assert body(ours[2:7]) == body(theirs[2:7])  # slices are not truncated
    assert body(ours[:0]) == body(theirs[:0])


def test_function_counts_repr_follows_torch_print_options():
    ours, theirs = pair()
    old = torch._tensor_str.PRINT_OPTS.linewidth
    try:
        torch.set_printoptions(linewidth=160)
        assert body(ours) == body(theirs)
        assert "..." not in body(ours).splitlines()[0] or len(ROWS[0][1]) > 150
    finally:
        torch.set_printoptions(linewidth=old)


def test_function_counts_arithmetic_matches_torch():
    ours, theirs = pair()
    o2, t2 = pair(rows=[(c * 3 + 1, f) for c, f in ROWS[::2]] + [(9, "new.c:g")])
    same(ours + o2, theirs + t2)
    same(ours - o2, theirs - t2)
    same(ours - ours, theirs - theirs)
    same(ours * 2.5, theirs * 2.5)
    same(ours * -1, theirs * -1)
    strip = lambda fn: fn.rsplit("/", 1)[-1]  # noqa: E731
    same(ours.transform(strip), theirs.transform(strip))
    keep = lambda fn: "lib1" in fn  # noqa: E731
    same(ours.filter(keep), theirs.filter(keep))
    assert ours.sum() == theirs.sum()
    assert len(ours) == len(theirs)
    assert [tuple(r) for r in iter(ours)] == [tuple(r) for r in iter(theirs)]
    with pytest.raises(AssertionError, match="inclusive and exclusive"):
        ours + pair(inclusive=True)[0]


def test_function_counts_index_returns_a_row():
    # torch 2.13 bug: theirs[0] wraps the row (a tuple) in a FunctionCounts whose
    # repr then crashes. opbench returns the FunctionCount itself.
    ours, theirs = pair()
    assert ours[0] == FunctionCount(*ROWS[0])
    assert ours[-1] == FunctionCount(-700, "???:negative_row")
    if torch_bugs.function_counts_index_wraps_the_row():
        with pytest.raises(TypeError):
            repr(theirs[0])
    else:
        assert (tuple(ours[0]), tuple(ours[-1])) == (tuple(theirs[0]), tuple(theirs[-1]))


def test_denoise_removes_the_running_pythons_lookups():
    # torch 2.13 filters only "dictobject.c:lookdict_unicode" (CPython <= 3.10); 3.11
    # renamed it, so torch keeps unicodekeys_lookup_unicode. opbench removes both.
    assert ROWS[1][1].endswith(torch_bugs.PY311_DICT_LOOKUP)
    ours, theirs = pair()
    removed = {r.function for r in ours} - {r.function for r in ours.denoise()}
    assert removed == {ROWS[1][1], ROWS[2][1]}
    if torch_bugs.denoise_keeps_the_py311_dict_lookup():
        legacy = lambda fn: "lookdict_unicode" not in fn  # noqa: E731
        same(ours.filter(legacy), theirs.denoise())
    else:
        same(ours.denoise(), theirs.denoise())


def spec_pair(**kw):
    kw = {"stmt": "x += 1", "setup": "x = torch.ones((1,))", **kw}
    return TaskSpec(**kw), t_common.TaskSpec(**kw)


def stats_pair(debug: bool, **spec_kw):
    spec, t_spec = spec_pair(**spec_kw)
    (ei, ti), (ee, te) = pair(inclusive=True, linewidth=80), pair(linewidth=80)
    (bi, tbi), (be, tbe) = pair(ROWS[:3], True), pair(ROWS[:3])
    ours = CallgrindStats(spec, 100, debug, bi, be, ei, ee, "raw")
    theirs = t_cg.CallgrindStats(t_spec, 100, debug, tbi, tbe, ti, te, "raw")
    return ours, theirs


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("spec_kw", [{}, {"label": "add", "sub_label": "s", "num_threads": 4,
                                          "description": "d", "setup": "a = 1\nb = 2"}])
def test_callgrind_stats_matches_torch(debug, spec_kw, monkeypatch):
    ours, theirs = stats_pair(debug, **spec_kw)
    assert ours.counts() == theirs.counts()
    # Where torch's denoise misses 3.11's lookup (see the denoise test), opbench removes it too.
    missed = ROWS[1][0] if torch_bugs.denoise_keeps_the_py311_dict_lookup() else 0
    assert ours.counts(denoise=True) == theirs.counts(denoise=True) - missed
    # With torch's denoise given opbench's symbol list, the text is identical.
    monkeypatch.setattr(t_cg.FunctionCounts, "denoise", lambda self: self.filter(
        lambda fn: _NOISY_SYMBOL.search(fn) is None))
    assert body(ours) == body(theirs)
    for inclusive in (False, True):
        same(ours.stats(inclusive), theirs.stats(inclusive))
        same(ours.delta(ours, inclusive), theirs.delta(theirs, inclusive))
    s_ours, s_theirs = ours.as_standardized(), theirs.as_standardized()
    assert s_ours.stmt_callgrind_out is None
    for field in ("baseline_inclusive_stats", "baseline_exclusive_stats",
                  "stmt_inclusive_stats", "stmt_exclusive_stats"):
        same(getattr(s_ours, field), getattr(s_theirs, field))


def test_pickle_round_trip():
    ours, _ = stats_pair(False, label="l")
    back = pickle.loads(pickle.dumps(ours))
    assert body(back) == body(ours)
    assert back.task_spec == ours.task_spec and back.stmt_callgrind_out == "raw"
    fc = pickle.loads(pickle.dumps(ours.stats()))
    assert list(fc) == list(ours.stats()) and fc._linewidth == 80


# -- the callgrind output format ------------------------------------------------------

# Exercises name compression in every id space, fi/fe (inlined code), cfi, calls,
# a recursive call, two events, `positions: instr line` with hex, +n/-n/* subpositions.
SYNTHETIC = textwrap.dedent("""\
    # callgrind format
    version: 1
    creator: callgrind-3.19.0
    pid: 42
    cmd: prog
    part: 1

    desc: I1 cache:
    desc: Trigger: Client Request: opbench stmt

    positions: instr line
    events: Ir Dr
    summary: 1234
    totals: 1234

    ob=(1) /usr/lib/libfoo.so
    fl=(1) /src/main.c
    fn=(1) main
    0x1000 10 100 5
    +4 +1 20
    * * 3 1
    fi=(2) /src/inline.h
    +2 -5 7
    fe=(1)
    +1 +5 11
    cfi=(3) /src/util.c
    cfn=(2) helper
    calls=2 0x2000 30
    +3 * 400 9
    cfn=(1)
    calls=1 0x1000 10
    +1 * 50
    ob=(2) /usr/lib/libbar.so
    fl=(3)
    fn=(2)
    0x2000 30 380 2
    cob=(1)
    cfi=(1)
    cfn=(3) leaf
    calls=4 0x3000
    +2 31 20
    fl=(1)
    fn=(3)
    0x3000 40 20

    ob=(1)
    fl=(1)
    fn=(1)
    0x1000 10 50

    totals: 1234
    """)


def test_parser_attributes_costs_like_the_format_says():
    p = parse_callgrind_out(SYNTHETIC.splitlines())
    assert p.total == 1234
    main = "/src/main.c:main [/usr/lib/libfoo.so]"
    helper = "/src/util.c:helper [/usr/lib/libbar.so]"
    leaf = "/src/main.c:leaf [/usr/lib/libbar.so]"
    assert p.exclusive == {
        main: 100 + 20 + 3 + 11 + 50,  # fn=(1) reopened later adds to the same name
        "/src/inline.h:main": 7,  # inlined code counts against its own file
        helper: 380,
        leaf: 20,
    }
    # Callees: the sum of the calls into them (for main: the recursive call);
    # functions nobody calls: self + the calls they make.
    assert p.inclusive == {main: 50, "/src/inline.h:main": 7, helper: 400, leaf: 20}
    dr = parse_callgrind_out(SYNTHETIC.splitlines(), event="Dr")
    assert dr.exclusive == {main: 6, "/src/inline.h:main": 0, helper: 2, leaf: 0}
    assert dr.total == 8  # no Dr in summary/totals: the sum


def _annotate(path: str, inclusive: bool) -> dict[str, int]:
    out = subprocess.run(
        ["callgrind_annotate", "--show=Ir", f"--inclusive={'yes' if inclusive else 'no'}",
         "--threshold=100", "--show-percs=no", path],
        # From "/": callgrind_annotate strips its cwd from file names; opbench does not.
        capture_output=True, text=True, check=True, cwd="/").stdout
    rows: dict[str, int] = {}
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        parts = line.split(None, 1)
        if started and len(parts) == 2 and parts[0].replace(",", "").isdigit():
            rows[parts[1]] = int(parts[0].replace(",", ""))
    return rows


def annotate_matches(path: str) -> None:
    with open(path) as f:
        p = parse_callgrind_out(f.read().splitlines())
    for inclusive, ours in ((False, p.exclusive), (True, p.inclusive)):
        assert _annotate(path, inclusive) == {k: v for k, v in ours.items() if v}


@pytest.mark.skipif(shutil.which("callgrind_annotate") is None,
                    reason="callgrind_annotate not installed")
def test_parser_matches_callgrind_annotate_on_synthetic_file(tmp_path):
    path = tmp_path / "callgrind.out.1"
    path.write_text(SYNTHETIC)
    annotate_matches(str(path))


def test_parser_rejects_garbage():
    with pytest.raises(ValueError, match="undefined name"):
        parse_callgrind_out(["events: Ir", "fl=(1) a.c", "fn=(7)", "1 1"])
    with pytest.raises(ValueError, match="no 'Ir' event"):
        parse_callgrind_out(["events: Dr"])


def test_import_does_not_import_torch():
    code = ("import sys, opbench.callgrind, opbench.callgrind.collect\n"
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
