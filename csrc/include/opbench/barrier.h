// opbench/barrier.h: keep the optimiser from deleting or hoisting timed work.
//
// A timed statement whose result is unused is dead code to the compiler; at -O2
// `auto y = x + 1;` compiles to nothing and the benchmark reports the loop
// alone. These barriers tell the compiler a value is observed (do_not_optimize)
// or that memory may have changed (clobber_memory). With GNU inline asm (GCC,
// clang, icx) they emit no instructions, only constrain the optimiser; other
// compilers get a portable fallback (see below).
//
//   auto y = x * 3 + 1;
//   opbench::do_not_optimize(y);   // y is computed, and x * 3 + 1 is not reused
//
// The constraints follow google/benchmark's current DoNotOptimize: a value
// wider than a register is an in-out memory operand ("+m") and nothing else.
// The older "+m,r" lets GCC pick the register alternative for any type and
// copy the whole object into a temporary first (GCC bug 105519): a 512-byte
// result then costs a `rep movsq` on every run of the timed loop.
#pragma once

#include <atomic>
#include <memory>
#include <type_traits>

#if defined(__GNUC__) && !defined(OPBENCH_NO_INLINE_ASM)
#define OPBENCH_GNU_ASM 1
#endif

#if defined(__GNUC__)
#define OPBENCH_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define OPBENCH_ALWAYS_INLINE __forceinline
#else
#define OPBENCH_ALWAYS_INLINE inline
#endif

namespace opbench {
namespace detail {

#if !defined(OPBENCH_GNU_ASM)
// Without GNU asm: the value's address escapes into a volatile global, and a
// signal fence (a compiler-only barrier) makes every write before it visible to
// code that could read through that address, so the value must be in memory.
inline const volatile void* volatile escaped = nullptr;
#endif

// Trivially copyable and no wider than a pointer: the barrier may keep it in
// a register, which is the value itself, not a copy of it.
template <class T>
inline constexpr bool kRegisterSized = std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(void*);

/// The one barrier behind every overload. A writable value is an in-out
/// operand: the compiler must assume the asm read it and changed it, so the
/// computation cannot be dropped and the value cannot be reused after it. A
/// const value can only be an input.
template <class T>
OPBENCH_ALWAYS_INLINE void observe(T& value) {
#if defined(OPBENCH_GNU_ASM)
  if constexpr (std::is_const_v<T>) {
    if constexpr (kRegisterSized<T>) {
      asm volatile("" : : "r,m"(value) : "memory");
    } else {
      asm volatile("" : : "m"(value) : "memory");
    }
  } else if constexpr (kRegisterSized<T>) {
#if defined(__clang__)
    asm volatile("" : "+r,m"(value) : : "memory");  // clang takes the first alternative
#else
    asm volatile("" : "+m,r"(value) : : "memory");
#endif
  } else {
    asm volatile("" : "+m"(value) : : "memory");
  }
#else
  escaped = static_cast<const volatile void*>(std::addressof(value));
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace detail

/// Marks `value` as read and possibly modified by unknown code, so computing
/// it cannot be elided and it cannot be treated as unchanged afterwards (pass
/// a loop's inputs too, so their use is not hoisted out of the loop).
template <class T>
OPBENCH_ALWAYS_INLINE void do_not_optimize(T& value) {
  detail::observe(value);
}

/// The same for a temporary (`do_not_optimize(f())`).
template <class T>
OPBENCH_ALWAYS_INLINE void do_not_optimize(T&& value) {
  detail::observe(value);
}

/// Kept for code written against the old interface. A const value is only
/// read, so the compiler may still compute it once and reuse it across
/// iterations: make the variable non-const.
template <class T>
[[deprecated(
    "do_not_optimize of a const value lets the compiler reuse it across iterations; "
    "pass a non-const lvalue")]]
OPBENCH_ALWAYS_INLINE void do_not_optimize(T const& value) {
  detail::observe(value);
}

/// Forces all pending writes to memory to be considered observed, so stores
/// into buffers the statement fills are not removed.
OPBENCH_ALWAYS_INLINE void clobber_memory() {
#if defined(OPBENCH_GNU_ASM)
  asm volatile("" : : : "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace opbench
