"""What a measurement is, and the algorithms a Timer runs to take one.

- ``measurement``: ``Measurement`` (torch's), units and significant figures.
- ``task_spec``: ``TaskSpec`` (torch's): what was timed, and its labels.
- ``instructions``: ``InstructionCounts``, a deterministic count of instructions.
- ``stopping``: when to stop sampling (``adaptive_autorange``, ``until``).
- ``first_call``: the first call's cost, apart from the steady state.
- ``profile``: a cProfile of the timed loop.
- ``work``: the FLOPs and bytes of one run, declared or counted (``_work_modes``: torch's side).
- ``throughput``: a Measurement's work per run and rates (FLOP/s, bytes/s).
- ``roofline``: the roofline: arithmetic intensity, bound, efficiency, the "% of peak"
  column and the plot.
- ``peaks``: this machine's bandwidth and FLOP rates, measured once and cached.

Floor: core; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
Nothing here imports ``opbench.timer``: the Timer drives these modules, not the reverse.
"""
