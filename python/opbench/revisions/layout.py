"""Layout: each command run at a revision gets an environment of a random size, so the
placement of its memory is drawn afresh per run instead of fixed per session.

Why: the size of a process's environment moves where its heap begins (CPython copies
the environment into ``os.environ`` at start-up, before anything is imported), and so the
alignment of every object the timed code touches. One fixed size gives every run of a
session the same placement, and with it a bias that all its runs agree on: measured on
``packaging`` 23.1's ``canonicalize_name``, one-benchmark runs read 928 ns with no
padding against 1052 ns with 700 bytes of it (+13%, the two groups did not overlap),
while 23.2, with the same function code, read the same at every size. No number of runs
or rounds inside one session can see such a bias; a random size per run turns it into
run-to-run noise, which replicates and rounds average and the noise estimate counts
(Mytkowicz et al., "Producing wrong data without doing anything obviously wrong",
ASPLOS 2009; Curtsinger and Berger's Stabilizer, ASPLOS 2013, re-randomizes layouts for
the same reason).

``pad()`` is the value of ``$OPBENCH_LAYOUT`` that ``Checkout.environment`` gives each
command: 0 to 4095 filler characters (a page, so every offset within one is drawn). A
user who sets ``$OPBENCH_LAYOUT`` keeps their value, hence one fixed placement.
Instruction counts do not depend on the environment's size (each counted loop starts
from the same heap: ``opbench.callgrind.in_process``); the pytest plugin's re-run under
valgrind drops the pad all the same (``opbench.integrations.pytest_plugin.reruns``), so
its process starts as it would outside a revision run.

Example:
    >>> len(pad()) < PAGE
    True
"""
from __future__ import annotations

import random

__all__ = ["LAYOUT_ENV", "PAGE", "pad"]

LAYOUT_ENV = "OPBENCH_LAYOUT"
#: The pad's length is drawn from ``range(PAGE)``.
PAGE = 4096

# Its own generator: a user's random.seed() neither fixes the pads nor is consumed by them.
_draw = random.Random()


def pad() -> str:
    """Filler of a random length in ``range(PAGE)``, drawn afresh at each call."""
    return "." * _draw.randrange(PAGE)
