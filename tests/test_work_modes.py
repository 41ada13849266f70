"""The dispatch modes behind opbench.core.work.count (opbench.core._work_modes): run_counted's
fields, and the exact union of the bytes strided views cover, checked by hand."""
from __future__ import annotations

import torch

from opbench.core import _work_modes
from opbench.core._work_modes import union_bytes

F32, F64 = 4, 8


def test_run_counted_gives_every_field_and_the_largest_tensors_dtype():
    big, small = torch.ones(100, dtype=torch.float64), torch.ones(10)
    fields = _work_modes.run_counted(lambda: (big.sum(), small.sum()))
    assert fields == dict(flops=99 + 9, bytes=100 * F64 + 10 * F32 + F64 + F32,
                          bytes_read=100 * F64 + 10 * F32, bytes_written=F64 + F32,
                          ops={"aten.sum.default": 2}, dtype="float64", device="cpu",
                          unknown_flops=(), reason=None)


def test_what_cannot_be_counted_is_only_a_reason():
    # count() fills the figures with None; run_counted says nothing it does not know.
    assert _work_modes.run_counted(lambda: None) == {
        "reason": "the statement ran no ATen op (nothing torch could count)"}
    meta = torch.ones(4, device="meta")
    assert _work_modes.run_counted(lambda: meta + 1) == {
        "reason": "cannot count the bytes of a Tensor on meta (no real storage)"}


def test_normalize_makes_a_dense_view_one_dimension():
    transposed = (0, (4, 4), (4, 16), 4)  # a 4x4 float matrix's .t()
    assert _work_modes._normalize(*transposed) == (0, (16,), (4,), 4)
    assert _work_modes._normalize(12, (4,), (-4,), 4) == (0, (4,), (4,), 4)  # flipped
    assert _work_modes._normalize(0, (3, 5), (0, 4), 4) == (0, (5,), (4,), 4)  # broadcast
    assert _work_modes._normalize(8, (1, 1), (4, 4), 4) == (8, (1,), (4,), 4)  # one element


def test_interval_union_counts_overlaps_once():
    assert _work_modes._interval_union([(0, 10), (5, 8), (8, 20), (30, 31)]) == 21
    assert _work_modes._interval_union([]) == 0


def test_overlap_is_judged_after_sorting_by_stride():
    assert _work_modes._non_overlapping(0, (4, 4), (4, 16), 4)  # a column of rows
    assert not _work_modes._non_overlapping(0, (4, 2), (4, 8), 4)  # rows of 4 floats 8 bytes apart overlap
    assert not _work_modes._non_overlapping(0, (3, 3), (4, 4), 4)  # a sliding window


def test_union_bytes_of_overlapping_strided_views_is_exact():
    # Rows 0 and 1 of a 4x4 matrix, and column 0: 4 + 4 + 2 (rows 2, 3) elements.
    row0, row1, col = (0, (4,), (4,), 1), (4, (4,), (1,), 1), (0, (4,), (4,), 1)
    assert union_bytes([(0, (2, 4), (4, 1), 1), col], 16) == 10
    assert union_bytes([row0], 16) == 4  # a strided view alone: its elements
    assert union_bytes([(0, (4,), (1,), 1), row1], 16) == 8  # two intervals
    assert union_bytes([(0, (3,), (-1,), 1)], 16) == 3  # negative stride


def test_a_storage_too_large_to_mask_is_left_uncounted(monkeypatch):
    monkeypatch.setattr(_work_modes, "_MASK_LIMIT", 15)
    views = [(0, (2, 4), (4, 1), 1), (0, (4,), (4,), 1)]  # two rows and a column
    assert union_bytes(views, 16) is None
    assert union_bytes(views[:1], 16) == 8  # a dense view needs no mask
