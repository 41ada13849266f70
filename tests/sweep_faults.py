"""Statements that fail the way workers fail, for the sweep tests (any executor)."""
from __future__ import annotations


def die_once(marker: str) -> str:
    """A statement whose first call, anywhere, kills its process (exit status 9);
    every later call (the retry, on another worker) does nothing."""
    return (f"import os\nif not os.path.exists({marker!r}):\n"
            f"    open({marker!r}, 'w').close()\n    os._exit(9)")
