"""Fuzzers: random, reproducible inputs for benchmarks (torch's ``Fuzzer``).

- ``fuzzer``: ``Fuzzer``, ``FuzzedParameter``, ``ParameterAlias`` and (from
  ``fuzzed_tensor``) ``FuzzedTensor``; ``_deps``: torch and numpy on first use.
- ``sparse_fuzzer``: ``FuzzedSparseTensor``.
- ``op_fuzzers/``: torch's ready-made fuzzers (unary, binary, sparse, spectral).

Floor: core; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
torch is imported when a fuzzer is used, never on import.
"""
