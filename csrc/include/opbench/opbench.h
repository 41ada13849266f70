// opbench/opbench.h: umbrella header for the header-only C++ timing library.
//
// One header per concern, each usable alone:
//   clock.h      steady nanosecond clock, measured read cost and resolution
//   barrier.h    do_not_optimize / clobber_memory: keep timed work alive
//   loop.h       time_loop_ns(f, n): the timed loop itself
//   stats.h      quantiles, IQR, significant figures (as the Python layer)
//   autorange.h  block-size search, blocked / adaptive autorange
//   fiber.h      keep a setup frame alive between timed blocks (POSIX)
//   callgrind.h  callgrind region markers, when valgrind's headers exist
#pragma once

#include "opbench/autorange.h"
#include "opbench/barrier.h"
#include "opbench/clock.h"
#include "opbench/loop.h"
#include "opbench/stats.h"

#if __has_include(<ucontext.h>)
#include "opbench/fiber.h"
#endif

#if __has_include("opbench/callgrind.h")
#include "opbench/callgrind.h"
#endif
