"""Globals that cross the process boundary into the callgrind child."""
from __future__ import annotations

from typing import Any


class CopyIfCallgrind:
    """Marks a global that ``collect_callgrind`` may replace with a deserialized copy.

    ``collect_callgrind`` runs the statement in a new process (under valgrind),
    so globals are copied: TorchScript functions/modules with ``torch.jit.save``,
    ``nn.Module`` with ``torch.save``, anything else with pickle. The wrapper
    makes that copy explicit; wall-clock methods use the wrapped value itself.
    ``setup`` is code the child runs before loading the value (e.g. an import
    the unpickling needs).

    Example:
        >>> g = {"n": CopyIfCallgrind(10)}
        >>> CopyIfCallgrind.unwrap_all(g)
        {'n': 10}
    """

    def __init__(self, value: Any, *, setup: str | None = None) -> None:
        self._value = value
        self._setup = setup

    @property
    def value(self) -> Any:
        return self._value

    @property
    def setup(self) -> str | None:
        return self._setup

    @staticmethod
    def unwrap_all(globals: dict[str, Any]) -> dict[str, Any]:
        """The dict with every CopyIfCallgrind replaced by its value."""
        return {k: (v.value if isinstance(v, CopyIfCallgrind) else v) for k, v in globals.items()}
