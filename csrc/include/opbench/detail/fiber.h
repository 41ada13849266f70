// opbench/detail/fiber.h: run a function on its own stack, on the caller's thread.
//
// Not part of the public library (opbench.h does not include it): it serves the
// code opbench generates for C++ Timers, and may change with it.
//
// Why: a C++ Timer's `setup` declares locals that `stmt` uses, and opbench
// runs setup once per measurement while the measurement asks for many timed
// blocks. The setup frame must therefore outlive one call. Copying its locals
// into a closure would break move-only types and RAII guards
// (`torch::NoGradGuard g;` would end with the closure's factory); a worker
// thread would lose the caller's thread-local state (grad mode, allocator
// caches). A fiber keeps setup's frame alive on a separate stack and runs it
// on the calling thread: the body suspends between blocks and is resumed for
// the next one. Switching costs about a microsecond and happens only outside
// the timed region.
//
// POSIX only (ucontext). Exceptions must not leave the body: catch them inside
// and report through your own state (they cannot unwind across stacks).
#pragma once

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <utility>

namespace opbench {

class Fiber {
 public:
  /// `body(fiber)` runs on a fresh stack at the first resume(); it may call
  /// fiber.suspend() any number of times. 8 MiB matches the usual main-thread
  /// stack, so setup code that works in a plain function works here too.
  explicit Fiber(std::function<void(Fiber&)> body, std::size_t stack_bytes = std::size_t{8} << 20)
      : body_(std::move(body)) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    size_ = (stack_bytes + page_ - 1) / page_ * page_ + page_;
    // MAP_NORESERVE: pages are committed only when touched. The lowest page is
    // a guard, so a stack overflow faults instead of corrupting the heap.
    void* mem =
        mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    mprotect(mem, page_, PROT_NONE);
    stack_ = static_cast<char*>(mem);
  }

  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// A suspended body's frame is abandoned, not unwound: finish it first
  /// (make the body return) if its locals own resources.
  ~Fiber() { munmap(stack_, size_); }

  /// Runs the body until it suspends or returns. Returns false once the body
  /// has returned (then resume() does nothing).
  bool resume() {
    if (finished_) return false;
    if (!started_) {
      started_ = true;
      getcontext(&self_);
      self_.uc_stack.ss_sp = stack_ + page_;
      self_.uc_stack.ss_size = size_ - page_;
      self_.uc_link = &caller_;  // where the body's return lands
      // makecontext passes int arguments only: the pointer travels in two halves.
      const auto bits = reinterpret_cast<std::uintptr_t>(this);
      makecontext(&self_, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
                  static_cast<unsigned>(bits & 0xffffffffu),
                  static_cast<unsigned>(static_cast<std::uint64_t>(bits) >> 32));
    }
    swapcontext(&caller_, &self_);
    return !finished_;
  }

  /// Called from inside the body: returns control to resume()'s caller.
  void suspend() { swapcontext(&self_, &caller_); }

  bool started() const noexcept { return started_; }
  bool finished() const noexcept { return finished_; }

 private:
  static void entry(unsigned lo, unsigned hi) {
    auto* self = reinterpret_cast<Fiber*>(
        static_cast<std::uintptr_t>((static_cast<std::uint64_t>(hi) << 32) | static_cast<std::uint64_t>(lo)));
    self->body_(*self);
    self->finished_ = true;
  }

  std::function<void(Fiber&)> body_;
  ucontext_t caller_{};
  ucontext_t self_{};
  char* stack_ = nullptr;
  std::size_t size_ = 0;
  std::size_t page_ = 0;
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace opbench
