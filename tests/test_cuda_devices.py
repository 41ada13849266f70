"""opbench.engines.cuda.devices: the device and stream a timer uses, and torch's part in it."""
from __future__ import annotations

import sys
import types

import pytest

from opbench.engines.cuda import devices


class FakeTensor:
    """What the device choice looks at: ``is_cuda`` and ``device.index``."""

    def __init__(self, index):
        self.is_cuda = True
        self.device = types.SimpleNamespace(index=index)


def test_device_index():
    assert devices.device_index(1) == 1 and devices.device_index("cuda:2") == 2
    with pytest.raises(ValueError, match="device must be a CUDA device"):
        devices.device_index("cpu")
    with pytest.raises(TypeError, match="device must be an int"):
        devices.device_index(True)


def test_stream_handle():
    assert devices.stream_handle(None) is None and devices.stream_handle(7) == 7
    assert devices.stream_handle(types.SimpleNamespace(cuda_stream=9)) == 9
    with pytest.raises(TypeError,
                       match=r"stream must be None, an int CUstream handle or a torch\.cuda\.Stream"):
        devices.stream_handle("default")


def test_choose_device():
    assert devices.choose_device(3, None) == (3, "device argument")
    assert devices.choose_device(None, {"x": FakeTensor(1), "n": 3}) == (1, "CUDA tensors in globals")
    assert devices.choose_device(None, {"xs": [FakeTensor(2)]}) == (2, "CUDA tensors in globals")
    with pytest.raises(ValueError, match=r"CUDA tensors on devices \[0, 1\]: pass device="):
        devices.choose_device(None, {"a": [FakeTensor(0)], "b": {"k": FakeTensor(1)}})


def test_without_torch_the_current_device_is_0_and_the_stream_the_legacy_one(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert devices.torch_cuda() is None
    assert devices.choose_device(None, {}) == (0, "current device")
    assert devices.current_stream(0) == 0


def test_require_torch_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"graph mode needs torch .*install torch"):
        devices.require_torch("graph mode")


def test_importing_torch_is_never_done_here(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert devices.torch_cuda() is None
    assert "torch" not in sys.modules
