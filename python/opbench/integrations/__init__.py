"""Front ends: the ``opbench`` command line and the pytest plugin.

- ``cli/``: ``opbench timeit|compare|show|demo`` (one module per command).
- ``pytest_plugin``: the ``opbench`` fixture, ``--opbench-*`` options, saving and comparing runs.

Floor: front (may import from native, base, stats, engines, core, callgrind, memory,
timer, store, analysis, sweep and its own floor).
"""
