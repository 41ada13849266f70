"""``torch.utils.benchmark.utils.compare``: ``Compare`` and ``Colorize``.

    >>> from opbench.utils.compare import Colorize
    >>> Colorize("rowwise")
    <Colorize.ROWWISE: 'rowwise'>
"""
from __future__ import annotations

from opbench.analysis.compare import Colorize, Compare

__all__ = ["Colorize", "Compare"]
