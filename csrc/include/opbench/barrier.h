// opbench/barrier.h: keep the optimiser from deleting or hoisting timed work.
//
// A timed statement whose result is unused is dead code to the compiler; at -O2
// `auto y = x + 1;` compiles to nothing and the benchmark reports the loop
// alone. These barriers tell the compiler a value is observed (do_not_optimize)
// or that memory may have changed (clobber_memory), at zero run-time cost: they
// emit no instructions, only constrain the optimiser.
#pragma once

namespace opbench {

/// Marks `value` as read by unknown code, so computing it cannot be elided.
/// Taking it by reference also forces it to live in memory or a register at
/// this point, so the computation cannot be sunk past the timed region.
template <class T>
inline __attribute__((always_inline)) void do_not_optimize(T const& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

template <class T>
inline __attribute__((always_inline)) void do_not_optimize(T& value) {
#if defined(__clang__)
  asm volatile("" : "+r,m"(value) : : "memory");
#else
  asm volatile("" : "+m,r"(value) : : "memory");
#endif
}

/// Forces all pending writes to memory to be considered observed, so stores
/// into buffers the statement fills are not removed.
inline __attribute__((always_inline)) void clobber_memory() { asm volatile("" : : : "memory"); }

}  // namespace opbench
