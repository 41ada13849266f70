"""Reading results: tables, comparisons, exports, plots, compile studies.

- ``table``: torch's ``Compare`` table layout; ``compare``: ``Compare`` itself;
  ``columns``: its GB/s, TFLOP/s and % of peak columns.
- ``export``: CSV, JSON and Markdown of a comparison; ``plot``: matplotlib figures;
  ``roofline``: the roofline plot.
- ``compile``: ``opbench.compile``: torch's compile utilities, and ``overheads``: eager
  against torch.compile per call, split by layer. ``compile_overheads`` measures and
  prints; ``compile_layers`` finds each layer's callable through torch's own objects;
  ``compile_settings`` the settings (columns); ``compile_instructions`` the counts
  under callgrind.

Floor: analysis (may import from native, base, stats, engines, core, callgrind, memory,
timer, store and its own floor).
"""
