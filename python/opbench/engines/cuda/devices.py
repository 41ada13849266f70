"""Which CUDA device and stream a device timer uses, and how it reaches torch.

The device is ``device=`` when given, else that of the CUDA tensors in the
statement's globals, else torch's current device (0 without torch). The stream
is torch's current stream of that device, the legacy default stream (0) when
torch is not in use. torch is never imported here: a statement that does not
use torch (CuPy, triton alone) should not pay for it; ``torch_cuda()`` is
``torch.cuda`` only when the program imported torch and it sees a GPU.

Example:
    >>> device_index("cuda:2"), stream_handle(None), stream_handle(7)
    (2, None, 7)
"""
from __future__ import annotations

import sys
from typing import Any

from opbench.errors import CudaError

__all__ = ["choose_device", "current_stream", "default_device", "device_index", "require_torch",
           "stream_handle", "torch_cuda"]


def torch_cuda() -> Any | None:
    """torch.cuda when the program already imported torch and it sees a GPU, else None.

    Never imports torch itself.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


def require_torch(what: str) -> Any:
    """torch, with CUDA, for ``what``; an ImportError or a CudaError saying which is missing."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"{what} needs torch (torch.cuda.CUDAGraph captures the statement): "
                          "install torch") from e
    if not torch.cuda.is_available():
        raise CudaError(f"{what} needs torch with CUDA; this torch ({torch.__version__}) "
                        "sees no CUDA device")
    return torch


def stream_handle(stream: Any) -> int | None:
    """An int CUstream from None (resolved later), an int, or a torch stream."""
    if stream is None or isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if not isinstance(handle, int):
        raise TypeError(f"stream must be None, an int CUstream handle or a torch.cuda.Stream, "
                        f"got {type(stream).__name__}")
    return handle


def default_device() -> int:
    """torch's current device, 0 without torch."""
    tc = torch_cuda()
    return tc.current_device() if tc is not None else 0


def device_index(device: Any) -> int:
    """0 from ``0``, ``"cuda:0"``, ``"cuda"`` (the current device) or a torch.device.

    >>> device_index(1), device_index("cuda:2")
    (1, 2)
    """
    if isinstance(device, bool):
        raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, got {device!r}")
    if isinstance(device, int):
        return device
    text = str(device)
    kind, _, index = text.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"device must be a CUDA device (an int, 'cuda:N' or a torch.device), got {text!r}")
    return int(index) if index else default_device()


def _cuda_devices_in(values: Any) -> set[int]:
    """Indices of the CUDA tensors among ``values`` (and inside lists, tuples and dicts, one level)."""
    found: set[int] = set()
    for value in values:
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) \
            else ()
        for v in (value, *inner):
            if getattr(v, "is_cuda", False) is True:
                index = getattr(getattr(v, "device", None), "index", None)
                found.add(index if isinstance(index, int) else default_device())
    return found


def choose_device(device: Any, globals: dict[str, Any] | None) -> tuple[int, str]:
    """The device to time on and where it came from: ``device`` when given, else the
    CUDA tensors in ``globals``, else torch's current device."""
    if device is not None:
        return device_index(device), "device argument"
    found = _cuda_devices_in((globals or {}).values())
    if len(found) > 1:
        raise ValueError(f"the statement's globals hold CUDA tensors on devices {sorted(found)}: "
                         "pass device=... to say which device's stream to time")
    if found:
        return found.pop(), "CUDA tensors in globals"
    return default_device(), "current device"


def current_stream(device: int) -> int:
    """torch's current stream on ``device``, else the legacy default stream (0)."""
    tc = torch_cuda()
    return tc.current_stream(device).cuda_stream if tc is not None else 0
