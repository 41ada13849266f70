// Run under callgrind by tests/test_cpp_barrier.py, built with -DOPBENCH_BYTES=N.
//
// Times loops over lambdas returning an N-byte object by reference (mutable,
// then const) and dumps one callgrind profile per loop, named "<kind> <runs>".
// If the barrier copied the result, the instructions per run would grow with N.
#include <cstdint>
#include <cstdio>

#include "opbench/callgrind.h"
#include "opbench/loop.h"

namespace {

struct Payload {
  unsigned char bytes[OPBENCH_BYTES];
};
Payload payload{};

template <class F>
void profile(F& f, const char* kind) {
  opbench::time_loop_ns(f, 1);  // resolves the clock's PLT entry outside the counts
  for (const std::int64_t runs : {1000, 3000}) {
    opbench::callgrind::toggle_collect();
    opbench::time_loop_ns(f, runs);
    opbench::callgrind::toggle_collect();
    char name[64];
    std::snprintf(name, sizeof name, "%s %lld", kind, static_cast<long long>(runs));
    opbench::callgrind::dump_stats(name);
  }
}

}  // namespace

int main() {
  auto mutable_ref = []() -> Payload& { return payload; };
  auto const_ref = []() -> const Payload& { return payload; };
  profile(mutable_ref, "ref");
  profile(const_ref, "const_ref");
  return 0;
}
