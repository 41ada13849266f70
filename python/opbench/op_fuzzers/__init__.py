"""``torch.utils.benchmark.op_fuzzers``: torch's ready-made fuzzers under their paths.

Each module re-exports its fuzzer from ``opbench.fuzz.op_fuzzers`` (the same
class): ``binary``, ``unary``, ``sparse_binary``, ``sparse_unary``, ``spectral``.

Floor: front; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
