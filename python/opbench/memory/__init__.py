"""Memory per call: allocations, bytes, peaks and leaks of a statement (``Timer.memory``).

What is counted, and how (the result type is ``opbench.core.memory.MemoryCounts``):

* **The native heap** by an allocation counter preloaded into the measuring process
  (``libopbench_memory.so``, built with the extension from ``csrc/memory/counter.c``):
  it defines ``malloc`` and the rest of the C library's allocator ahead of glibc's,
  so every call binds to it, ``operator new`` (libstdc++ calls ``malloc``) and torch's
  CPU tensor storage (``posix_memalign``) included, and forwards to glibc.
* **Python objects** by wrapping CPython's three allocator domains, as tracemalloc
  does, in the same library; CPython's own calls into ``malloc`` are not counted
  twice.
* **CUDA** from torch's caching allocator statistics (``opbench.memory.cuda``).

Why a preloaded library, started with the process, rather than another way in:
glibc 2.34 removed ``__malloc_hook``; torch's profiler memory events see torch's
allocators only (not a C++ ``new`` in a statement, nor a library's ``malloc``);
patching each loaded library's PLT (memray's way in) misses calls inside one
library and libraries loaded later, and costs a stack walk per allocation when it
records stacks. A preloaded definition is what every call binds to, and costs one
relaxed load per allocation while nothing is counted (``benchmarks/memory.py``
measures the counter against memray, DHAT and tracemalloc, and its cost).

So memory is counted in a process started with the counter (``counter.preload_env``),
as instruction counts are in a process started under valgrind: ``Timer.memory``
starts one for the statement (``collect``, ``_child``), and ``pytest
--opbench-mode=memory`` runs the whole session again in one. Inside it,
``counting.count`` runs the statement in windows whose switches allocate nothing,
so setup, warm-up and opbench's own loop are outside the figures.

Floor: memory; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
