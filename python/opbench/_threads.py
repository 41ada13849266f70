"""The torch thread-pool size for the timed region, set and restored."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """Runs the block with ``torch.set_num_threads(n)``, restoring the prior size after.

    Does nothing when torch was never imported: then no code in this process
    can be using torch's thread pool, and importing torch just to set it
    would cost a second of start-up.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    prior = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        yield
    finally:
        torch.set_num_threads(prior)
