"""opbench._threads: torch's thread pool set for the timed region, then restored."""
from __future__ import annotations

import subprocess
import sys

import pytest

from opbench._threads import set_torch_threads


def test_without_torch_imported_nothing_is_imported() -> None:
    code = ("import sys; from opbench._threads import set_torch_threads\n"
            "with set_torch_threads(3): pass\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.strip() == "False"


def test_the_prior_size_comes_back_even_after_an_error() -> None:
    torch = pytest.importorskip("torch")
    prior = torch.get_num_threads()
    with pytest.raises(KeyError), set_torch_threads(1):
        assert torch.get_num_threads() == 1
        raise KeyError("inside")
    assert torch.get_num_threads() == prior
