"""``torch.utils.benchmark.op_fuzzers``: torch's ready-made fuzzers under their paths.

Each module re-exports its fuzzer from ``opbench.fuzz.op_fuzzers`` (the same
class): ``binary``, ``unary``, ``sparse_binary``, ``sparse_unary``, ``spectral``.

Floor: front (may import from native, base, stats, engines, core, callgrind, memory,
timer, store, analysis, sweep and its own floor).
"""
