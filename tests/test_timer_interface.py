"""opbench.utils.valgrind_wrapper.timer_interface: callgrind's result classes under torch's path,
and ``Serialization``, which pickles of torch's ``CopyIfCallgrind`` name."""
from __future__ import annotations

import pytest

import opbench
from opbench.utils.valgrind_wrapper import timer_interface


def test_the_classes_are_opbenchs() -> None:
    assert timer_interface.CallgrindStats is opbench.CallgrindStats
    assert timer_interface.FunctionCounts is opbench.FunctionCounts


def test_serialization_has_torchs_members() -> None:
    torch_interface = pytest.importorskip("torch.utils.benchmark.utils.valgrind_wrapper.timer_interface")
    assert {m.name: m.value for m in timer_interface.Serialization} == \
        {m.name: m.value for m in torch_interface.Serialization}
