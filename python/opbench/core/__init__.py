"""What a measurement is, and the algorithms a Timer runs to take one.

- ``measurement``: ``Measurement`` and ``TaskSpec`` (torch's), units and significant figures.
- ``instructions``: ``InstructionCounts``, a deterministic count of instructions.
- ``stopping``: when to stop sampling (``adaptive_autorange``, ``until``).
- ``first_call``: the first call's cost, apart from the steady state.
- ``profile``: a cProfile of the timed loop.

Floor: core (may import from native, base, stats, engines and its own floor).
Nothing here imports ``opbench.timer``: the Timer drives these modules, not the reverse.
"""
