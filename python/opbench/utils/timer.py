"""``torch.utils.benchmark.utils.timer``: ``Timer``, ``Language`` and the clock ``timer``.

``timer`` is the clock function, as in torch (the package's own
``opbench.timer`` is this module's namesake, a module that can be called).
torch's ``Language`` values are accepted wherever opbench takes its own:

    >>> from opbench.utils.timer import Language, Timer, timer
    >>> Timer("pass", language=Language.PYTHON).language is Language.PYTHON
    True
    >>> timer() <= timer()
    True
"""
from __future__ import annotations

from opbench.engines.python import default_timer as timer
from opbench.timer import Language, Timer

__all__ = ["Language", "Timer", "timer"]
