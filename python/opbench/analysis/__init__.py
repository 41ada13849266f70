"""Reading results: tables, comparisons, exports, plots, compile studies.

- ``table``: torch's ``Compare`` table layout; ``compare``: ``Compare`` itself;
  ``columns``: its GB/s, TFLOP/s and % of peak columns.
- ``export``: CSV, JSON and Markdown of a comparison; ``plot``: matplotlib figures
  (the roofline's is ``opbench.core.roofline``'s).
- ``compile``: ``opbench.analysis.compile``: torch's compile utilities, and ``overheads``: eager
  against torch.compile per call, split by layer. ``compile_overheads`` measures and
  prints, ``compile_split`` times each layer; ``compile_layers`` finds each layer's
  callable through torch's own objects (``compile_boundaries``: the search, the recorders);
  ``compile_settings`` the settings (columns); ``compile_instructions`` the counts
  under callgrind.

Floor: analysis; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
