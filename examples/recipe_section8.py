"""The benchmark recipe's section 8 with opbench: two C++ implementations of the
same function, built with ``load_inline``, one taking its tensors by value (v0)
and one by const reference (v1), compared by time and then by instruction
counts (callgrind), whose delta shows which is cheaper: the binding's rows
(pybind11, wrap_pybind_function) fall by the argument copies by reference
skips, exactly; the total also carries each collection's own process noise
(a few tens of instructions a call, from its allocator and interpreter).

The extension is built by ``opbench.engines.cpp.load_inline``, torch's ``load_inline``
with torch's headers precompiled once and builds cached by content: after the
first build, editing one function rebuilds in seconds rather than half a
minute. It also includes opbench's own header library (through
``opbench.engines.cpp.include_dir()``) to time the by-reference call in a C++ loop with
no Python in it, the figure the Python-level timing cannot isolate.

Run it::

    python examples/recipe_section8.py          # ~1-2 min the first time (compiles)
    python examples/recipe_section8.py --loader torch  # torch's load_inline instead

The instruction counts need valgrind (about 20 s per collection;
``--skip-callgrind`` leaves them out).
"""
from __future__ import annotations

import argparse
import textwrap
from typing import Any, Callable

import opbench.engines.cpp

CPP_SOURCE = r"""
#include "opbench/loop.h"

// By value: copies of the two tensor handles, i.e. reference-count increments
// and decrements per call (atomic operations), the cost section 8 shows.
torch::Tensor batched_dot_mul_sum_v0(const torch::Tensor a, const torch::Tensor b) {
  return a.mul(b).sum(-1);
}

// By const reference: no copies.
torch::Tensor batched_dot_mul_sum_v1(const torch::Tensor& a, const torch::Tensor& b) {
  return a.mul(b).sum(-1);
}

// Nanoseconds per call of the by-reference version over n calls, timed in C++
// with opbench's loop (the result is kept alive by the loop's barrier).
double by_reference_ns_per_call(const torch::Tensor& a, const torch::Tensor& b, int64_t n) {
  const auto ns = opbench::time_loop_ns([&] { return batched_dot_mul_sum_v1(a, b); }, n);
  return static_cast<double>(ns) / static_cast<double>(n);
}
"""

FUNCTIONS = ["batched_dot_mul_sum_v0", "batched_dot_mul_sum_v1", "by_reference_ns_per_call"]
VERSIONS = {"batched_dot_mul_sum_v0": "by value", "batched_dot_mul_sum_v1": "by reference"}

# The recipe's `.transform` replacements: v0 and v1 symbols made equal, so the
# delta cancels what the two share and keeps what differs.
REPLACEMENTS = (
    ("???:void pybind11", "pybind11"),
    ("batched_dot_mul_sum_v0", "batched_dot_mul_sum_v1"),
    ("at::Tensor, at::Tensor", "..."),
    ("at::Tensor const&, at::Tensor const&", "..."),
    ("auto torch::detail::wrap_pybind_function_impl_", "wrap_pybind_function_impl_"),
)


def build_module(verbose: bool = False, load_inline: Callable[..., Any] | None = None) -> Any:
    """Compiles the extension with ``opbench.engines.cpp.load_inline`` (cached in opbench's C++
    cache), or with the ``load_inline`` given (torch's, to compare: it caches under
    ~/.cache/torch_extensions)."""
    if load_inline is None:
        load_inline = opbench.engines.cpp.load_inline
    return load_inline(
        name="opbench_recipe_section8",
        cpp_sources=[CPP_SOURCE],
        functions=FUNCTIONS,
        extra_include_paths=[opbench.engines.cpp.include_dir()],
        extra_cflags=["-O2"],
        verbose=verbose,
    )


def compare(module: Any, x: Any, min_run_time: float = 0.2) -> dict[str, Any]:
    """One Measurement per implementation, from opbench.Timer.blocked_autorange."""
    from opbench.timer import Timer

    results = {}
    for name, description in VERSIONS.items():
        timer = Timer(
            stmt=f"module.{name}(x, x)",
            globals={"module": module, "x": x},
            label="batched dot (load_inline)",
            sub_label=name,
            description=description,
        )
        results[name] = timer.blocked_autorange(min_run_time=min_run_time)
    return results


# -- INSTRUCTION COUNTS (callgrind) ----------------------------------------------------

def module_import_str(module: Any) -> str:
    """Setup code that imports the built extension from its file, as the recipe
    does: collect_callgrind runs the statement in a child process, which must
    import the extension again (it is not on sys.path)."""
    return textwrap.dedent(f"""\
        import importlib.util
        spec = importlib.util.spec_from_file_location({module.__name__!r}, {module.__file__!r})
        cpp_lib = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cpp_lib)""")


def callgrind_timers(module: Any) -> dict[str, Any]:
    """The recipe's t0 (v0, by value) and t1 (v1, by reference), keyed by function."""
    from opbench.timer import Timer

    setup = f"{module_import_str(module)}\nx = torch.randn(2, 2)"
    return {name: Timer(stmt=f"cpp_lib.{name}(x, x)", setup=setup) for name in VERSIONS}


def instruction_delta(module: Any, number: int = 100) -> tuple[Any, Any, Any]:
    """(stats_v0, stats_v1, delta): both implementations' instruction counts under
    callgrind, standardized, and v1 minus v0, denoised and with the recipe's
    replacements applied. A negative total means v1 executes fewer instructions."""
    t0, t1 = callgrind_timers(module).values()
    stats_v0 = t0.collect_callgrind(number=number).as_standardized()
    stats_v1 = t1.collect_callgrind(number=number).as_standardized()
    delta = stats_v1.delta(stats_v0).denoise()
    for before, after in REPLACEMENTS:
        delta = delta.transform(lambda name, b=before, a=after: name.replace(b, a))
    return stats_v0, stats_v1, delta


def pretty_print(module: Any, result: Any) -> None:
    """The import machinery in setup is repetitive to look at: shown as `import cpp_lib`."""
    print(repr(result).replace(textwrap.indent(module_import_str(module), "  "), "  import cpp_lib"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loader", choices=("opbench", "torch"), default="opbench",
                        help="whose load_inline builds the extension (default: opbench)")
    parser.add_argument("--skip-callgrind", action="store_true",
                        help="leave out the instruction counts")
    args = parser.parse_args(argv)
    import torch

    loader = None
    if args.loader == "torch":
        from torch.utils.cpp_extension import load_inline as loader
    module = build_module(load_inline=loader)
    x = torch.randn(10000, 64)
    assert torch.equal(module.batched_dot_mul_sum_v0(x, x), module.batched_dot_mul_sum_v1(x, x))
    small = torch.randn(2, 2)  # tiny tensors: the call overhead is what is measured
    for m in compare(module, small).values():
        print(m)
    print(f"by reference, C++ loop: {module.by_reference_ns_per_call(small, small, 100000):.0f} ns/call")
    if args.skip_callgrind:
        return

    from opbench.callgrind.collect import callgrind_unavailable_reason

    reason = callgrind_unavailable_reason()
    if reason is not None:
        print(f"instruction counts skipped: {reason}")
        return
    stats_v0, stats_v1, delta = instruction_delta(module)
    pretty_print(module, stats_v0)
    pretty_print(module, stats_v1)
    torch.set_printoptions(linewidth=160)  # how much of each function name to show
    print(delta)


if __name__ == "__main__":
    main()
