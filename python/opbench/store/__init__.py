"""Results on disk: what opbench saves, and loads back unchanged.

- ``results``: ``save``/``load`` of Measurements (a versioned JSON file, written atomically).
- ``sweep_file``: the file a sweep appends to as tasks finish, so it resumes.
- ``baselines``: this machine's numbered autosaved runs under ``.opbench/``.

Floor: store; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
