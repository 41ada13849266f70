// opbench/opbench.h: umbrella header for the header-only C++ timing library.
//
// One header per concern, each usable alone:
//   clock.h      steady nanosecond clock, measured read cost and resolution
//   barrier.h    do_not_optimize / clobber_memory: keep timed work alive
//   loop.h       time_loop_ns(f, n): the timed loop itself
//   stats.h      quantiles, IQR, significant figures (as the Python layer)
//   autorange.h  block-size search, blocked / adaptive autorange
//   callgrind.h  callgrind region markers (no-ops without valgrind's headers)
//   scheduler.h  how long the process's threads waited for a CPU around a block
//   cpu_speed.h  how fast this core runs now, against a fixed piece of work
//
// examples/cpp_autorange.cpp is a complete benchmark program built on them.
// opbench/detail/ holds what opbench's generated C++ Timer code uses; it is
// not part of this library's interface.
#pragma once

#include "opbench/autorange.h"
#include "opbench/barrier.h"
#include "opbench/callgrind.h"
#include "opbench/clock.h"
#include "opbench/cpu_speed.h"
#include "opbench/loop.h"
#include "opbench/scheduler.h"
#include "opbench/stats.h"
