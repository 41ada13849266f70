"""Work counting (opbench.core.work): FLOPs and bytes counted from a torch statement's ATen
ops, checked against figures computed by hand from the shapes; declared work. The
dispatch modes' own pieces are tested in test_work_modes.py."""
from __future__ import annotations

import pytest
import torch

from opbench import UsageError
from opbench.core.work import check_declared, count, resolve

F32 = 4


def test_copy_reads_the_source_and_writes_the_destination_once():
    x, y = torch.ones(1000), torch.empty(1000)
    w = count(lambda: y.copy_(x))
    assert (w.flops, w.bytes_read, w.bytes_written, w.bytes) == (0, 1000 * F32, 1000 * F32,
                                                                2000 * F32)
    assert w.ops == {"aten.copy_.default": 1} and w.device == "cpu" and w.dtype == "float32"


def test_add_reads_two_writes_one_and_counts_a_flop_per_element():
    x, y = torch.ones(300), torch.ones(300)
    w = count(lambda: x + y)
    assert (w.flops, w.bytes) == (300, 3 * 300 * F32)
    assert count(lambda: torch.add(x, y, alpha=2)).flops == 600  # multiply, then add


def test_gemm_flops_are_torchs_and_bytes_are_the_three_matrices():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    w = count(lambda: a @ b)
    assert w.flops == 2 * 64 * 32 * 16
    assert w.bytes == (64 * 32 + 32 * 16 + 64 * 16) * F32


def test_in_place_op_reads_and_writes_its_tensor():
    x = torch.ones(100)
    w = count(lambda: x.add_(1))
    assert (w.bytes_read, w.bytes_written, w.flops) == (100 * F32, 100 * F32, 100)


def test_out_argument_is_written_not_read():
    x, y, out = torch.ones(50), torch.ones(50), torch.empty(50)
    w = count(lambda: torch.add(x, y, out=out))
    assert (w.bytes_read, w.bytes_written) == (100 * F32, 50 * F32)


def test_views_move_nothing_and_a_column_is_only_its_bytes():
    a = torch.randn(64, 32)
    w = count(lambda: a[:, 0].sum())
    assert w.bytes_read == 64 * F32 and w.bytes_written == F32  # one column, one scalar
    assert w.flops == 63
    assert count(lambda: a.view(-1).view(32, 64).t()).bytes == 0  # views alone


def test_transposed_copy_reads_the_whole_matrix_once():
    a = torch.randn(64, 32)
    w = count(lambda: a.t().contiguous())
    assert (w.bytes_read, w.bytes_written) == (64 * 32 * F32, 64 * 32 * F32)


def test_a_storage_touched_by_many_ops_counts_once_per_direction():
    x = torch.ones(100)
    w = count(lambda: (x * 2) + x)  # x read twice, the temporary written then read
    assert w.bytes_read == 200 * F32 and w.bytes_written == 200 * F32
    assert w.flops == 200


def test_outputs_aliasing_inputs_are_not_written_again():
    x = torch.ones(100)
    w = count(lambda: x.mul_(2).add_(1))  # each returns x itself
    assert (w.bytes_read, w.bytes_written) == (100 * F32, 100 * F32)
    assert count(lambda: x.detach()).bytes == 0


def test_broadcast_reads_the_small_operand_once():
    a, row = torch.ones(10, 100), torch.ones(100)
    w = count(lambda: a + row)
    assert w.bytes_read == (1000 + 100) * F32 and w.bytes_written == 1000 * F32


def test_arithmetic_without_a_formula_makes_flops_unknown_not_zero():
    x = torch.ones(100)
    w = count(lambda: x.exp())
    assert w.flops is None and w.bytes == 200 * F32
    assert w.unknown_flops == ("aten.exp",) and "aten.exp" in w.reason
    assert w.info()["unknown_flops"] == ["aten.exp"]


@pytest.mark.parametrize("stmt, reason", [
    (lambda: sum(range(10)), "no ATen op"),
    (lambda: torch.ones(4).to_sparse().sum(), "sparse"),
    (lambda: torch.ones(4, device="meta") + 1, "meta"),
    (lambda: 1 / 0, "ZeroDivisionError"),
])
def test_a_statement_that_cannot_be_counted_gets_none_and_a_reason(stmt, reason):
    w = count(stmt)
    assert w.flops is None and w.bytes is None
    assert reason in w.reason


def test_declared_work_is_checked_early():
    for bad in (-1, float("nan"), "lots", True):
        with pytest.raises(UsageError, match="number >= 0"):
            check_declared("flops", bad)
    for good in (None, 0, 1.5e9, "count", len):
        check_declared("bytes", good)


def test_a_callable_gets_the_inputs_its_parameters_name():
    a = torch.ones(8, 4)
    assert resolve("flops", lambda a: 2 * a.numel(), {"a": a, "b": 1}) == 64
    assert resolve("bytes", lambda **kw: len(kw), {"a": 1, "b": 2, "__builtins__": {}}) == 2
    assert resolve("bytes", lambda: torch.tensor(12), {}) == 12  # a 0-d tensor is a number
    with pytest.raises(UsageError, match=r"'c' names no input .* a, b"):
        resolve("flops", lambda c: c, {"a": 1, "b": 2})
    with pytest.raises(UsageError, match="must return a number"):
        resolve("flops", lambda: "many", {})
