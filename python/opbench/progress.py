"""A progress bar with time left, for long sweeps; silent unless someone is watching.

``Progress`` draws on stderr when stderr is a terminal, and stays silent when
it is not (logs, pipes, CI), so sweeps can always use it. Who decides, first
match wins:

1. ``enabled=True`` / ``False`` (``progress=`` in ``run_all``): the caller's choice;
2. the ``OPBENCH_PROGRESS`` environment variable: ``0`` (or ``false``/``no``/``off``)
   silences it, any other value turns it on even off a terminal;
3. whether the stream is a terminal.

On a terminal the bar redraws one line in place; forced onto a file or pipe
it writes one line per update instead (throttled), which reads well in logs.
The time left is the mean time per finished item times the items left. No
dependency on tqdm.

Example:
    >>> import opbench
    >>> from opbench.sweep import run_all
    >>> timers = [opbench.Timer(f"sum(range({n}))") for n in (10, 100)]
    >>> [m.number_per_run for m in run_all(timers, "timeit", number=100, progress=False)]
    [100, 100]
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from opbench._checks import check_count

__all__ = ["Progress"]

ENV_VAR = "OPBENCH_PROGRESS"
_OFF_VALUES = {"0", "false", "no", "off"}


def _format_duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def _resolve_enabled(enabled: bool | None, stream: Any) -> bool:
    if enabled is not None:
        return bool(enabled)
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env:
        return env not in _OFF_VALUES
    return _is_terminal(stream)


class Progress:
    """Counts finished items out of ``total`` and shows a bar with elapsed time and time left.

    Args:
        total: number of items the sweep will finish (> 0).
        desc: what is running, shown before the bar.
        enabled: True / False to force, None to decide from ``OPBENCH_PROGRESS``
            and whether ``stream`` is a terminal (see the module doc).
        stream: where to draw; default ``sys.stderr`` (resolved when created).
        min_interval: seconds between redraws (the last item always draws).

    Use as a context manager; ``update()`` after each finished item, optionally
    naming the next one. A disabled Progress costs a few attribute reads.

    Example:
        >>> with Progress(3, desc="sweep", enabled=False) as bar:
        ...     for _ in range(3):
        ...         bar.update()
        >>> bar.done
        3
    """

    def __init__(
        self,
        total: int,
        *,
        desc: str = "opbench",
        enabled: bool | None = None,
        stream: IO[str] | None = None,
        min_interval: float = 0.1,
        _clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_count("total", total, minimum=0)
        self.total = total
        self.desc = desc
        self.done = 0
        self._stream = sys.stderr if stream is None else stream
        self.enabled = _resolve_enabled(enabled, self._stream)
        self._in_place = _is_terminal(self._stream)
        self._min_interval = min_interval
        self._clock = _clock
        self._start = _clock()
        self._last_draw = -float("inf")
        self._last_width = 0
        self._item = ""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1, *, item: str | None = None) -> None:
        """Marks ``n`` more items finished; ``item`` names what runs next."""
        self.done = min(self.done + n, self.total)
        if item is not None:
            self._item = item
        self._draw(force=self.done == self.total)

    def set_item(self, item: str) -> None:
        """Names the item now running (redrawn with the next update, or now if due)."""
        self._item = item
        self._draw(force=False)

    def eta(self) -> float | None:
        """Estimated seconds left, or None before the first item finishes."""
        if self.done == 0:
            return None
        elapsed = self._clock() - self._start
        return elapsed / self.done * (self.total - self.done)

    def line(self) -> str:
        """The bar as text, e.g. ``sweep  2/4 |#####     |  50% 0:03 elapsed, ~0:03 left``."""
        elapsed = self._clock() - self._start
        fraction = self.done / self.total if self.total else 1.0
        filled = int(fraction * 20)
        eta = self.eta()
        left = "?" if eta is None else f"~{_format_duration(eta)}"
        text = (f"{self.desc}  {self.done}/{self.total} |{'#' * filled}{' ' * (20 - filled)}| "
                f"{fraction * 100:3.0f}% {_format_duration(elapsed)} elapsed, {left} left")
        if self._item and self.done < self.total:
            text += f"  {self._item.splitlines()[0] if self._item.strip() else ''}"
        return text

    def _draw(self, *, force: bool) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._last_draw < self._min_interval:
            return
        self._last_draw = now
        text = self.line()
        if self._in_place:
            # Never wrap: a wrapped line cannot be redrawn with a carriage return.
            width = shutil.get_terminal_size((80, 24)).columns - 1
            text = text[:width]
            self._stream.write("\r" + text.ljust(self._last_width))
            self._last_width = len(text)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def close(self) -> None:
        """Ends the bar's line (an interrupted sweep keeps its last state). Safe to call twice."""
        if self.enabled and self._in_place and self._last_width:
            self._stream.write("\n")
            self._stream.flush()
            self._last_width = 0
