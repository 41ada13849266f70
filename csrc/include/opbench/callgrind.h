// opbench/callgrind.h: callgrind client requests as plain C++ functions.
//
// Instruction counts are only useful for the code under study, so a program
// run under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`
// switches instrumentation and collection on around the region it measures:
//
//   opbench::callgrind::start_instrumentation();  // JIT-instrument from here on
//   {
//     opbench::callgrind::ScopedCollect region;   // count only inside this scope
//     work();
//   }
//   opbench::callgrind::dump_stats("work");        // one callgrind.out.N per region
//
// The requests are valgrind's own header-only macros (a few no-op instructions
// natively), so this header needs no library. Where <valgrind/callgrind.h> is
// absent every function is a no-op and available() is false, so the same code
// compiles everywhere; define OPBENCH_NO_VALGRIND to force that.
#pragma once

// __has_include is standard C++17, which this library requires.
#if !defined(OPBENCH_NO_VALGRIND)
#if defined(OPBENCH_HAVE_VALGRIND) || __has_include(<valgrind/callgrind.h>)
#define OPBENCH_CALLGRIND_REQUESTS 1
#endif
#endif

#if defined(OPBENCH_CALLGRIND_REQUESTS)
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
#endif

namespace opbench::callgrind {

/// True when this build carries the client requests (valgrind headers were found).
constexpr bool available() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  return true;
#else
  return false;
#endif
}

/// True when the process runs under valgrind (any tool). False natively or without headers.
inline bool running_on_valgrind() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

/// Starts instrumentation (flushes valgrind's translation cache; costly, call once).
inline void start_instrumentation() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  CALLGRIND_START_INSTRUMENTATION;
#endif
}

/// Stops instrumentation: the rest of the program runs at valgrind's uninstrumented speed.
inline void stop_instrumentation() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  CALLGRIND_STOP_INSTRUMENTATION;
#endif
}

/// Flips event collection on/off (instrumentation must be on for events to be seen).
inline void toggle_collect() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

/// Zeroes the counters collected so far.
inline void zero_stats() noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  CALLGRIND_ZERO_STATS;
#endif
}

/// Writes the counters to the next callgrind.out file, labelled `reason`, and zeroes them.
inline void dump_stats(const char* reason = nullptr) noexcept {
#if defined(OPBENCH_CALLGRIND_REQUESTS)
  if (reason != nullptr) {
    CALLGRIND_DUMP_STATS_AT(reason);
  } else {
    CALLGRIND_DUMP_STATS;
  }
#else
  (void)reason;
#endif
}

/// Collects events for the lifetime of the object (a toggle pair, so scopes must not interleave).
class ScopedCollect {
 public:
  ScopedCollect() noexcept { toggle_collect(); }
  ~ScopedCollect() { toggle_collect(); }
  ScopedCollect(const ScopedCollect&) = delete;
  ScopedCollect& operator=(const ScopedCollect&) = delete;
};

}  // namespace opbench::callgrind
