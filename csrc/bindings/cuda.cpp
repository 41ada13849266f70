// Bindings for CUDA device timing: events, timing loops bracketed by events,
// the cold-L2 flush buffer, clock and throttle readings.
//
// The driver is reached through detail/cuda_driver.h's tables, loaded on first
// use, so this file compiles without CUDA and `import opbench` works on any
// machine; only constructing a CudaContext needs a GPU. Tests point the loader
// at a fake driver library of their own (tests/fake_cuda/); nothing of it is here.
//
// Launch hold: a statement whose host-side launch takes longer than its kernel
// leaves the GPU idle between launches, and events around a block of calls
// would then time the host. Like nvbench's blocking kernel, each block is
// queued behind a cuStreamWaitValue32 on a host-mapped flag that the loop
// writes only once the whole block is queued, so the GPU runs it back to back.
// What the hardware does to that scheme, and what this file does about it:
//   * A launch queue holds on the order of a thousand commands; a host that
//     queues more behind the hold blocks in the launch. Held blocks are kept to
//     a few dozen commands (kHeldCommands), counted in launches: a statement's
//     launches per call are counted once, warm, by capturing one call
//     (count_launches), so a call of 64 kernels is 64 commands, not one. A
//     stall still teaches a smaller block for the device, for every later
//     Context of this process.
//   * A statement whose launches cannot be counted (the legacy stream, a
//     statement that cannot be captured) is sized by its host time instead: a
//     launch costs the host at least kMinLaunchNs, so a call's host time bounds
//     its launches. And whatever a block holds, it is queued within about
//     kHeldHostNs of host time: a held wait stalls the hardware connection the
//     stream shares with other streams of the process (CUDA_DEVICE_MAX_CONNECTIONS),
//     so their work waits no longer than that.
//   * Anything that waits for the GPU inside a call (a synchronize, .item(), a
//     synchronising free, and since CUDA 12.2 the lazy loading of a kernel on its
//     first launch) cannot finish behind the hold. Callers run a statement's first
//     call unheld (run(..., hold=false)); a watchdog thread releases the flag when
//     the loop makes no progress for a few hundred calls' worth of host time (at
//     least 0.1 s, at most watchdog_s), the block is retried once held, and only
//     then is the hold switched off (no call returned) or the block made smaller
//     (the same block stalled twice: the queue is full), with a warning saying why.
//     opbench's own frees never run inside a held block: a Context destroyed while
//     any block is held (by a statement dropping a timer) frees once none is, and
//     Python's cyclic garbage collector is paused while a block is queued.
// Every call into the driver runs with this device's primary context pushed and
// popped around it (Current), so the caller's current context (torch's current
// device) is left as it was.
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "detail/cuda_driver.h"
#include "detail/interrupt.h"
#include "detail/pycall.h"
#include "opbench/clock.h"

namespace py = pybind11;
using namespace opbench::cuda;

namespace {

// --- which driver -----------------------------------------------------------

struct DriverSource {
  std::string libcuda = "libcuda.so.1";
  std::string libnvml = "libnvidia-ml.so.1";
  std::shared_ptr<Driver> current;  // null until first use (or after a switch)
};

DriverSource& source() {
  static DriverSource s;
  return s;
}

// Loading failures are not cached: a later call retries (cheap), and the
// error is raised at each use, never at import.
std::shared_ptr<Driver> current_driver() {
  DriverSource& s = source();
  if (!s.current) s.current = load_driver(s.libcuda, s.libnvml);
  return s.current;
}

void warn_hold_lost(const std::string& why) {
  // Through opbench.errors.warn, so the warning is also kept on the Measurement.
  py::module_ errors = py::module_::import("opbench.errors");
  errors.attr("warn")(
      errors.attr("LaunchHoldWarning"),
      "opbench.cuda: launch hold switched off: " + why +
          ". Timing continues without the hold, so launch gaps between calls count as device time");
}

// --- frees, never inside a held block -----------------------------------------

// Blocks held right now, in every Context of the process.
std::atomic<int> holds_active{0};

// What a Context owns on the device. Freeing synchronises with the device: inside
// a held block it would wait for work only the block's own loop releases (until
// the watchdog fired). A Context destroyed while any block is held (a statement
// that drops a DeviceTimer, or the garbage collector) leaves its resources here,
// and the loop that releases the last hold frees them.
struct Owned {
  std::shared_ptr<Driver> d;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  std::vector<CUevent> events;
  CUdeviceptr buffer = 0;
  CUmodule module = nullptr;
  void* host = nullptr;

  // Never throws: at interpreter exit the driver may already be shutting down,
  // and a leaked event is better than an abort.
  void free() const {
    const CudaTable& cu = d->cu;
    const bool pushed = cu.cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
    for (CUevent e : events) cu.cuEventDestroy(e);
    if (buffer) cu.cuMemFree(buffer);
    if (module) cu.cuModuleUnload(module);
    if (host) cu.cuMemFreeHost(host);
    if (pushed) {
      CUcontext popped = nullptr;
      cu.cuCtxPopCurrent(&popped);
    }
    cu.cuDevicePrimaryCtxRelease(dev);
  }
};

std::mutex owned_mu;
std::vector<Owned>& left_over() {
  static std::vector<Owned> v;
  return v;
}

// Frees `o` now, or once no block of the process is held.
void free_when_unheld(Owned o) {
  if (holds_active.load() == 0) {
    o.free();
    return;
  }
  std::lock_guard<std::mutex> lk(owned_mu);
  left_over().push_back(std::move(o));
}

void free_left_over() {
  if (holds_active.load() > 0) return;
  std::vector<Owned> now;
  {
    std::lock_guard<std::mutex> lk(owned_mu);
    now.swap(left_over());
  }
  for (const Owned& o : now) o.free();
}

// Python's cyclic garbage collector paused while a held block is queued: a cycle
// collected there may free device memory (a DeviceTimer, a CUDA graph's pool).
class GcPause {
 public:
  explicit GcPause(bool on) {
#if PY_VERSION_HEX >= 0x030A0000
    if (on) was_ = PyGC_Disable() == 1;
#else
    (void)on;
#endif
  }
  GcPause(const GcPause&) = delete;
  GcPause& operator=(const GcPause&) = delete;
  ~GcPause() {
#if PY_VERSION_HEX >= 0x030A0000
    if (was_) PyGC_Enable();
#endif
  }

 private:
  bool was_ = false;
};

// --- the launch-hold watchdog ----------------------------------------------

// Releases a held stream if the timing loop stops making progress, which only
// happens when the statement waits for work queued behind the hold. One thread
// per Context, armed for each held block.
class Watchdog {
 public:
  explicit Watchdog(std::uint32_t* flag) : flag_(flag), thread_([this] { watch(); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(std::uint32_t value, double timeout_s) {
    {
      // Under the lock: the watcher checks `armed_` under it before sleeping
      // untimed, so this wake-up cannot fall between its check and its wait.
      std::lock_guard<std::mutex> lk(m_);
      timeout_ns_.store(static_cast<std::int64_t>(timeout_s * 1e9));
      value_.store(value);
      fired_.store(false);
      progress();
      armed_.store(true);
    }
    cv_.notify_all();
  }
  void disarm() { armed_.store(false); }
  void progress() { last_ns_.store(opbench::now_ns()); }
  bool fired() const { return fired_.load(); }

 private:
  void watch() {
    std::unique_lock<std::mutex> lk(m_);
    while (!done_) {
      if (!armed_.load()) {  // idle between blocks: sleep until armed
        cv_.wait(lk, [this] { return done_ || armed_.load(); });
        continue;
      }
      const auto poll = std::chrono::nanoseconds(std::max<std::int64_t>(timeout_ns_.load() / 4, 1000000));
      cv_.wait_for(lk, poll);
      if (done_ || !armed_.load()) continue;
      if (opbench::now_ns() - last_ns_.load() >= timeout_ns_.load()) {
        __atomic_store_n(flag_, value_.load(), __ATOMIC_RELEASE);
        fired_.store(true);
        armed_.store(false);
      }
    }
  }

  std::uint32_t* flag_;
  std::atomic<std::int64_t> timeout_ns_{2'000'000'000};
  std::atomic<std::uint32_t> value_{0};
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<bool> armed_{false}, fired_{false};
  bool done_ = false;
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
};

// The watchdog released a held block. `calls_returned`: calls of the block
// that had returned before the stall. Some: the launch queue filled up, and a
// smaller block fits. None: the statement waits for the GPU inside a call.
struct Stall {
  long long calls_returned;
};

// The cold-L2 flush: a kernel that reads the flush buffer (16 bytes a thread,
// grid-stride, through L2 only: ld.global.cg), so the L2 ends up full of clean
// lines of the buffer and the statement's dirty lines were written back while
// it ran, outside the timed window. A memset would leave the L2 full of dirty
// lines whose write-back lands in the next timed call (triton's zero_ does).
// The store is never taken in practice; it keeps the loads from being removed.
// PTX, JIT-compiled by the driver: no toolkit needed.
// `.target` is filled in: sm_75 (the oldest target CUDA 13 still builds for)
// first, sm_52 for older drivers and GPUs.
constexpr const char* kL2ReadPtx = R"(.version 7.0
.target TARGET
.address_size 64
.visible .entry opbench_l2_read(.param .u64 p_buf, .param .u64 p_n16, .param .u64 p_sink)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [p_buf];
  ld.param.u64 %rd2, [p_n16];
  ld.param.u64 %rd3, [p_sink];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd4, %r1, %r2;
  cvt.u64.u32 %rd5, %r3;
  add.u64 %rd4, %rd4, %rd5;
  mul.wide.u32 %rd6, %r4, %r2;
  mov.b32 %r5, 0;
LOOP:
  setp.ge.u64 %p1, %rd4, %rd2;
  @%p1 bra DONE;
  shl.b64 %rd7, %rd4, 4;
  add.u64 %rd8, %rd1, %rd7;
  ld.global.cg.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
  xor.b32 %r5, %r5, %r6;
  xor.b32 %r5, %r5, %r7;
  xor.b32 %r5, %r5, %r8;
  xor.b32 %r5, %r5, %r9;
  add.u64 %rd4, %rd4, %rd6;
  bra LOOP;
DONE:
  setp.ne.u32 %p2, %r5, 0x2545F491;
  @%p2 bra END;
  st.global.u32 [%rd3], %r5;
END:
  ret;
}
)";

// --- the context ------------------------------------------------------------

// Most calls one held block queues, and the commands it may put in the launch
// queue: nvbench keeps held launches to a few dozen; a real queue takes about
// a thousand. The statement's own commands are unknown, so count one per call.
constexpr long long kMaxHeldCalls = 32;
constexpr long long kHeldCommands = 96;
// A call queueing more launches than this (half a typical queue) cannot be held.
constexpr long long kMaxHeldLaunchesPerCall = 512;
// The least host time one launch takes (a cuLaunchKernel from C is ~2 us): a call's
// host time over this bounds the launches it can make, counted or not.
constexpr double kMinLaunchNs = 1000;
// A held block is queued within about this much host time (other streams on the
// held stream's hardware connection wait that long).
constexpr double kHeldHostNs = 2e6;
// The watchdog fires after this many calls' worth of host time without progress,
// within [kMinStallS, watchdog_s].
constexpr double kStallCalls = 200;
constexpr double kMinStallS = 0.1;
// The event-quantum probe: steps between distinct timestamps it wants to see.
constexpr std::size_t kQuantumSteps = 8;
// Unheld per-call windows are timed in blocks of this many (the event pool).
constexpr long long kUnheldPerCallBlock = 256;
// Events recorded back to back to find the timestamp quantum, and rounds of them.
constexpr std::size_t kQuantumProbe = 32;
constexpr int kQuantumRounds = 8;

// One device's primary context (the one the CUDA runtime, hence torch, uses),
// retained for the object's lifetime, plus the reusable timing resources:
// an event pool, the L2 flush buffer and the hold flag.
class Context {
 public:
  // The context pushed for the lifetime of the object; the caller's own current
  // context (torch's current device) is current again afterwards.
  class Current {
   public:
    explicit Current(const Context& c) : d_(*c.d_) {
      d_.check(d_.cu.cuCtxPushCurrent(c.ctx_), "cuCtxPushCurrent");
    }
    Current(const Current&) = delete;
    Current& operator=(const Current&) = delete;
    ~Current() {
      CUcontext popped = nullptr;
      d_.cu.cuCtxPopCurrent(&popped);
    }

   private:
    const Driver& d_;
  };

  explicit Context(int ordinal) : d_(current_driver()), ordinal_(ordinal) {
    const CudaTable& cu = d_->cu;
    const CUresult init = cu.cuInit(0);
    if (init == CUDA_ERROR_NO_DEVICE)
      throw CudaError("no CUDA device: cuInit reports " + d_->describe(init) +
                          " (the NVIDIA driver is installed but sees no GPU; check "
                          "CUDA_VISIBLE_DEVICES)",
                      "cuInit", init);
    d_->check(init, "cuInit");
    int count = 0;
    d_->check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count)
      throw CudaError("CUDA device " + std::to_string(ordinal) + " requested, but this machine has " +
                          std::to_string(count) + " (valid: 0.." + std::to_string(count - 1) + ")",
                      "cuDeviceGet", CUDA_ERROR_INVALID_DEVICE);
    d_->check(cu.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
    d_->check(cu.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    hold_ = cu.cuStreamWaitValue32 && cu.cuMemHostAlloc && cu.cuMemHostGetDevicePointer && cu.cuMemFreeHost;
    if (!hold_) disable_hold("this driver lacks cuStreamWaitValue32 (stream memory operations)", true);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Teardown never throws (see Owned::free) and never frees inside a held block.
  ~Context() {
    dog_.reset();  // before the flag it writes goes away
    free_when_unheld(Owned{d_, ctx_, dev_, events_, flush_buf_, read_module_, flag_host_});
  }

  const Driver& driver() const { return *d_; }

  py::dict info() {
    Current current(*this);
    const CudaTable& cu = d_->cu;
    char name[256] = {0};
    char bus[64] = {0};
    int l2 = 0;
    int version = 0;
    d_->check(cu.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
    d_->check(cu.cuDeviceGetPCIBusId(bus, sizeof bus, dev_), "cuDeviceGetPCIBusId");
    d_->check(cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_),
              "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)");
    d_->check(cu.cuDriverGetVersion(&version), "cuDriverGetVersion");
    py::dict out;
    out["name"] = std::string(name);
    out["index"] = ordinal_;
    out["pci_bus_id"] = std::string(bus);
    out["l2_cache_bytes"] = l2;
    out["cuda_driver_version"] = version;
    out["driver_version"] = py::none();
    out["module_loading"] = module_loading();
    out["sm_clock_max_mhz"] = py::none();
    out["mem_clock_max_mhz"] = py::none();
    if (nvml_ready()) {
      char v[96] = {0};
      if (d_->nvml.nvmlSystemGetDriverVersion(v, sizeof v) == NVML_SUCCESS)
        out["driver_version"] = std::string(v);
      unsigned sm = 0, mem = 0;
      if (d_->nvml.nvmlDeviceGetMaxClockInfo(nvml_dev_, NVML_CLOCK_SM, &sm) == NVML_SUCCESS)
        out["sm_clock_max_mhz"] = sm;
      if (d_->nvml.nvmlDeviceGetMaxClockInfo(nvml_dev_, NVML_CLOCK_MEM, &mem) == NVML_SUCCESS)
        out["mem_clock_max_mhz"] = mem;
    }
    out["driver"] = d_->origin;
    return out;
  }

  /// (SM MHz, memory MHz) now, or None when NVML cannot say (see clock_problem).
  py::object clocks() {
    unsigned sm = 0, mem = 0;
    if (!read_clocks(sm, mem)) return py::none();
    return py::make_tuple(sm, mem);
  }
  std::string clock_problem() const { return clock_problem_; }

  /// Clocks under the statement's own load, off the timed path: calls fn()
  /// unheld, reading NVML every `spacing_s` (NVML changes its answer only on a
  /// millisecond scale; reading faster sees the same stale value) while the
  /// GPU still has the probe's work, until two readings agree within 1% (the
  /// clock has finished ramping up from idle) or `max_s` has passed. At most
  /// `max_calls` calls. Returns (SM MHz, memory MHz, reasons or -1, settled,
  /// duty) of the last reading taken under load, or None (see clock_problem).
  /// `duty` is the share of the probe the GPU spent in the statement's work
  /// (`call_s` device seconds a call, over the probe's device time; -1 when
  /// call_s is 0): a launch-bound statement leaves the GPU idle between its
  /// kernels, and NVML's clock then reads a half-idle GPU, not a throttled one.
  py::object clock_probe(py::handle fn, std::uintptr_t stream, long long max_calls, double spacing_s,
                         double max_s, double call_s) {
    unsigned sm0 = 0, mem0 = 0;
    if (!read_clocks(sm0, mem0)) return py::none();  // no clocks here: no probe calls either
    const opbench::detail::NoArgCall call(fn);
    Current current(*this);
    const auto s = reinterpret_cast<CUstream>(stream);
    ensure_events(2);
    opbench::detail::SignalPoll poll;
    long long calls = 0;
    py::object reading = py::none();
    const auto spacing = static_cast<std::int64_t>(spacing_s * 1e9);
    const std::int64_t t0 = opbench::now_ns();
    std::int64_t last_read = t0;
    long long prev_sm = -1;
    bool settled = false;
    // One reading; true once two in a row agree. Idle readings do not count.
    auto take = [&]() {
      unsigned sm = 0, mem = 0;
      last_read = opbench::now_ns();
      if (!read_clocks(sm, mem)) return true;  // no clocks at all: stop
      long long reasons = -1;
      unsigned long long r = 0;
      if (d_->nvml.nvmlDeviceGetCurrentClocksEventReasons &&
          d_->nvml.nvmlDeviceGetCurrentClocksEventReasons(nvml_dev_, &r) == NVML_SUCCESS)
        reasons = static_cast<long long>(r);
      if (reasons >= 0 && (r & NVML_CLOCKS_EVENT_REASON_GPU_IDLE)) return false;  // between kernels
      settled = prev_sm >= 0 && std::abs(static_cast<double>(sm) - static_cast<double>(prev_sm)) <= 0.01 * sm;
      prev_sm = sm;
      reading = py::make_tuple(sm, mem, reasons, settled);
      return settled;
    };
    bool done = false;
    record(events_[0], s);
    for (long long i = 0; i < max_calls && !done; ++i) {
      call();
      ++calls;
      poll.tick();
      const std::int64_t now = opbench::now_ns();
      if (now - last_read >= spacing) done = take();
      if (now - t0 >= static_cast<std::int64_t>(max_s * 1e9)) break;
    }
    record(events_[1], s);
    // The calls are queued; keep reading while the GPU runs them.
    while (!done && opbench::now_ns() - t0 < static_cast<std::int64_t>(max_s * 1e9)) {
      const CUresult q = d_->cu.cuEventQuery(events_[1]);
      if (q != CUDA_ERROR_NOT_READY) {
        d_->check(q, "cuEventQuery (clock probe)");
        break;
      }
      {
        py::gil_scoped_release nogil;
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(std::max<std::int64_t>(0, last_read + spacing - opbench::now_ns())));
      }
      if (d_->cu.cuEventQuery(events_[1]) != CUDA_ERROR_NOT_READY) break;
      done = take();
    }
    wait(events_[1], "queued by the clock probe");
    if (reading.is_none()) {
      if (clock_problem_.empty())
        clock_problem_ = "the GPU never stayed busy long enough for NVML to see it under load";
      return py::none();
    }
    const double span = elapsed_s(events_[0], events_[1]);
    const double duty = call_s <= 0 ? -1.0 : span <= 0 ? 1.0 : std::min(1.0, calls * call_s / span);
    const auto r = reading.cast<py::tuple>();
    return py::make_tuple(r[0], r[1], r[2], r[3], duty);
  }

  /// Launches one call of fn() queues on `stream`, counted by capturing the call
  /// (relaxed mode: nothing runs); None when it cannot be counted (see
  /// launch_count_problem). Kept for sizing held blocks in launches.
  py::object count_launches(py::handle fn, std::uintptr_t stream) {
    const CudaTable& cu = d_->cu;
    if (!cu.cuStreamBeginCapture || !cu.cuStreamEndCapture || !cu.cuGraphGetNodes || !cu.cuGraphDestroy)
      return set_launches(0, "this driver cannot capture streams");
    if (stream == 0) return set_launches(0, "the legacy default stream cannot be captured");
    const opbench::detail::NoArgCall call(fn);
    Current current(*this);
    const auto s = reinterpret_cast<CUstream>(stream);
    CUresult r = cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r != CUDA_SUCCESS) return set_launches(0, "cuStreamBeginCapture: " + d_->describe(r));
    std::string raised;
    std::exception_ptr interrupt;  // Ctrl-C is the user's, never a reason not to count
    try {
      call();
    } catch (py::error_already_set& e) {
      raised = e.what();
      if (e.matches(PyExc_KeyboardInterrupt) || e.matches(PyExc_SystemExit))
        interrupt = std::current_exception();
    }
    CUgraph g = nullptr;
    r = cu.cuStreamEndCapture(s, &g);  // always: a stream left capturing is unusable
    std::size_t n = 0;
    if (r == CUDA_SUCCESS && g != nullptr) {
      r = cu.cuGraphGetNodes(g, nullptr, &n);
      cu.cuGraphDestroy(g);
    }
    if (interrupt) std::rethrow_exception(interrupt);
    if (!raised.empty())
      return set_launches(0, "the statement cannot run under stream capture (" + raised + ")");
    if (r != CUDA_SUCCESS) return set_launches(0, "capturing one call failed: " + d_->describe(r));
    return set_launches(static_cast<long long>(n), "");
  }
  std::string launch_count_problem() const { return launch_count_problem_; }
  double host_s_per_call() const { return host_ns_per_call_ * 1e-9; }

  /// Nodes of the stream capture in progress on `stream` (one that torch began,
  /// so that torch's random-number state and allocator know of it), or None.
  py::object capture_nodes(std::uintptr_t stream) {
    const CudaTable& cu = d_->cu;
    if (!cu.cuStreamGetCaptureInfo || !cu.cuGraphGetNodes) return py::none();
    Current current(*this);
    int status = 0;
    std::uint64_t id = 0;
    CUgraph g = nullptr;
    const CUresult r =
        cu.cuStreamGetCaptureInfo(reinterpret_cast<CUstream>(stream), &status, &id, &g, nullptr, nullptr);
    if (r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE || g == nullptr) return py::none();
    std::size_t n = 0;
    if (cu.cuGraphGetNodes(g, nullptr, &n) != CUDA_SUCCESS) return py::none();
    return py::int_(n);
  }

  /// Records what counting one call found (`launches`, 0 for nothing launched on
  /// the timed stream) or why it could not (`problem`, launches ignored); held
  /// blocks are sized by it. Returns the count, or None.
  py::object set_launches(long long launches, const std::string& problem) {
    launches_per_call_ = 0;
    launch_count_problem_ = problem;
    if (!problem.empty()) return py::none();
    if (launches <= 0) {
      launch_count_problem_ = "one call launched nothing on the timed stream";
      return py::none();
    }
    launches_per_call_ = launches;
    if (launches_per_call_ > kMaxHeldLaunchesPerCall && hold_)
      disable_hold("one call queues " + std::to_string(launches) + " launches, more than a held block may (" +
                   std::to_string(kMaxHeldLaunchesPerCall) + ")");
    return py::int_(launches);
  }

  /// Allocates the cold-cache flush buffer once; resizing frees the old one.
  void set_flush_bytes(std::size_t bytes) {
    if (bytes == flush_bytes_) return;
    Current current(*this);
    if (flush_buf_) {
      d_->check(d_->cu.cuMemFree(flush_buf_), "cuMemFree");
      flush_buf_ = 0;
      flush_bytes_ = 0;
    }
    if (bytes == 0) return;
    d_->check(d_->cu.cuMemAlloc(&flush_buf_, bytes), "cuMemAlloc (L2 flush buffer)");
    flush_bytes_ = bytes;
    load_read_kernel();
  }
  std::size_t flush_bytes() const { return flush_bytes_; }
  /// How the flush evicts the L2: "read" (clean lines), or "write" and why.
  std::string flush_method() const { return read_fn_ ? "read" : "write (" + read_problem_ + ")"; }

  /// The smallest step between event timestamps on this device, in seconds
  /// (None when no step was seen): measured once per device and process.
  py::object event_quantum(std::uintptr_t stream) {
    DeviceMemo& m = memo();
    if (!m.quantum_measured) {
      m.event_quantum_s = measure_quantum(reinterpret_cast<CUstream>(stream));
      m.quantum_measured = true;
    }
    return m.event_quantum_s > 0 ? py::object(py::float_(m.event_quantum_s)) : py::object(py::none());
  }

  /// Device seconds, one entry per timed window: per call (per_call) or per
  /// block of calls. Cold-cache flushes (flush) go before each call's window.
  /// hold=false runs unheld whatever the Context's setting (a first call).
  std::vector<double> run(py::handle fn, long long number, std::uintptr_t stream, bool per_call, bool flush,
                          bool hold) {
    if (number < 0) throw py::value_error("number must be >= 0, got " + std::to_string(number));
    if (flush && !per_call) throw py::value_error("a cold-L2 flush needs per-call windows (per_call=True)");
    if (flush && flush_bytes_ == 0) throw py::value_error("no flush buffer: call set_flush_bytes(n) first");
    const opbench::detail::NoArgCall call(fn);
    Current current(*this);
    const auto s = reinterpret_cast<CUstream>(stream);
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(per_call ? number : 1));
    // Ctrl-C stops the loop within milliseconds as KeyboardInterrupt.
    opbench::detail::SignalPoll poll;
    long long done = 0;
    while (done < number) {
      const bool held = hold && hold_ && ensure_flag();
      const long long block = held ? held_calls(per_call, flush) : per_call ? kUnheldPerCallBlock : number;
      const long long n = std::min(block, number - done);
      try {
        const double queued_ns = run_block(call, n, s, per_call, flush, held, poll, out);
        done += n;  // blocks already measured are kept whatever happens later
        if (host_ns_per_call_ <= 0 || queued_ns / n < host_ns_per_call_) host_ns_per_call_ = queued_ns / n;
        if (held) empty_stalls_ = 0;  // a stall before this one was a one-off
      } catch (const Stall& stall) {
        free_left_over();
        after_stall(stall, n);
      }
      free_left_over();
    }
    return out;
  }

  bool hold_enabled() const { return hold_; }
  void set_hold(bool on) {
    if (on && !hold_available_) throw py::value_error("launches cannot be held: " + hold_problem_);
    if (on) empty_stalls_ = 0;
    hold_ = on;
    hold_problem_ = on ? "" : "switched off by the caller (launch_hold=False)";
  }
  /// Why the hold is off ("" while it is on).
  std::string hold_problem() const { return hold_ ? "" : hold_problem_; }

  /// Calls per held block (events mode); setting it caps blocks on this device.
  long long hold_chunk() { return held_calls(false, false); }
  void set_hold_chunk(long long calls) {
    if (calls < 1) throw py::value_error("hold_chunk must be >= 1, got " + std::to_string(calls));
    memo().hold_calls = calls;
  }
  double watchdog_s = 2.0;  // no progress for this long means the statement waits on the hold

  CUevent new_event() {
    Current current(*this);
    CUevent e = nullptr;
    d_->check(d_->cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    return e;
  }

  void record(CUevent e, CUstream s) const { d_->check(d_->cu.cuEventRecord(e, s), "cuEventRecord"); }

  /// Waits for `e`, with the GIL released. A fault in work queued before it
  /// (the statement's kernels) is reported here, so the message says so.
  void wait(CUevent e, const char* what) const {
    CUresult r;
    {
      py::gil_scoped_release nogil;
      r = d_->cu.cuEventSynchronize(e);
    }
    if (r != CUDA_SUCCESS)
      throw CudaError(std::string("cuEventSynchronize failed: ") + d_->describe(r) + " (raised by GPU work " +
                          what + ")" + Driver::sticky_note(r),
                      "cuEventSynchronize", r);
  }

  double elapsed_s(CUevent a, CUevent b) const {
    float ms = 0;
    d_->check(d_->cu.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  DeviceMemo& memo() { return d_->memo[ordinal_]; }

  // Commands one call puts in the launch queue: its launches (see launches_bound)
  // and opbench's own records and flush.
  long long commands_per_call(bool per_call, bool flush) const {
    return launches_bound() + (per_call ? 2 : 0) + (flush ? 1 : 0);
  }

  long long held_calls(bool per_call, bool flush) {
    const long long cost = commands_per_call(per_call, flush);
    long long n = std::min(kMaxHeldCalls, kHeldCommands / cost);
    if (memo().hold_commands > 0) n = std::min(n, memo().hold_commands / cost);
    if (memo().hold_calls > 0) n = std::min(n, memo().hold_calls);
    if (host_ns_per_call_ > 0) n = std::min(n, static_cast<long long>(kHeldHostNs / host_ns_per_call_));
    return std::max(1LL, n);
  }

  // Launches one call queues: as counted; else at most what its host time allows
  // (a launch costs the host at least kMinLaunchNs); before either is known, a
  // whole held block's worth (one call a block).
  long long launches_bound() const {
    if (launches_per_call_ > 0) return launches_per_call_;
    if (host_ns_per_call_ > 0)
      return std::max(1LL, static_cast<long long>(std::ceil(host_ns_per_call_ / kMinLaunchNs)));
    return kHeldCommands;
  }

  // How long the watchdog waits for progress: a few hundred calls' worth of host
  // time, at least kMinStallS (a busy machine's scheduling), at most watchdog_s.
  double stall_timeout_s() const {
    if (host_ns_per_call_ <= 0) return watchdog_s;
    return std::min(watchdog_s, std::max(kMinStallS, kStallCalls * host_ns_per_call_ * 1e-9));
  }

  void load_read_kernel() {
    const CudaTable& cu = d_->cu;
    if (read_fn_ || !read_problem_.empty()) return;
    if (!cu.cuModuleLoadData || !cu.cuModuleGetFunction || !cu.cuLaunchKernel || !cu.cuModuleUnload) {
      read_problem_ = "this driver cannot load modules";
      return;
    }
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (const char* target : {"sm_75", "sm_52"}) {
      std::string ptx = kL2ReadPtx;
      ptx.replace(ptx.find("TARGET"), 6, target);
      r = cu.cuModuleLoadData(&read_module_, ptx.c_str());
      if (r == CUDA_SUCCESS) break;
    }
    if (r == CUDA_SUCCESS) r = cu.cuModuleGetFunction(&read_fn_, read_module_, "opbench_l2_read");
    int sms = 0;
    if (r == CUDA_SUCCESS) r = cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_);
    if (r != CUDA_SUCCESS) {
      read_fn_ = nullptr;
      read_problem_ = "the read kernel did not load: " + d_->describe(r);
      return;
    }
    read_grid_ = static_cast<unsigned>(std::max(1, sms) * 4);
  }

  // The flush before one call's window: read the buffer (or, without the read
  // kernel, overwrite it).
  void flush_l2(CUstream s) {
    const CudaTable& cu = d_->cu;
    if (read_fn_) {
      unsigned long long buf = flush_buf_, units = flush_bytes_ / 16, sink = flush_buf_;
      void* params[] = {&buf, &units, &sink};
      d_->check(cu.cuLaunchKernel(read_fn_, read_grid_, 1, 1, 256, 1, 1, 0, s, params, nullptr),
                "cuLaunchKernel (L2 flush read)");
      return;
    }
    const auto fill = static_cast<unsigned char>(flush_count_++ & 1);
    d_->check(cu.cuMemsetD8Async(flush_buf_, fill, flush_bytes_, s), "cuMemsetD8Async (L2 flush)");
  }

  py::object module_loading() const {
    if (d_->cu.cuModuleGetLoadingMode == nullptr) return py::none();
    int mode = 0;
    if (d_->cu.cuModuleGetLoadingMode(&mode) != CUDA_SUCCESS) return py::none();
    if (mode == CU_MODULE_LAZY_LOADING) return py::str("lazy");
    if (mode == CU_MODULE_EAGER_LOADING) return py::str("eager");
    return py::str("unknown (" + std::to_string(mode) + ")");
  }

  bool nvml_ready() {
    if (nvml_dev_ != nullptr) return true;
    if (!d_->has_nvml) {
      clock_problem_ = d_->nvml_problem;
      return false;
    }
    if (!d_->nvml_initialised) {
      const nvmlReturn_t r = d_->nvml.nvmlInit();
      if (r != NVML_SUCCESS) {
        clock_problem_ = std::string("nvmlInit failed: ") + d_->nvml.nvmlErrorString(r);
        return false;
      }
      d_->nvml_initialised = true;
    }
    // By PCI bus id: NVML numbers all GPUs, CUDA only the visible ones.
    char bus[64] = {0};
    if (d_->cu.cuDeviceGetPCIBusId(bus, sizeof bus, dev_) != CUDA_SUCCESS) return false;
    const nvmlReturn_t r = d_->nvml.nvmlDeviceGetHandleByPciBusId(bus, &nvml_dev_);
    if (r != NVML_SUCCESS) {
      nvml_dev_ = nullptr;
      clock_problem_ = std::string("nvmlDeviceGetHandleByPciBusId failed: ") + d_->nvml.nvmlErrorString(r);
      return false;
    }
    return true;
  }

  bool read_clocks(unsigned& sm, unsigned& mem) {
    if (!nvml_ready()) return false;
    const nvmlReturn_t a = d_->nvml.nvmlDeviceGetClockInfo(nvml_dev_, NVML_CLOCK_SM, &sm);
    const nvmlReturn_t b = d_->nvml.nvmlDeviceGetClockInfo(nvml_dev_, NVML_CLOCK_MEM, &mem);
    if (a != NVML_SUCCESS || b != NVML_SUCCESS) {
      clock_problem_ = std::string("nvmlDeviceGetClockInfo failed: ") +
                       d_->nvml.nvmlErrorString(a != NVML_SUCCESS ? a : b);
      return false;
    }
    return true;
  }

  void ensure_events(std::size_t n) {
    while (events_.size() < n) events_.push_back(new_event());
  }

  // `for_good`: this device or driver cannot hold at all (set_hold(true) refuses).
  void disable_hold(std::string why, bool for_good = false) {
    hold_ = false;
    hold_problem_ = std::move(why);
    if (for_good) hold_available_ = false;
  }

  // The pinned, device-mapped word a held stream waits on, and the watchdog
  // that writes it. Written by the host only; the sequence number only grows,
  // so a wait already queued can never be stranded by a later write.
  bool ensure_flag() {
    if (flag_host_) return true;
    const CudaTable& cu = d_->cu;
    void* p = nullptr;
    CUresult r = cu.cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    CUdeviceptr dp = 0;
    if (r == CUDA_SUCCESS) {
      r = cu.cuMemHostGetDevicePointer(&dp, p, 0);
      if (r != CUDA_SUCCESS) cu.cuMemFreeHost(p);
    }
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
      disable_hold("mapped pinned memory for the hold flag is not supported here (" + d_->describe(r) + ")",
                   true);
      return false;
    }
    d_->check(r, "cuMemHostAlloc (launch hold flag)");
    flag_host_ = static_cast<std::uint32_t*>(p);
    __atomic_store_n(flag_host_, 0u, __ATOMIC_RELEASE);
    flag_dev_ = dp;
    dog_ = std::make_unique<Watchdog>(flag_host_);
    return true;
  }

  // Queues a wait for the next sequence number. Only "not supported" turns the
  // hold off (with the reason kept); any other error, sticky ones included, is
  // the caller's to see.
  bool hold_stream(CUstream s) {
    const CUresult r = d_->cu.cuStreamWaitValue32(s, flag_dev_, seq_ + 1, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
      disable_hold("cuStreamWaitValue32 returned " + d_->describe(r) +
                       ": this GPU or driver cannot hold a stream (stream memory operations are off)",
                   true);
      return false;
    }
    d_->check(r, "cuStreamWaitValue32 (launch hold)");
    ++seq_;
    holding_ = true;
    ++holds_active;
    return true;
  }

  void release_stream() {
    __atomic_store_n(flag_host_, seq_, __ATOMIC_RELEASE);
    if (holding_) {
      holding_ = false;
      --holds_active;
    }
  }

  // Whatever leaves a held block (a Python exception, Ctrl-C, a CUDA error, a
  // stall) must not leave the stream held, or everything later on it hangs.
  struct Release {
    Context* c;
    bool* held;
    ~Release() {
      if (*held) c->release_stream();
      if (c->dog_) c->dog_->disarm();
    }
  };

  // One block of n calls, behind one hold when `held`; appends its windows and
  // returns the host nanoseconds its calls took to queue.
  double run_block(const opbench::detail::NoArgCall& call, long long n, CUstream s, bool per_call, bool flush,
                   bool held, opbench::detail::SignalPoll& poll, std::vector<double>& out) {
    ensure_events(per_call ? 2 * static_cast<std::size_t>(n) : 2);
    held = held && hold_stream(s);
    const bool was_held = held;
    Release release{this, &held};
    const GcPause gc(held);
    if (held) dog_->arm(seq_, stall_timeout_s());
    if (!per_call) record(events_[0], s);
    const std::int64_t start = opbench::now_ns();
    for (long long i = 0; i < n; ++i) {
      if (flush) flush_l2(s);
      if (per_call) record(events_[2 * i], s);
      call();
      if (per_call) record(events_[2 * i + 1], s);
      if (held) {
        if (dog_->fired()) throw Stall{i};
        dog_->progress();
      }
      poll.tick();
    }
    const auto queued = static_cast<double>(opbench::now_ns() - start);
    if (!per_call) record(events_[1], s);
    if (held) {
      release_stream();
      dog_->disarm();
      held = false;
    }
    const std::size_t windows = per_call ? static_cast<std::size_t>(n) : 1;
    wait(events_[2 * windows - 1], "queued in the timed region");
    if (was_held && dog_->fired()) throw Stall{n};
    for (std::size_t w = 0; w < windows; ++w) out.push_back(elapsed_s(events_[2 * w], events_[2 * w + 1]));
    return queued;
  }

  // A held block stalled; its windows are void (they include the stall). When
  // some calls fit, the same block is redone: once may be a one-off (a free that
  // synchronised, torch emptying its cache), and only the same block stalling
  // again is a full launch queue, which makes blocks smaller for the device. When
  // none fit, retry once held (the first held block after a warm-up may still be
  // loading), then give the hold up.
  void after_stall(const Stall& stall, long long block) {
    if (stall.calls_returned > 0 && block > 1) {
      if (suspect_block_ != block) {
        suspect_block_ = block;
        return;
      }
      suspect_block_ = 0;
      const long long cost = commands_per_call(false, false);
      memo().hold_commands = cost * std::max(1LL, std::min(block - 1, stall.calls_returned / 2));
      return;
    }
    if (++empty_stalls_ == 1) return;
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", watchdog_s);
    const std::string why =
        std::string("twice, the statement did not return within ") + timeout +
        " s while its launches were held back (after a first call run unheld): it waits for the GPU inside a "
        "call (a synchronize, .item(), .cpu(), a blocking copy, or code still being loaded or compiled after "
        "its first call), or one call queues more work than the launch queue holds";
    disable_hold(why);
    warn_hold_lost(why);
  }

  // Back to back behind the hold, events land closer together than the
  // timer's step, so the nonzero differences between their timestamps are that
  // step: one tick apart, each tick a little off its nominal time (so no single
  // difference is the step), or now and then two ticks apart. The step is the
  // median of the differences within half a step of the smallest. A round may
  // fit between two ticks (no difference at all), so up to kQuantumRounds rounds,
  // each starting at another moment, until kQuantumSteps differences are seen.
  // The probe runs no statement, so it may hold even when timing may not.
  double measure_quantum(CUstream s) {
    Current current(*this);
    ensure_events(kQuantumProbe);
    std::vector<double> steps;
    for (int round = 0; round < kQuantumRounds && steps.size() < kQuantumSteps; ++round) {
      bool held = hold_available_ && ensure_flag() && hold_stream(s);
      const bool was_held = held;
      {
        Release release{this, &held};
        if (held) dog_->arm(seq_, watchdog_s);
        for (std::size_t i = 0; i < kQuantumProbe; ++i) record(events_[i], s);
      }
      wait(events_[kQuantumProbe - 1], "queued before opbench's event-quantum probe");
      free_left_over();
      if (was_held && dog_->fired()) return 0;  // a launch queue this short: leave it unknown
      std::vector<double> t;
      for (std::size_t i = 0; i < kQuantumProbe; ++i) t.push_back(elapsed_s(events_[0], events_[i]));
      std::sort(t.begin(), t.end());
      for (std::size_t i = 1; i < t.size(); ++i)
        if (t[i] - t[i - 1] > 1e-10) steps.push_back(t[i] - t[i - 1]);
    }
    if (steps.empty()) return 0;
    const double smallest = *std::min_element(steps.begin(), steps.end());
    std::vector<double> one_tick;
    for (double step : steps)
      if (step <= 1.5 * smallest) one_tick.push_back(step);
    std::nth_element(one_tick.begin(), one_tick.begin() + one_tick.size() / 2, one_tick.end());
    return std::round(one_tick[one_tick.size() / 2] * 1e10) * 1e-10;  // float milliseconds: keep 0.1 ns
  }

  std::shared_ptr<Driver> d_;
  int ordinal_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<CUevent> events_;
  CUdeviceptr flush_buf_ = 0;
  std::size_t flush_bytes_ = 0;
  unsigned long long flush_count_ = 0;
  bool hold_ = false;
  bool hold_available_ = true;
  std::string hold_problem_;
  int empty_stalls_ = 0;
  std::uint32_t* flag_host_ = nullptr;
  CUdeviceptr flag_dev_ = 0;
  std::uint32_t seq_ = 0;
  std::unique_ptr<Watchdog> dog_;
  nvmlDevice_t nvml_dev_ = nullptr;
  std::string clock_problem_;
  long long launches_per_call_ = 0;  // counted launches of one call; 0: not counted
  double host_ns_per_call_ = 0;      // least host time a call took to queue, in any block; 0: none yet
  long long suspect_block_ = 0;      // a block size that stalled once (see after_stall)
  bool holding_ = false;             // this Context's stream is held now
  std::string launch_count_problem_;
  CUmodule read_module_ = nullptr;
  CUfunction read_fn_ = nullptr;
  unsigned read_grid_ = 1;
  std::string read_problem_;
};

// A CUDA event on a context, for user code that brackets its own regions.
class Event {
 public:
  explicit Event(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)), e_(ctx_->new_event()) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { ctx_->driver().cu.cuEventDestroy(e_); }

  void record(std::uintptr_t stream) {
    Context::Current current(*ctx_);
    ctx_->record(e_, reinterpret_cast<CUstream>(stream));
    recorded_ = true;
  }
  void synchronize() {
    require_recorded("synchronize");
    ctx_->wait(e_, "queued before this event");
  }
  bool query() {
    require_recorded("query");
    const CUresult r = ctx_->driver().cu.cuEventQuery(e_);
    if (r == CUDA_ERROR_NOT_READY) return false;
    ctx_->driver().check(r, "cuEventQuery");
    return true;
  }
  /// Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time.
  double elapsed_time(const Event& end) {
    require_recorded("elapsed_time");
    if (!end.recorded_) throw py::value_error("the end event was never recorded: call end.record() first");
    return ctx_->elapsed_s(e_, end.e_) * 1e3;
  }

 private:
  void require_recorded(const char* what) const {
    if (!recorded_) throw py::value_error(std::string("Event.") + what + "() before Event.record()");
  }
  std::shared_ptr<Context> ctx_;
  CUevent e_;
  bool recorded_ = false;
};

PyObject* cuda_error_type = nullptr;

}  // namespace

OPBENCH_BINDINGS(cuda) {
  // The Python class (opbench.errors.CudaError: an opbench.Error and a
  // RuntimeError), so one `except opbench.Error` covers driver failures too.
  py::object cuda_error = py::module_::import("opbench.errors").attr("CudaError");
  cuda_error_type = cuda_error.release().ptr();  // kept for the module's lifetime
  m.add_object("CudaError", py::reinterpret_borrow<py::object>(cuda_error_type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CudaError& e) {
      py::object exc = py::reinterpret_borrow<py::object>(cuda_error_type)(e.what());
      exc.attr("code") = e.code;
      exc.attr("function") = e.function;
      PyErr_SetObject(cuda_error_type, exc.ptr());
    }
  });

  py::class_<Context, std::shared_ptr<Context>>(
      m, "CudaContext", "The primary CUDA context of one device, with timing resources.")
      .def(py::init<int>(), py::arg("device") = 0)
      .def("info", &Context::info,
           "Device name, index, L2 size, driver versions, loading mode, maximum clocks.")
      .def("clocks", &Context::clocks, "(SM MHz, memory MHz) from NVML now, or None.")
      .def("clock_probe", &Context::clock_probe, py::arg("fn"), py::arg("stream"), py::arg("max_calls"),
           py::arg("spacing_s") = 0.005, py::arg("max_s") = 0.1, py::arg("call_s") = 0.0,
           "Clocks under the statement's load, off the timed path: (SM MHz, memory MHz, reasons or -1, "
           "settled, duty) or None.")
      .def("count_launches", &Context::count_launches, py::arg("fn"), py::arg("stream"),
           "Launches one call queues on `stream` (captured, not run), or None; sizes held blocks.")
      .def("capture_nodes", &Context::capture_nodes, py::arg("stream"),
           "Nodes of the stream capture in progress on `stream` (one torch began), or None.")
      .def("set_launches", &Context::set_launches, py::arg("launches"), py::arg("problem") = "",
           "Records a call's launches as counted elsewhere (or why they were not); sizes held blocks.")
      .def_property_readonly("host_s_per_call", &Context::host_s_per_call,
                             "Least host seconds a call took to queue (0 before any block).")
      .def_property_readonly("launch_count_problem", &Context::launch_count_problem,
                             "Why count_launches returned None.")
      .def_property_readonly("flush_method", &Context::flush_method,
                             "'read' (the L2 is left clean) or 'write (why)'.")
      .def_property_readonly("clock_problem", &Context::clock_problem, "Why clocks() returned None.")
      .def("event_quantum", &Context::event_quantum, py::arg("stream") = 0,
           "Seconds between adjacent event timestamps on this device (measured once per process), or None.")
      .def("set_flush_bytes", &Context::set_flush_bytes, py::arg("bytes"),
           "Allocate the cold-L2 flush buffer once (0 frees it).")
      .def_property_readonly("flush_bytes", &Context::flush_bytes)
      .def_property("hold", &Context::hold_enabled, &Context::set_hold,
                    "Queue each block behind a host-released wait so the GPU runs it back to back.")
      .def_property_readonly("hold_problem", &Context::hold_problem, "Why the hold is off ('' while on).")
      .def_property("hold_chunk", &Context::hold_chunk, &Context::set_hold_chunk,
                    "Calls per held block; setting it caps blocks on this device for the process.")
      .def_readwrite("watchdog_s", &Context::watchdog_s)
      .def("run", &Context::run, py::arg("fn"), py::arg("number"), py::arg("stream") = 0,
           py::arg("per_call") = false, py::arg("flush") = false, py::arg("hold") = true,
           "Call fn() `number` times on `stream`; device seconds per event window (one per call when "
           "per_call, else per block). flush memsets the L2 flush buffer before each call's window; "
           "hold=False runs unheld.")
      .def(
          "event", [](std::shared_ptr<Context> self) { return std::make_unique<Event>(std::move(self)); },
          "A new CUDA event on this context.");

  py::class_<Event>(m, "CudaEvent", "A CUDA event (created with CudaContext.event()).")
      .def("record", &Event::record, py::arg("stream") = 0, "Record on a stream handle (int).")
      .def("synchronize", &Event::synchronize, "Wait for the event; raises the CUDA error of faulted work.")
      .def("query", &Event::query, "True when the work before the event has finished.")
      .def("elapsed_time", &Event::elapsed_time, py::arg("end"), "Milliseconds from this event to `end`.");

  m.def(
      "_cuda_set_libraries",
      [](const std::string& libcuda, const std::string& libnvml) {
        DriverSource& s = source();
        s.libcuda = libcuda;
        s.libnvml = libnvml;
        s.current = nullptr;
      },
      py::arg("libcuda") = "libcuda.so.1", py::arg("libnvml") = "libnvidia-ml.so.1",
      "The driver and NVML libraries to load on next use (tests load a fake driver this way).");
}
