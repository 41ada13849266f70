// opbench/detail/fiber.h: a body's locals survive between resumes, run on the
// caller's thread, and are destroyed in order when the body returns.
#include "opbench/detail/fiber.h"

#include <string>
#include <thread>
#include <vector>

#include "check.h"

namespace {
thread_local int tls_marker = 0;
struct Tracker {
  std::vector<std::string>* log;
  ~Tracker() { log->push_back("destroyed"); }
};
}  // namespace

int main() {
  std::vector<std::string> log;
  bool stop = false;
  int seen_tls = -1;
  tls_marker = 7;
  opbench::Fiber fiber([&](opbench::Fiber& f) {
    Tracker tracker{&log};
    int counter = 0;  // lives on the fiber's stack across suspends
    seen_tls = tls_marker;
    while (!stop) {
      log.push_back("run " + std::to_string(++counter));
      f.suspend();
    }
  });
  CHECK(!fiber.started());
  CHECK(fiber.resume());
  CHECK(fiber.resume());
  CHECK(fiber.started() && !fiber.finished());
  stop = true;
  CHECK(!fiber.resume());  // body returned
  CHECK(fiber.finished());
  CHECK(!fiber.resume());  // resuming a finished fiber does nothing
  CHECK((log == std::vector<std::string>{"run 1", "run 2", "destroyed"}));
  CHECK(seen_tls == 7);  // same thread: thread-locals are the caller's

  // Deep recursion within the default 8 MiB stack works.
  std::function<int(int)> depth = [&](int n) {
    volatile char pad[256];
    pad[0] = 1;
    return n == 0 ? pad[0] : depth(n - 1) + pad[0];
  };
  int result = 0;
  opbench::Fiber deep([&](opbench::Fiber&) { result = depth(10000); });
  deep.resume();
  CHECK(result == 10001);
  CHECK_MAIN_END();
}
