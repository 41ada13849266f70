"""opbench.callgrind._child: what the callgrind child is sent (the job, the unrolled loop)."""
from __future__ import annotations

import threading

import pytest

import opbench
from opbench.callgrind import _child
from opbench.errors import SerializationError


def test_the_statement_is_unrolled_in_blocks_of_a_hundred() -> None:
    assert _child.block_stmt("f()", 3) == "f()\nf()\nf()\n"
    one_block = _child.block_stmt("f()", 100)
    assert not one_block.startswith("for") and one_block.count("f()") == 100  # no loop of one
    code = _child.block_stmt("f()", 250)
    assert code.startswith("for _ in range(2):\n    f()\n")
    assert code.count("f()") == 100 + 50  # the block once, looped twice, then the rest
    ns: dict = {"calls": []}
    exec(_child.block_stmt("calls.append(1)", 250), ns)
    assert len(ns["calls"]) == 250


def test_torch_is_spotted_in_any_of_the_code() -> None:
    assert _child.mentions_torch("x + 1", "import torch")
    assert _child.mentions_torch("torch.ones(2)")
    assert not _child.mentions_torch("torchlight = 1", "x = 2")


def test_messages_name_the_first_line_and_the_labels() -> None:
    timer = opbench.Timer("x + 1\ny = 2", label="add", description="small")
    assert _child.title(timer) == "`x + 1` | add | small"


def test_globals_cross_as_files_and_an_uncopyable_one_is_named(tmp_path) -> None:
    _child._dump("global 'xs'", [1, 2], str(tmp_path / "xs"), "pickle")
    assert _child.load(str(tmp_path / "xs"), "pickle") == [1, 2]
    with pytest.raises(SerializationError, match=r"cannot copy global 'lock' of type lock .*"
                                                 r"Create it in `setup` instead"):
        _child._dump("global 'lock'", threading.Lock(), str(tmp_path / "g"), "pickle")
