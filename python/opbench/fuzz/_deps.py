"""torch and numpy for the fuzzers, imported on first use, so that importing a fuzzer
module never imports torch: ``require()`` binds ``torch`` and ``np`` here, or fails with
the install hint."""
from __future__ import annotations

from typing import Any

_INSTALL_HINT = "opbench.fuzz.fuzzer needs torch (and numpy): pip install torch"

# Bound by require() on first use.
torch: Any = None
np: Any = None


def require() -> None:
    """Import torch and numpy on first use; fail with an install hint when they are missing."""
    global torch, np
    if torch is not None:
        return
    try:
        import numpy as numpy_mod
        import torch as torch_mod
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    np, torch = numpy_mod, torch_mod
