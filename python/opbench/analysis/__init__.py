"""Reading results: tables, comparisons, exports, plots, compile studies.

- ``table``: torch's ``Compare`` table layout; ``compare``: ``Compare`` itself.
- ``export``: CSV, JSON and Markdown of a comparison; ``plot``: matplotlib figures.
- ``compile``: ``opbench.compile``, torch.compile's fixed per-call overheads.

Floor: analysis (may import from native, base, stats, engines, core, callgrind, timer, store and its own
floor).
"""
