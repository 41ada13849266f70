"""Fuzzers: random, reproducible inputs for benchmarks (torch's ``Fuzzer``).

- ``fuzzer``: ``Fuzzer``, ``FuzzedParameter``, ``FuzzedTensor``, ``ParameterAlias``.
- ``sparse_fuzzer``: ``FuzzedSparseTensor``.
- ``op_fuzzers/``: torch's ready-made fuzzers (unary, binary, sparse, spectral).

Floor: core (may import from native, base, stats, engines and its own floor).
torch is imported when a fuzzer is used, never on import.
"""
