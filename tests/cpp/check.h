// Minimal test harness for the header unit tests: CHECK records a failure
// with its location and keeps going; main returns the failure count.
#pragma once

#include <cmath>
#include <cstdio>

namespace check {
inline int failures = 0;
}

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++check::failures;                                                            \
    }                                                                               \
  } while (0)

#define CHECK_NEAR(a, b, tol) CHECK(std::fabs((a) - (b)) <= (tol))

#define CHECK_MAIN_END()                                       \
  std::printf("%s\n", check::failures == 0 ? "OK" : "FAILED"); \
  return check::failures == 0 ? 0 : 1
