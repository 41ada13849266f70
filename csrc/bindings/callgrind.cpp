// Bindings for opbench/callgrind.h, as the submodule opbench._C.callgrind, and
// the native parts of the callgrind worker (opbench/callgrind/_serve.py): a C++
// Timer's loops run on a thread of their own, and the allocators are put in the
// same state before every measured loop, so counts do not depend on what the
// process ran before.
#include <Python.h>
#include <pybind11/stl.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/mman.h>

#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bindings/registry.h"
#include "opbench/callgrind.h"

namespace py = pybind11;
namespace cg = opbench::callgrind;

namespace {

// The C ABI of a compiled C++ Timer library (see opbench/engines/cpp.py).
using OpenFn = void* (*)();
using RunFn = int (*)(void*, std::int64_t, std::int64_t*);
using SetCollectFn = void (*)(void*, int);
using ErrorFn = const char* (*)(void*);
using CloseFn = void (*)(void*);

struct Library {
  OpenFn open;
  RunFn run;
  SetCollectFn set_collect;
  ErrorFn error;
  CloseFn close;
};

template <typename Fn>
Fn entry_point(std::uintptr_t address, const char* name) {
  if (address == 0) throw py::value_error(std::string("null address for ") + name);
  return reinterpret_cast<Fn>(address);
}

// Blocks the calling thread until the process ends.
[[noreturn]] void park_forever() {
  static std::mutex mutex;
  static std::condition_variable never;
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) never.wait(lock);
}

// Setup, `warmup` + `number` uncounted runs, then `repeats` counted loops of
// `number` runs, each followed by a dump labelled `reason`; then instrumentation
// off. Returns "" or the error.
std::string measure(const Library& lib, std::int64_t warmup, std::int64_t number, std::int64_t repeats,
                    const std::string& reason) {
  void* session = lib.open();
  if (session == nullptr) return "could not allocate the C++ timer's session";
  std::string error;
  std::int64_t elapsed = 0;
  // Setup and the warm-up runs, then one whole loop uncounted: the first counted
  // loop then starts from the heap every later one starts from (what a loop
  // leaves), not from what setup left.
  if (lib.run(session, warmup, &elapsed) != 0 || lib.run(session, number, &elapsed) != 0) {
    error = lib.error(session);
  } else {
    lib.set_collect(session, 1);
    for (std::int64_t r = 0; r < repeats; ++r) {
      if (lib.run(session, number, &elapsed) != 0) {
        error = lib.error(session);
        // The statement threw inside the counted loop, so the loop's closing
        // toggle never ran: collection is still on. Switch it off and drop
        // the partial counts, so they reach no later dump.
        cg::toggle_collect();
        cg::zero_stats();
        break;
      }
      cg::dump_stats(reason.c_str());
    }
  }
  cg::stop_instrumentation();
  lib.close(session);
  if (error.empty()) return error;
  return "C++ statement threw: " + error;
}

// glibc consolidates the small fragments that posix_memalign (torch's CPU
// allocator) leaves in its fastbins when the heap's top runs out: with the
// default 128 KiB of padding, every few hundred runs of a small torch op,
// ~100k instructions at once, in some loops and not others. Growing the heap
// 16 MiB at a time keeps that out of loops of up to ~100k such runs.
// (glibc only: elsewhere, as for trim_heap, nothing to do.)
void pad_heap_top() {
#if defined(__GLIBC__)
  mallopt(M_TOP_PAD, 16 << 20);
#endif
}

void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// Runs measure() on a new thread, which then parks until the process exits.
//
// Why a thread of its own: glibc's malloc keeps one arena per thread, and
// torch's CPU allocator (posix_memalign, which bypasses the per-thread cache)
// carves every tensor from the arena's free chunks, so counts depend on what
// the arena held before: in the main thread's arena, on everything the
// interpreter allocated and freed before the statement ran (which follows the
// hash seed). A new thread gets a new arena holding nothing but what setup and
// the statement put there, so repeated collections, in one process or many,
// see the same heap. The thread never exits because glibc gives an exited
// thread's arena (with its history) to the next new thread, should this be
// called twice in one process.
std::string measure_on_new_thread(const Library& lib, std::int64_t warmup, std::int64_t number,
                                  std::int64_t repeats, const std::string& reason) {
  pad_heap_top();
  // Instrumented from before the thread starts: callgrind then sees every call on
  // it, the fiber's entry into the statement's function included, and charges
  // the loop to that function (started later, it would charge the loop to
  // whatever function was running here when it started: callgrind does not see
  // a switch of stacks as a call). So setup and the warm-up run instrumented.
  cg::start_instrumentation();
  std::promise<std::string> result;
  std::future<std::string> done = result.get_future();
  std::thread([&lib, &result, warmup, number, repeats, reason] {
    result.set_value(measure(lib, warmup, number, repeats, reason));
    park_forever();
  }).detach();
  py::gil_scoped_release release;
  return done.get();
}

// pymalloc (CPython 3.10+, 64-bit) tells its own blocks from others by looking up
// the block's 1 MiB "ideal arena" slot in a radix tree; an arena that does not
// start on a slot boundary straddles two slots, and a free of a block in the
// arena's lower slot takes one comparison, in its upper slot three (measured:
// 3.6 instructions more per free on average, 1.1% of a loop of int additions).
// Where mmap puts an arena follows everything the process allocated before:
// its environment's size, its working directory, the tests before. Arenas made
// here start on a boundary of their own size, so every free in them takes the
// same path in every process. Arenas made before are left as they are (freed by
// the allocator that made them); the primer below keeps measured loops off them.
struct AlignedArenas {
  PyObjectArenaAllocator previous{};
  std::unordered_set<void*> ours;
  std::size_t made = 0;  // arenas handed out so far
  bool installed = false;
};

AlignedArenas& aligned_arenas() {
  static auto* a = new AlignedArenas();  // never destroyed: arenas outlive teardown
  return *a;
}

void* alloc_aligned_arena(void*, std::size_t size) {
  std::size_t align = 1;
  while (align < size) align <<= 1;
  const std::size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + align - 1) & ~(static_cast<std::uintptr_t>(align) - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + span - (aligned + size);
  if (tail != 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  auto& a = aligned_arenas();
  a.ours.insert(reinterpret_cast<void*>(aligned));
  ++a.made;
  return reinterpret_cast<void*>(aligned);
}

void free_arena(void*, void* ptr, std::size_t size) {
  auto& a = aligned_arenas();
  if (a.ours.erase(ptr) != 0) {
    munmap(ptr, size);
  } else {
    a.previous.free(a.previous.ctx, ptr, size);
  }
}

void align_arenas() {
  auto& a = aligned_arenas();
  if (a.installed) return;
  a.installed = true;
  PyObject_GetArenaAllocator(&a.previous);
  PyObjectArenaAllocator mine{nullptr, &alloc_aligned_arena, &free_arena};
  PyObject_SetArenaAllocator(&mine);
}

// CPython's small-object allocator (pymalloc) serves each size class from the
// first pool of a list; a pool that fills is unlinked, one that empties is
// handed back to its arena. A statement that allocates and frees one object per
// run costs the fast path every run, or a pool transition every run, depending
// only on how full that pool happened to be when the loop began: a few
// instructions per object, which differ between a fresh process and one that
// ran other code first. Priming puts, at the head of every size class's list, a
// pool that is about half full of blocks kept alive for the loop: it neither
// fills nor empties, so every run takes the fast path whatever ran before.
class SmallObjectPrimer {
 public:
  // The lists' storage is allocated once, here: growing it between loops would
  // put malloc's own allocations among the statement's.
  SmallObjectPrimer() {
    std::size_t total = 0;
    for (std::size_t size = kStep; size <= kLargest; size += kStep) total += blocks_per(size);
    blocks_.reserve(blocks_per(kStep));
    kept_.reserve(total);
    filler_.reserve(std::size_t{1} << 16);
  }

  void prime() {
    release();
    // The primed pools come from an arena made now (aligned, see AlignedArenas):
    // every free pool of the arenas made before is taken first, by largest-class
    // blocks kept alive with the primed ones.
    align_arenas();
    auto& arenas = aligned_arenas();
    for (const std::size_t made = arenas.made; arenas.made == made;) {
      void* p = PyObject_Malloc(kLargest);
      if (p == nullptr) throw std::bad_alloc();
      filler_.push_back(p);
    }
    for (std::size_t size = kStep; size <= kLargest; size += kStep) {
      blocks_.clear();
      for (std::size_t i = 0; i < blocks_per(size); ++i) {
        void* p = PyObject_Malloc(size);
        if (p == nullptr) throw std::bad_alloc();
        blocks_.push_back(p);
      }
      // Free every other block, oldest first: each full pool becomes partly
      // free and moves to the head of its list, the last one staying there.
      for (std::size_t i = 0; i < blocks_.size(); ++i) {
        if (i % 2 == 1) {
          PyObject_Free(blocks_[i]);
        } else {
          kept_.push_back(blocks_[i]);
        }
      }
    }
  }

  void release() {
    for (void* p : kept_) PyObject_Free(p);
    kept_.clear();
    for (void* p : filler_) PyObject_Free(p);
    filler_.clear();
  }

 private:
  // Three pools' worth per class (16 KiB pools from CPython 3.10, 4 KiB
  // before), so that at least one whole pool is ours; 8-byte steps cover
  // builds with 8- and with 16-byte size classes.
  static constexpr std::size_t kPool = 16 * 1024;
  static constexpr std::size_t kStep = 8;
  static constexpr std::size_t kLargest = 512;  // larger requests go to malloc
  static constexpr std::size_t blocks_per(std::size_t size) { return 3 * kPool / size; }

  std::vector<void*> blocks_;
  std::vector<void*> kept_;
  std::vector<void*> filler_;
};

SmallObjectPrimer& primer() {
  static auto* p = new SmallObjectPrimer();  // never destroyed: no teardown order issues
  return *p;
}

}  // namespace

OPBENCH_BINDINGS(callgrind) {
  auto c = m.def_submodule("callgrind", "Callgrind client requests (no-ops outside valgrind).");
  c.def("available", &cg::available,
        "True when the extension was built with valgrind's headers (client requests work).");
  c.def("running_on_valgrind", &cg::running_on_valgrind, "True when this process runs under valgrind.");
  c.def("start_instrumentation", &cg::start_instrumentation,
        "CALLGRIND_START_INSTRUMENTATION: instrument code from here on.");
  c.def("stop_instrumentation", &cg::stop_instrumentation,
        "CALLGRIND_STOP_INSTRUMENTATION: stop instrumenting (run at uninstrumented speed).");
  c.def("toggle_collect", &cg::toggle_collect, "CALLGRIND_TOGGLE_COLLECT: flip event collection.");
  c.def("zero_stats", &cg::zero_stats, "CALLGRIND_ZERO_STATS: zero the counters.");
  c.def(
      "dump_stats",
      [](const py::object& reason) {
        if (reason.is_none()) {
          cg::dump_stats();
        } else {
          cg::dump_stats(reason.cast<std::string>().c_str());
        }
      },
      py::arg("reason") = py::none(),
      "CALLGRIND_DUMP_STATS(_AT): write the counters to the next output file and zero them.");
  c.def("trim_heap", &trim_heap,
        "malloc_trim(0): consolidates glibc's free lists (and returns free memory to the "
        "system) now, rather than at a moment that depends on the heap's history.");
  c.def("pad_heap_top", &pad_heap_top,
        "Makes glibc's malloc grow its heaps 16 MiB at a time, so that consolidating "
        "its free lists (when a heap's top runs out) stays out of measured loops.");
  c.def(
      "prime_small_objects", [] { primer().prime(); },
      "Makes CPython's small-object allocator take its fast path for every allocation and "
      "free of a measured loop, whatever ran before (until release_small_objects()).");
  c.def("release_small_objects", [] { primer().release(); }, "Frees the blocks prime_small_objects() kept.");
  c.def(
      "measure_cpp_timer",
      [](std::uintptr_t open, std::uintptr_t run, std::uintptr_t set_collect, std::uintptr_t error,
         std::uintptr_t close, std::int64_t warmup, std::int64_t number, std::int64_t repeats,
         const std::string& reason) {
        if (warmup < 0 || number < 0 || repeats < 0) {
          throw py::value_error("warmup, number and repeats must be >= 0");
        }
        const Library lib{entry_point<OpenFn>(open, "opbench_open"), entry_point<RunFn>(run, "opbench_run"),
                          entry_point<SetCollectFn>(set_collect, "opbench_set_collect"),
                          entry_point<ErrorFn>(error, "opbench_error"),
                          entry_point<CloseFn>(close, "opbench_close")};
        return measure_on_new_thread(lib, warmup, number, repeats, reason);
      },
      py::arg("open"), py::arg("run"), py::arg("set_collect"), py::arg("error"), py::arg("close"),
      py::arg("warmup"), py::arg("number"), py::arg("repeats"), py::arg("reason"),
      "Collects a compiled C++ Timer library (entry points by address) on a new thread: "
      "setup and `warmup` + `number` uncounted runs, then `repeats` counted loops of "
      "`number` runs, each dumped as `reason`; instrumentation on from before the thread "
      "starts until after the last loop. The thread then parks until the process exits (a "
      "fresh malloc arena per call). Returns '' or the C++ error.");
}
