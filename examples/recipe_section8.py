"""The benchmark recipe's section 8 with opbench: two C++ implementations of the
same function, built with ``torch.utils.cpp_extension.load_inline``, one taking
its tensors by value and one by const reference, compared by time.

The extension also includes opbench's own header library (through
``opbench.cpp.include_dir()``) to time the by-reference call in a C++ loop with
no Python in it, the figure the Python-level timing cannot isolate.

Run it::

    python examples/recipe_section8.py          # ~30-60 s the first time (compiles)
"""
from __future__ import annotations

from typing import Any

import opbench.cpp

CPP_SOURCE = r"""
#include "opbench/loop.h"

// Copies of the two tensor handles: two reference-count increments and
// decrements per call (atomic operations), the cost section 8 shows.
torch::Tensor batched_dot_by_value(torch::Tensor a, torch::Tensor b) {
  return a.mul(b).sum(-1);
}

torch::Tensor batched_dot_by_reference(const torch::Tensor& a, const torch::Tensor& b) {
  return a.mul(b).sum(-1);
}

// Nanoseconds per call of the by-reference version over n calls, timed in C++
// with opbench's loop (the result is kept alive by the loop's barrier).
double by_reference_ns_per_call(const torch::Tensor& a, const torch::Tensor& b, int64_t n) {
  const auto ns = opbench::time_loop_ns([&] { return batched_dot_by_reference(a, b); }, n);
  return static_cast<double>(ns) / static_cast<double>(n);
}
"""

FUNCTIONS = ["batched_dot_by_value", "batched_dot_by_reference", "by_reference_ns_per_call"]


def build_module(verbose: bool = False) -> Any:
    """Compiles the extension (torch caches the build under ~/.cache/torch_extensions)."""
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="opbench_recipe_section8",
        cpp_sources=[CPP_SOURCE],
        functions=FUNCTIONS,
        extra_include_paths=[opbench.cpp.include_dir()],
        extra_cflags=["-O2"],
        verbose=verbose,
    )


def compare(module: Any, x: Any, min_run_time: float = 0.2) -> dict[str, Any]:
    """One Measurement per implementation, from opbench.Timer.blocked_autorange."""
    from opbench.timer import Timer

    results = {}
    for name in ("batched_dot_by_value", "batched_dot_by_reference"):
        timer = Timer(
            stmt=f"module.{name}(x, x)",
            globals={"module": module, "x": x},
            label="batched dot (load_inline)",
            sub_label=name,
            description="by value" if "value" in name else "by reference",
        )
        results[name] = timer.blocked_autorange(min_run_time=min_run_time)
    # INSTRUCTION COUNTS (callgrind): the recipe's second half, the instruction
    # count delta between the two (`collect_callgrind().delta(...)`), is added
    # with opbench's callgrind support; until then this example compares time only.
    return results


def main() -> None:
    import torch

    module = build_module()
    x = torch.randn(10000, 64)
    assert torch.equal(module.batched_dot_by_value(x, x), module.batched_dot_by_reference(x, x))
    small = torch.randn(2, 2)  # tiny tensors: the call overhead is what is measured
    for name, m in compare(module, small).items():
        print(m)
    print(f"by reference, C++ loop: {module.by_reference_ns_per_call(small, small, 100000):.0f} ns/call")


if __name__ == "__main__":
    main()
