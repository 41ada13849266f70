"""opbench.callgrind.function_counts: per-function counts, their arithmetic and denoising
(torch parity of the printed text is in tests/test_callgrind.py)."""
from __future__ import annotations

from opbench.callgrind.function_counts import FunctionCount, FunctionCounts


def _fc(*rows: tuple[int, str]) -> FunctionCounts:
    return FunctionCounts(tuple(FunctionCount(c, f) for c, f in rows), inclusive=False)


def test_arithmetic_merges_by_function_and_drops_zeros() -> None:
    a = _fc((30, "a.c:f"), (12, "b.c:g"))
    b = _fc((30, "a.c:f"), (5, "c.c:h"))
    assert [(c, f) for c, f in a - b] == [(12, "b.c:g"), (-5, "c.c:h")]
    assert (a + b).sum() == 77 and (a * 2).sum() == 84


def test_transform_sums_names_that_collide() -> None:
    fc = _fc((10, "/build/x/a.c:f"), (5, "/other/a.c:f"), (1, "b.c:g"))
    short = fc.transform(lambda name: name.rsplit("/", 1)[-1])
    assert [(c, f) for c, f in short] == [(15, "a.c:f"), (1, "b.c:g")]


def test_denoise_removes_the_lookups_of_every_python_version() -> None:
    fc = _fc((100, "Python/ceval.c:_PyEval_EvalFrameDefault"),
             (7, "Objects/dictobject.c:lookdict_unicode"),
             (8, "Objects/dictobject.c:unicodekeys_lookup_unicode"),
             (9, "Objects/dictobject.c:do_lookup"))
    assert [f for _, f in fc.denoise()] == ["Python/ceval.c:_PyEval_EvalFrameDefault"]


def test_slices_are_counts_and_indexes_are_rows() -> None:
    fc = _fc((3, "a"), (2, "b"), (1, "c"))
    assert isinstance(fc[:2], FunctionCounts) and fc[:2].sum() == 5
    assert fc[0] == FunctionCount(3, "a") and len(fc.filter(lambda f: f != "b")) == 2
