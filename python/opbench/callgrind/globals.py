"""Globals that cross the process boundary into the callgrind child."""
from __future__ import annotations

from typing import Any


class _AlsoTorchs(type):
    """``isinstance(x, CopyIfCallgrind)`` holds for torch's CopyIfCallgrind too (it has the
    same ``value`` and ``setup``): globals wrapped for torch's Timer work with opbench's."""

    def __instancecheck__(cls, obj: Any) -> bool:
        kind = type(obj)
        return super().__instancecheck__(obj) or (
            kind.__name__ == cls.__name__ and kind.__module__.startswith("torch.utils.benchmark"))


class CopyIfCallgrind(metaclass=_AlsoTorchs):
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
