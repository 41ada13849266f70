"""Front ends: the ``opbench`` command line and the pytest plugin.

- ``cli/``: ``opbench timeit|compare|show|demo`` (one module per command).
- ``pytest_plugin``: the ``opbench`` fixture, ``--opbench-*`` options, saving and comparing runs.

Floor: front; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
