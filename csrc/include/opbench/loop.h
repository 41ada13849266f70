// opbench/loop.h: run a callable n times between two clock reads.
//
// This is the whole measurement: everything else (block-size search,
// statistics) only decides n and interprets the result. The loop body is the
// callable and a compiler barrier, nothing else, so the per-iteration overhead
// is a compare, an increment and whatever the call costs.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "opbench/barrier.h"
#include "opbench/clock.h"

namespace opbench {

/// Calls `f()` `n` times (n >= 0) and returns the elapsed nanoseconds.
/// A non-void result goes through the barrier behind do_not_optimize, so it
/// cannot be discarded and the call cannot be removed as dead code. A result
/// returned by reference is observed where it lives, never copied (a const
/// one too, without do_not_optimize's deprecation warning for const values).
template <class F>
inline std::int64_t time_loop_ns(F&& f, std::int64_t n) {
  const std::int64_t start = now_ns();
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      f();
      clobber_memory();
    } else {
      auto&& result = f();
      detail::observe(result);
    }
  }
  return now_ns() - start;
}

}  // namespace opbench
