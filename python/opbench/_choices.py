"""The named choices of the gate and of ``opbench ab``, and their defaults, declared once.

The gate (``opbench.gate``) and the A/B session (``opbench.revisions.session``) check
their arguments against these; the command line and the pytest plugin build their
options from them. Those two must not import the gate to do so: it costs about as
much again as ``import opbench``, paid at the start of every command and every pytest
session whether it gates or not. So the lists live here, on the base floor, where
everything may read them.

Example:
    >>> from opbench import _choices
    >>> _choices.POLICIES, _choices.WAVE
    (('fail', 'warn', 'pass'), 3)
"""
from __future__ import annotations

# What an undecided benchmark that looks slower does to the gate (the first: default).
POLICIES = ("fail", "warn", "pass")
# A gate's report (text for a terminal, markdown for a PR comment, json for tools).
FORMATS = ("text", "markdown", "json")
# What the gate compares: time, or time per unit of the declared or counted work; each
# name maps to the work a throughput divides by (None: time itself).
GATE_METRICS = {"time": None, "byte_rate": "bytes", "flop_rate": "flops"}
# How a benchmark is measured: by the clock, by instructions under callgrind, or by its
# memory per call (allocations, bytes, peak, leak) with the allocation counter preloaded.
MODES = ("time", "instructions", "memory")
# The modes that count rather than time: exact figures, one run a side decides.
COUNTED_MODES = ("instructions", "memory")
# How ab interleaves base and head: turns within processes, whole runs (ABBA), or turns
# where both sides can.
INTERLEAVES = ("auto", "turns", "runs")
# What one run contributes per benchmark: a quantile of its per-run times; the first is
# the default everywhere runs are compared (history, compare, the plugin's gate, ab, find).
RUN_STATISTICS = {"p10": 0.1, "median": 0.5}
RUN_STATISTIC = "p10"
# Seconds a block lasts in the runs that are compared (the pytest plugin's benchmarks,
# ab's turns): short, so that most blocks of a run on a busy machine run without being
# preempted, and the same everywhere, so that a run's figure means the same in every run.
BLOCK = 0.002
# ab's rounds at most, and rounds whose processes start at once: one wave of three pairs
# is decided with 4 degrees of freedom, and their start-ups overlap.
ROUNDS = 3
WAVE = 3
