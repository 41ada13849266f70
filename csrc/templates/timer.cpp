// The translation unit opbench compiles for a C++ Timer (opbench.engines.cpp.engine fills it in).
//
// Each `// opbench:slot NAME` line is replaced by the user's code for NAME (global_setup, setup,
// stmt) between `#line` directives, so compiler diagnostics quote the user's own line numbers;
// `torch_include` becomes the torch headers the code needs (engines/cpp/torch_headers.py), or
// nothing. Left as it is, the file is a timer of an empty statement and compiles alone
// (tests/test_cpp_engine.py). Names the user's code could collide with carry an `opbench_`
// prefix and a trailing underscore.
// opbench:slot torch_include
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "opbench/barrier.h"
#include "opbench/callgrind.h"
#include "opbench/clock.h"
#include "opbench/detail/fiber.h"
// opbench:slot global_setup
namespace {

struct OpbenchSession_ {
  opbench::Fiber fiber;
  std::int64_t n = 0;
  std::int64_t slice_ns = INT64_MAX;  // hand control back after this much loop time
  std::int64_t elapsed_ns = 0;
  bool partial = false;  // the fiber stopped mid-block (a slice ended)
  bool stop = false;
  bool collect = false;  // callgrind: count the measured loops (not the warm-up)
  std::string error;
  explicit OpbenchSession_(void (*body)(opbench::Fiber&, OpbenchSession_&))
      : fiber([this, body](opbench::Fiber& f) { body(f, *this); }) {}
};

// Runs per clock read inside a block, learnt across blocks: a stride takes
// about a millisecond, so a long block reads the clock once a millisecond
// (tens of ns per ms) and a block shorter than a stride reads it only at its
// ends, exactly as a plain loop would.
std::int64_t opbench_stride_ = 1;

std::int64_t opbench_next_stride_(std::int64_t stride, std::int64_t took_ns) noexcept {
  constexpr std::int64_t kTargetNs = 1000000;
  if (took_ns < kTargetNs / 16 && stride < (INT64_MAX >> 5)) return stride * 16;
  if (took_ns < kTargetNs / 2 && stride < (INT64_MAX >> 2)) return stride * 2;
  if (took_ns > 2 * kTargetNs && stride > 1) return stride / 2;
  return stride;
}

// Runs setup once, then one block per resume until told to stop. Returning
// destroys setup's locals in order, as leaving a normal scope would. A block
// suspends every `slice_ns` of loop time (so Ctrl-C reaches Python within
// milliseconds) and sums its loop time over the slices: the pauses are not
// part of the figure.
void opbench_body_(opbench::Fiber& opbench_fiber_, OpbenchSession_& opbench_session_) {
  try {
    // opbench:slot setup
    // The statement sits in setup's own scope, as in torch's template, so
    // setup's locals stay plain locals (registers) rather than captures.
    for (;;) {
      std::int64_t opbench_left_ = opbench_session_.n;
      // Under callgrind, collection covers exactly the loop below, in one pass
      // (no clock reads), so counts are n times the statement plus a few
      // instructions of loop entry/exit.
      const bool opbench_collect_ = opbench_session_.collect;
      std::int64_t opbench_stride_now_ = opbench_collect_ ? INT64_MAX : opbench_stride_;
      std::int64_t opbench_elapsed_ = 0;
      std::int64_t opbench_start_ = opbench::now_ns();
      std::int64_t opbench_mark_ = opbench_start_;
      if (opbench_collect_) opbench::callgrind::toggle_collect();
      for (;;) {
        const std::int64_t opbench_k_ =
            opbench_left_ < opbench_stride_now_ ? opbench_left_ : opbench_stride_now_;
        for (std::int64_t opbench_i_ = 0; opbench_i_ < opbench_k_; ++opbench_i_) {
          // opbench:slot stmt
          opbench::clobber_memory();
        }
        opbench_left_ -= opbench_k_;
        if (opbench_left_ == 0) break;
        const std::int64_t opbench_now_ = opbench::now_ns();
        opbench_stride_now_ = opbench_next_stride_(opbench_stride_now_, opbench_now_ - opbench_mark_);
        opbench_mark_ = opbench_now_;
        if (opbench_now_ - opbench_start_ >= opbench_session_.slice_ns) {
          opbench_elapsed_ += opbench_now_ - opbench_start_;
          opbench_session_.elapsed_ns = opbench_elapsed_;
          opbench_session_.partial = true;
          opbench_fiber_.suspend();
          if (opbench_session_.stop) return;
          opbench_start_ = opbench_mark_ = opbench::now_ns();
        }
      }
      if (opbench_collect_) opbench::callgrind::toggle_collect();
      opbench_elapsed_ += opbench::now_ns() - opbench_start_;
      if (!opbench_collect_) opbench_stride_ = opbench_stride_now_;
      opbench_session_.elapsed_ns = opbench_elapsed_;
      opbench_session_.partial = false;
      opbench_fiber_.suspend();
      if (opbench_session_.stop) break;
    }
  } catch (const std::exception& e) {
    opbench_session_.error = e.what();
    if (opbench_session_.error.empty()) opbench_session_.error = "std::exception";
  } catch (...) {
    opbench_session_.error = "unknown C++ exception";
  }
}

}  // namespace

#define OPBENCH_EXPORT_ extern "C" __attribute__((visibility("default")))

OPBENCH_EXPORT_ void* opbench_open() noexcept {
  try {
    return new OpbenchSession_(&opbench_body_);
  } catch (...) {
    return nullptr;
  }
}

// n >= 0 starts a block of n runs (the first call runs setup first); n < 0
// continues the block a previous call left unfinished. Returns 0: the block
// is done and elapsed_ns holds its loop time; 2: slice_ns of loop time have
// passed and the block is unfinished; 1: stmt or setup threw, or the call was
// out of turn (see opbench_error; the session is finished).
OPBENCH_EXPORT_ int opbench_step(void* session, std::int64_t n, std::int64_t slice_ns,
                                 std::int64_t* elapsed_ns) noexcept {
  auto* s = static_cast<OpbenchSession_*>(session);
  if (s->fiber.finished()) {
    if (s->error.empty()) s->error = "session already closed";
    return 1;
  }
  if ((n < 0) != s->partial) {
    s->error = n < 0 ? "no block to continue" : "a block is still unfinished";
    return 1;
  }
  if (n >= 0) s->n = n;
  s->slice_ns = slice_ns > 0 ? slice_ns : INT64_MAX;
  s->fiber.resume();
  if (s->error.empty() && s->fiber.finished()) s->error = "setup or stmt returned from the timing loop";
  if (!s->error.empty()) return 1;
  *elapsed_ns = s->elapsed_ns;
  return s->partial ? 2 : 0;
}

// A whole block of n runs in one call (collect_callgrind's child).
OPBENCH_EXPORT_ int opbench_run(void* session, std::int64_t n, std::int64_t* elapsed_ns) noexcept {
  return opbench_step(session, n, INT64_MAX, elapsed_ns);
}

OPBENCH_EXPORT_ const char* opbench_error(void* session) noexcept {
  return static_cast<OpbenchSession_*>(session)->error.c_str();
}

// Unwinds setup's frame (its destructors run) and frees the session.
OPBENCH_EXPORT_ void opbench_close(void* session) noexcept {
  auto* s = static_cast<OpbenchSession_*>(session);
  s->stop = true;
  if (s->fiber.started() && !s->fiber.finished()) s->fiber.resume();
  delete s;
}

// Whether collect_callgrind can use this library: false when valgrind's
// headers were missing at compile time (the toggles are then no-ops).
OPBENCH_EXPORT_ int opbench_callgrind_available() noexcept { return opbench::callgrind::available() ? 1 : 0; }

// From the next block on, bracket each measured loop with callgrind
// collection toggles (collect_callgrind's child turns this on after warm-up).
OPBENCH_EXPORT_ void opbench_set_collect(void* session, int on) noexcept {
  static_cast<OpbenchSession_*>(session)->collect = on != 0;
}

// The same loop with nothing in it: the reference for the elision check.
OPBENCH_EXPORT_ std::int64_t opbench_empty_loop_ns(std::int64_t n) noexcept {
  const std::int64_t start = opbench::now_ns();
  for (std::int64_t i = 0; i < n; ++i) opbench::clobber_memory();
  return opbench::now_ns() - start;
}
