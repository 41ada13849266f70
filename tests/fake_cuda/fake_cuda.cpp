// A fake CUDA driver and NVML, as one C-ABI shared library, for tests on machines
// without a GPU. Built by the tests themselves (tests/fake_cuda/__init__.py) and
// handed to opbench through opbench._C._cuda_set_libraries(path, path), so the
// production loader (dlopen/dlsym), the timing loops and every error path run
// exactly as they do against libcuda.so.1; nothing of this ships in opbench._C.
//
// It is meant to be as unkind as hardware, not kinder:
//   * Work is queued per stream and runs on a device timeline of its own
//     (nanoseconds, exact integers). A stream behind cuStreamWaitValue32 runs
//     nothing until the host writes the flag; the "GPU" notices the write at
//     the next driver call (or while the host is blocked in one).
//   * The launch queue is finite: a command submitted to a held stream that
//     already holds `queue_depth` commands blocks the host until the hold is
//     released, as a full pushbuffer does.
//   * Kernels load lazily (CUDA >= 12.2 default): the first launch of a kernel
//     waits until the device has no queued work, so a first call made under the
//     launch hold blocks until something releases it.
//   * Event timestamps are quantised (`event_quantum_ns`, ~0.5 us on real parts),
//     and recording an event takes device time (`event_ns`).
//   * A faulting kernel sets a sticky error when it *runs*; from then on every
//     call on that device (record, launch, memset, wait, synchronize, query)
//     returns it, as a real context does.
//   * Calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT when none
//     is current on the calling thread; contexts are a per-thread stack.
//   * Events and streams belong to one device: recording on another device's
//     stream is CUDA_ERROR_INVALID_HANDLE.
//   * NVML answers only at its update period (`nvml_period_ns`): a reading is
//     the state at the last update tick, not now. At that tick it reads an idle
//     clock (and the GpuIdle reason) unless the device was running work, and a
//     clock that ramps from idle to busy over `clock_ramp_ns` after the device
//     was idle for `clock_idle_ns`; every NVML read costs host time
//     (`nvml_call_ns`). Clocks read right after a short block was released
//     show an idle or ramping GPU, exactly as nvidia-smi would.
//   * Host time: the host clock follows the real clock between driver calls
//     (a host that sleeps or runs Python lets the device run on and go idle),
//     and every driver call costs `call_ns` more. `host_real_time=0` freezes it
//     between calls, for tests that assert unheld windows exactly.
//   * Back-to-back kernels overlap by `kernel_overlap_ns` (the next one's launch
//     and ramp-up hide under the last one's tail); an event record between two
//     kernels serialises them, so per-call windows read above blocks.
//   * The legacy stream (0) synchronises implicitly with every *blocking*
//     stream of its device: work on one waits for earlier work on the other, so
//     a legacy stream held behind a wait also holds the blocking streams.
//     Non-blocking streams (torch's) are independent.
//   * The cold-L2 flush: a memset leaves `l2_bytes` of dirty lines whose
//     write-back (`writeback_bytes_per_ms`) lands in the next kernel that runs;
//     a kernel that reads the buffer (opbench's PTX read kernel, loaded through
//     cuModuleLoadData) leaves the L2 clean.
//   * Stream capture (cuStreamBeginCapture): launches are recorded, not run;
//     the legacy stream cannot be captured; a synchronize invalidates it.
//
// Test controls are the opbench_fake_* functions at the end (ctypes).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "detail/cuda_driver.h"  // the ABI (types and constants) opbench expects

using namespace opbench::cuda;

namespace {

constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
constexpr int kMaxDevices = 8;
constexpr std::uint64_t kIdleReason = 0x1;  // nvmlClocksEventReasonGpuIdle

struct Config {
  int device_count = 1;
  std::string name = "opbench fake GPU";
  std::string nvml_driver_version = "999.99.99";
  long long l2_bytes = 50LL * 1024 * 1024;
  int driver_version = 12040;
  double sm_clock_idle = 345, sm_clock_busy = 1980, sm_clock_max = 1980;
  double mem_clock_idle = 405, mem_clock_busy = 2619, mem_clock_max = 2619;
  double busy_reasons = 0;  // NVML clock-event reasons reported while busy (bitmask)
  double nvml_clocks = 1;   // 0: clock queries are NVML_ERROR_NOT_SUPPORTED
  double memset_bytes_per_ms = 1e9;
  double stream_mem_ops = 1;  // 0: cuStreamWaitValue32 is CUDA_ERROR_NOT_SUPPORTED
  double queue_depth = 1024;  // commands a held stream takes before submitting blocks
  double event_quantum_ns = 500;
  double event_ns = 40;                 // device time one event record takes
  double launch_ns = 0;                 // host time per kernel launch (launch gaps when unheld)
  double lazy_loading = 1;              // cuModuleGetLoadingMode: 1 lazy, 0 eager
  double load_ns = 0;                   // host time of loading a kernel lazily
  double load_device_ns = 0;            // device time added to a kernel's first launch
  double call_ns = 0;                   // host time of every driver call
  double host_real_time = 1;            // the host clock also advances with the real clock (0: only per call)
  double nvml_period_ns = 1e6;          // NVML's readings change only at this period
  double nvml_call_ns = 20000;          // host time of one NVML query
  double clock_ramp_ns = 2e6;           // idle -> busy clock ramp after an idle spell
  double clock_idle_ns = 20e6;          // an idle gap this long drops the clocks to idle
  double kernel_overlap_ns = 0;         // back-to-back kernels overlap by this much
  double writeback_bytes_per_ms = 1e9;  // dirty L2 lines written back by the next kernel
  double read_bytes_per_ms = 2e9;       // the L2 read kernel's rate
};

enum class Kind { Kernel, Event, Memset, Wait, Read };

struct FakeEvent {
  int device = 0;
  bool recorded = false;  // record submitted
  bool done = false;      // reached by the device
  long long t_ns = 0;
};

struct Command {
  Kind kind;
  long long ns = 0;  // device duration
  FakeEvent* event = nullptr;
  const std::uint32_t* flag = nullptr;
  std::uint32_t value = 0;
  int fault = 0;
  bool counts_as_kernel = false;
  long long seq = 0;  // submission order, for the legacy stream's implicit synchronisation
};

struct Stream {
  int device = 0;
  bool legacy = false;
  bool blocking = true;  // cuStreamCreate's default; torch's streams are non-blocking
  bool capturing = false, capture_invalid = false;
  long long captured = 0;     // launches recorded by the capture in progress
  std::deque<Command> queue;  // submitted, not yet run: only behind an unreleased wait
  long long records = 0;
};

struct Device {
  long long free_at_ns = 0;  // when the device finishes what it has started
  int sticky = 0;
  std::set<int> loaded;
  int retained = 0;
  bool last_was_kernel = false;
  bool ever_busy = false;
  long long last_kernel_ns = 0;
  long long busy_since_ns = 0, prev_since_ns = -1, prev_end_ns = -1;  // busy stretches, for NVML
  long long dirty_bytes = 0;                                          // L2 lines a memset left dirty
};

struct Stats {
  long long events_created = 0, events_live = 0, records = 0, event_syncs = 0, stream_syncs = 0;
  long long memsets = 0, memset_bytes = 0, allocs_live = 0, host_allocs_live = 0, stream_waits = 0;
  long long launches = 0, kernels = 0, queue_full_blocks = 0, load_blocks = 0, sync_blocks = 0;
  long long max_queued = 0, nvml_clock_reads = 0, loads = 0, flush_reads = 0, writebacks = 0;
  long long captures = 0;
};

struct State {
  Config cfg;
  Stats stats;
  long long host_ns = 0;
  Device dev[kMaxDevices];
  std::map<std::uintptr_t, Stream> streams;  // by handle; legacy stream 0 is one per device
  std::set<FakeEvent*> events;
  std::map<std::string, int> failures;
  std::uintptr_t next_stream = 1;
  long long next_seq = 0;
  std::chrono::steady_clock::time_point real_mark = std::chrono::steady_clock::now();
};

std::recursive_mutex mu;
State& st() {
  static State s;
  return s;
}

thread_local std::vector<int> ctx_stack;  // device of each pushed context; -1: none

int current_device() { return ctx_stack.empty() ? -1 : ctx_stack.back(); }

CUcontext ctx_handle(int d) { return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + d)); }
int ctx_device(CUcontext c) {
  const auto v = reinterpret_cast<std::uintptr_t>(c);
  return v >= 0x1000 && v < 0x1000 + kMaxDevices ? static_cast<int>(v - 0x1000) : -1;
}

// Legacy stream 0 is per device: key it by device in the high bits.
std::uintptr_t legacy_key(int d) { return (static_cast<std::uintptr_t>(d) + 1) << 48; }

Stream* find_stream(CUstream s, int device) {
  auto h = reinterpret_cast<std::uintptr_t>(s);
  if (h == 0) {
    Stream& legacy = st().streams[legacy_key(device)];
    legacy.device = device;
    legacy.legacy = true;
    return &legacy;
  }
  auto it = st().streams.find(h);
  return it == st().streams.end() ? nullptr : &it->second;
}

long long quantise(long long t) {
  const long long q = static_cast<long long>(st().cfg.event_quantum_ns);
  return q > 0 ? t - t % q : t;
}

bool flag_reached(const Command& c) { return __atomic_load_n(c.flag, __ATOMIC_ACQUIRE) >= c.value; }

// Runs one command on its device, starting no earlier than `ready_ns` (host time
// it became runnable).
void execute(Stream& s, const Command& c, long long ready_ns) {
  Device& d = st().dev[s.device];
  if (d.sticky) {  // a faulted device runs nothing more
    return;
  }
  const Config& cfg = st().cfg;
  long long start = std::max(d.free_at_ns, ready_ns);
  if (!d.ever_busy || start - d.free_at_ns >= static_cast<long long>(cfg.clock_idle_ns)) {
    d.ever_busy = true;
    d.prev_since_ns = d.busy_since_ns;  // a new busy stretch: clocks ramp from idle
    d.prev_end_ns = d.free_at_ns;
    d.busy_since_ns = start;
  }
  // The write-back of dirty lines lands in the next kernel that evicts them.
  const auto writeback = [&] {
    if (d.dirty_bytes == 0) return 0LL;
    const long long ns = std::llround(static_cast<double>(d.dirty_bytes) / cfg.writeback_bytes_per_ms * 1e6);
    d.dirty_bytes = 0;
    ++st().stats.writebacks;
    return ns;
  };
  switch (c.kind) {
    case Kind::Kernel: {
      if (d.last_was_kernel && start == d.free_at_ns)  // back to back: overlaps the last one's tail
        start -= std::min(static_cast<long long>(cfg.kernel_overlap_ns), d.last_kernel_ns);
      const long long ns = c.ns + writeback();
      d.free_at_ns = std::max(d.free_at_ns, start + ns);
      d.last_kernel_ns = ns;
      if (c.counts_as_kernel) ++st().stats.kernels;
      if (c.fault) d.sticky = c.fault;
      break;
    }
    case Kind::Read:
      d.free_at_ns = start + c.ns + writeback();
      ++st().stats.flush_reads;
      break;
    case Kind::Event:
      c.event->t_ns = start;
      c.event->done = true;
      d.free_at_ns = start + static_cast<long long>(cfg.event_ns);
      break;
    case Kind::Memset:
      d.free_at_ns = start + c.ns;
      d.dirty_bytes = std::min<long long>(c.ns > 0 ? cfg.l2_bytes : 0, cfg.l2_bytes);
      break;
    case Kind::Wait:
      d.free_at_ns = start;
      break;
  }
  d.last_was_kernel = c.kind == Kind::Kernel;
}

// The legacy stream's implicit synchronisation: a command on it waits for
// earlier commands of the device's blocking streams, and theirs for its.
bool implicitly_blocked(const Stream& s, const Command& c) {
  if (!s.legacy && !s.blocking) return false;
  for (auto& [h, o] : st().streams) {
    if (&o == &s || o.device != s.device || o.queue.empty()) continue;
    const bool other_counts = s.legacy ? (!o.legacy && o.blocking) : o.legacy;
    if (other_counts && o.queue.front().seq < c.seq) return true;
  }
  return false;
}

// The GPU's side: whatever a written flag has released runs now.
void drain_all() {
  State& S = st();
  for (bool moved = true; moved;) {  // one stream's progress may unblock another's
    moved = false;
    for (auto& [h, s] : S.streams) {
      while (!s.queue.empty()) {
        const Command& head = s.queue.front();
        if (head.kind == Kind::Wait && !flag_reached(head)) break;
        if (implicitly_blocked(s, head)) break;
        const Command c = head;
        s.queue.pop_front();
        execute(s, c, S.host_ns);
        moved = true;
      }
    }
  }
}

// Host time: each driver call costs call_ns; with host_real_time the real time
// since the last call counts too.
void advance_real() {
  State& S = st();
  if (S.cfg.host_real_time == 0) return;
  const auto now = std::chrono::steady_clock::now();
  S.host_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(now - S.real_mark).count();
  S.real_mark = now;
}
void advance_host() {
  advance_real();
  st().host_ns += static_cast<long long>(st().cfg.call_ns);
}

bool device_has_queued_work(int device) {
  for (auto& [h, s] : st().streams)
    if (s.device == device && !s.queue.empty()) return true;
  return false;
}

// Blocks the calling host thread (lock released) until `done()`; the GPU keeps
// noticing flag writes meanwhile. Only the flag's writer (the timing loop or
// its watchdog thread) can end such a wait, exactly as on hardware.
template <class Done>
void block_until(std::unique_lock<std::recursive_mutex>& lk, Done done, long long* counter) {
  drain_all();
  if (done()) return;
  if (counter) ++*counter;
  while (true) {
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lk.lock();
    advance_real();
    drain_all();
    if (done()) return;
  }
}

// Submits `c` to stream `s` from the host: runs it at once, or queues it behind a hold.
// A capturing stream records the command instead (event records make no node).
void submit(std::unique_lock<std::recursive_mutex>& lk, Stream& s, Command c) {
  State& S = st();
  if (s.capturing) {
    if (c.kind != Kind::Event) ++s.captured;
    return;
  }
  c.seq = S.next_seq++;
  const auto depth = static_cast<std::size_t>(S.cfg.queue_depth);
  if (!s.queue.empty() && depth > 0 && s.queue.size() >= depth) {
    block_until(lk, [&] { return s.queue.size() < depth; }, &S.stats.queue_full_blocks);
  }
  if (s.queue.empty() && !(c.kind == Kind::Wait && !flag_reached(c)) && !implicitly_blocked(s, c)) {
    execute(s, c, S.host_ns);
    return;
  }
  s.queue.push_back(c);
  S.stats.max_queued = std::max<long long>(S.stats.max_queued, static_cast<long long>(s.queue.size()));
}

int injected(const char* fn) {
  auto it = st().failures.find(fn);
  return it == st().failures.end() ? CUDA_SUCCESS : it->second;
}

// Entry: lock, let the GPU notice released flags, apply injected failures.
#define FAKE_ENTER(name)                         \
  std::unique_lock<std::recursive_mutex> lk(mu); \
  advance_host();                                \
  drain_all();                                   \
  if (int injected_rc = injected(name)) return injected_rc

// Calls that act on the current context.
#define FAKE_NEED_CONTEXT()                       \
  const int cur = current_device();               \
  if (cur < 0) return CUDA_ERROR_INVALID_CONTEXT; \
  if (st().dev[cur].sticky) return st().dev[cur].sticky

struct ErrorText {
  int code;
  const char* name;
  const char* text;
};
const ErrorText* find_error(CUresult r) {
  static const ErrorText table[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
      {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
      {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
  };
  for (const auto& e : table)
    if (e.code == r) return &e;
  return nullptr;
}

}  // namespace

extern "C" {

// --- the driver API ------------------------------------------------------------

CUresult cuInit(unsigned) {
  FAKE_ENTER("cuInit");
  return st().cfg.device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
CUresult cuDriverGetVersion(int* v) {
  FAKE_ENTER("cuDriverGetVersion");
  *v = st().cfg.driver_version;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* n) {
  FAKE_ENTER("cuDeviceGetCount");
  *n = st().cfg.device_count;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= st().cfg.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice) {
  FAKE_ENTER("cuDeviceGetAttribute");
  if (attr == 16) {  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    *v = 132;
    return CUDA_SUCCESS;
  }
  if (attr != CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) return CUDA_ERROR_INVALID_VALUE;
  *v = static_cast<int>(st().cfg.l2_bytes);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* out, int len, CUdevice) {
  FAKE_ENTER("cuDeviceGetName");
  std::snprintf(out, static_cast<std::size_t>(len), "%s", st().cfg.name.c_str());
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetPCIBusId(char* out, int len, CUdevice d) {
  FAKE_ENTER("cuDeviceGetPCIBusId");
  std::snprintf(out, static_cast<std::size_t>(len), "0000:%02x:00.0", d + 1);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  *c = ctx_handle(d);
  ++st().dev[d].retained;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease");
  --st().dev[d].retained;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext c) {
  FAKE_ENTER("cuCtxSetCurrent");
  const int d = c == nullptr ? -1 : ctx_device(c);
  if (c != nullptr && d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_stack.empty())
    ctx_stack.push_back(d);
  else
    ctx_stack.back() = d;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* c) {
  FAKE_ENTER("cuCtxGetCurrent");
  *c = current_device() < 0 ? nullptr : ctx_handle(current_device());
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) {
  FAKE_ENTER("cuCtxPushCurrent");
  const int d = ctx_device(c);
  if (d < 0 || st().dev[d].retained <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  ctx_stack.push_back(d);
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext* c) {
  FAKE_ENTER("cuCtxPopCurrent");
  if (ctx_stack.empty() || ctx_stack.back() < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (c) *c = ctx_handle(ctx_stack.back());
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult cuModuleGetLoadingMode(int* mode) {
  FAKE_ENTER("cuModuleGetLoadingMode");
  *mode = st().cfg.lazy_loading != 0 ? 2 : 1;  // CU_MODULE_LAZY_LOADING : CU_MODULE_EAGER_LOADING
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  FAKE_ENTER("cuEventCreate");
  FAKE_NEED_CONTEXT();
  auto* ev = new FakeEvent;
  ev->device = cur;
  st().events.insert(ev);
  *e = reinterpret_cast<CUevent>(ev);
  ++st().stats.events_created;
  ++st().stats.events_live;
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
  FAKE_ENTER("cuEventRecord");
  FAKE_NEED_CONTEXT();
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != ev->device || stream->device != cur)
    return CUDA_ERROR_INVALID_HANDLE;
  ev->recorded = true;
  ev->done = false;
  ++st().stats.records;
  ++stream->records;
  Command c{Kind::Event};
  c.event = ev;
  submit(lk, *stream, c);
  return CUDA_SUCCESS;
}
CUresult cuEventQuery(CUevent e) {
  FAKE_ENTER("cuEventQuery");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (st().dev[ev->device].sticky) return st().dev[ev->device].sticky;
  // Reached only once the host clock has passed its timestamp, not when queued.
  return !ev->recorded || (ev->done && ev->t_ns <= st().host_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
  FAKE_ENTER("cuEventSynchronize");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Device& d = st().dev[ev->device];
  block_until(lk, [&] { return d.sticky || !ev->recorded || ev->done; }, &st().stats.sync_blocks);
  ++st().stats.event_syncs;
  if (d.sticky) return d.sticky;
  if (ev->recorded) st().host_ns = std::max(st().host_ns, ev->t_ns);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  FAKE_ENTER("cuEventElapsedTime");
  auto* start = reinterpret_cast<FakeEvent*>(a);
  auto* stop = reinterpret_cast<FakeEvent*>(b);
  if (!st().events.count(start) || !st().events.count(stop)) return CUDA_ERROR_INVALID_HANDLE;
  if (st().dev[start->device].sticky) return st().dev[start->device].sticky;
  if (!start->recorded || !stop->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->done || !stop->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(quantise(stop->t_ns) - quantise(start->t_ns)) * 1e-6);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  FAKE_ENTER("cuEventDestroy");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.erase(ev)) return CUDA_ERROR_INVALID_HANDLE;  // from before a reset: leaked
  for (auto& [h, s] : st().streams)  // a destroyed event still queued is simply forgotten
    for (auto& c : s.queue)
      if (c.event == ev) c = Command{Kind::Kernel};  // a no-op in its place
  delete ev;
  --st().stats.events_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  FAKE_ENTER("cuStreamSynchronize");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capturing) {  // waiting for work that is only being recorded: the capture is void
    stream->capture_invalid = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  Device& d = st().dev[stream->device];
  block_until(lk, [&] { return d.sticky || stream->queue.empty(); }, &st().stats.sync_blocks);
  ++st().stats.stream_syncs;
  if (d.sticky) return d.sticky;
  st().host_ns = std::max(st().host_ns, d.free_at_ns);
  return CUDA_SUCCESS;
}
CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, std::uint32_t value, unsigned) {
  FAKE_ENTER("cuStreamWaitValue32");
  if (st().cfg.stream_mem_ops == 0) return CUDA_ERROR_NOT_SUPPORTED;
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  Command c{Kind::Wait};
  c.flag = reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(addr));
  c.value = value;
  ++st().stats.stream_waits;
  submit(lk, *stream, c);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, std::size_t) {
  FAKE_ENTER("cuMemAlloc");
  FAKE_NEED_CONTEXT();
  // Fake device memory is never touched: no real allocation of the size asked.
  *p = reinterpret_cast<CUdeviceptr>(new char[1]);
  ++st().stats.allocs_live;
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_ENTER("cuMemFree");
  delete[] reinterpret_cast<char*>(static_cast<std::uintptr_t>(p));
  --st().stats.allocs_live;
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, std::size_t bytes, CUstream s) {
  FAKE_ENTER("cuMemsetD8Async");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  Command c{Kind::Memset};
  c.ns = std::llround(static_cast<double>(bytes) / st().cfg.memset_bytes_per_ms * 1e6);
  ++st().stats.memsets;
  st().stats.memset_bytes += static_cast<long long>(bytes);
  submit(lk, *stream, c);
  return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture_v2(CUstream s, int) {
  FAKE_ENTER("cuStreamBeginCapture");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (stream->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  stream->capturing = true;
  stream->capture_invalid = false;
  stream->captured = 0;
  ++st().stats.captures;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  FAKE_ENTER("cuStreamEndCapture");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || !stream->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  stream->capturing = false;
  *g = nullptr;
  if (stream->capture_invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *g = reinterpret_cast<CUgraph>(new long long(stream->captured));
  return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph g, void*, std::size_t* n) {
  FAKE_ENTER("cuGraphGetNodes");
  *n = static_cast<std::size_t>(*reinterpret_cast<long long*>(g));
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) {
  FAKE_ENTER("cuGraphDestroy");
  delete reinterpret_cast<long long*>(g);
  return CUDA_SUCCESS;
}
// Modules: only opbench's L2 read kernel exists (any image naming it loads).
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  FAKE_ENTER("cuModuleLoadData");
  FAKE_NEED_CONTEXT();
  if (std::strstr(static_cast<const char*>(image), ".entry opbench_l2_read") == nullptr) return 218;
  *m = reinterpret_cast<CUmodule>(static_cast<std::uintptr_t>(0x3000));
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  FAKE_ENTER("cuModuleGetFunction");
  if (std::strcmp(name, "opbench_l2_read") != 0) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(static_cast<std::uintptr_t>(0x3001));
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule) {
  FAKE_ENTER("cuModuleUnload");
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream s, void** params, void**) {
  FAKE_ENTER("cuLaunchKernel");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  const auto units = *static_cast<unsigned long long*>(params[1]);  // 16-byte loads
  Command c{Kind::Read};
  c.ns = std::llround(static_cast<double>(units * 16) / st().cfg.read_bytes_per_ms * 1e6);
  ++st().stats.launches;
  submit(lk, *stream, c);
  return CUDA_SUCCESS;
}
CUresult cuMemHostAlloc(void** p, std::size_t bytes, unsigned) {
  FAKE_ENTER("cuMemHostAlloc");
  FAKE_NEED_CONTEXT();
  *p = std::calloc(1, bytes < 64 ? 64 : bytes);
  ++st().stats.host_allocs_live;
  return CUDA_SUCCESS;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned) {
  FAKE_ENTER("cuMemHostGetDevicePointer");
  *d = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult cuMemFreeHost(void* p) {
  FAKE_ENTER("cuMemFreeHost");
  // A wait still queued on this word would read freed memory: the real driver
  // has the same hazard, so opbench must release before freeing. Check it.
  for (auto& [h, s] : st().streams)
    for (auto& c : s.queue)
      if (c.kind == Kind::Wait && c.flag == p) std::abort();
  std::free(p);
  --st().stats.host_allocs_live;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char** out) {
  const ErrorText* e = find_error(r);
  *out = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult r, const char** out) {
  const ErrorText* e = find_error(r);
  *out = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// --- NVML --------------------------------------------------------------------------

constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;

nvmlReturn_t nvmlInit_v2() {
  FAKE_ENTER("nvmlInit");
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus, nvmlDevice_t* d) {
  FAKE_ENTER("nvmlDeviceGetHandleByPciBusId");
  unsigned domain = 0, b = 0;
  if (std::sscanf(bus, "%x:%x", &domain, &b) != 2 || b < 1 || b > kMaxDevices) return 6;  // NOT_FOUND
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(0x2000 + b - 1));
  return NVML_SUCCESS;
}
static int nvml_device(nvmlDevice_t d) {
  return static_cast<int>(reinterpret_cast<std::uintptr_t>(d) - 0x2000);
}
// What NVML last sampled, at its most recent update tick: busy or not, the
// SM clock ramp's progress (0..1).
struct Reading {
  bool busy;
  double ramp;
};
static Reading reading(int device) {
  const State& S = st();
  const Device& d = S.dev[device];
  const auto period = std::max(1LL, static_cast<long long>(S.cfg.nvml_period_ns));
  const long long tick = S.host_ns - S.host_ns % period;
  if (d.ever_busy && tick > d.busy_since_ns && tick < d.free_at_ns) {
    const double ramp =
        S.cfg.clock_ramp_ns > 0 ? static_cast<double>(tick - d.busy_since_ns) / S.cfg.clock_ramp_ns : 1;
    return {true, std::min(1.0, ramp)};
  }
  if (tick > d.prev_since_ns && tick < d.prev_end_ns) return {true, 1.0};
  return {false, 0.0};
}
static double clock_now(double idle, double busy, const Reading& r) {
  return r.busy ? idle + (busy - idle) * r.ramp : idle;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  FAKE_ENTER("nvmlDeviceGetClockInfo");
  if (st().cfg.nvml_clocks == 0) return NVML_ERROR_NOT_SUPPORTED;
  const Config& c = st().cfg;
  st().host_ns += static_cast<long long>(c.nvml_call_ns);
  const Reading r = reading(nvml_device(d));
  const double v = type == NVML_CLOCK_SM ? clock_now(c.sm_clock_idle, c.sm_clock_busy, r)
                                         : clock_now(c.mem_clock_idle, c.mem_clock_busy, r);
  *mhz = static_cast<unsigned>(v);
  ++st().stats.nvml_clock_reads;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t, int type, unsigned* mhz) {
  FAKE_ENTER("nvmlDeviceGetMaxClockInfo");
  if (st().cfg.nvml_clocks == 0) return NVML_ERROR_NOT_SUPPORTED;
  *mhz = static_cast<unsigned>(type == NVML_CLOCK_SM ? st().cfg.sm_clock_max : st().cfg.mem_clock_max);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* reasons) {
  FAKE_ENTER("nvmlDeviceGetCurrentClocksEventReasons");
  st().host_ns += static_cast<long long>(st().cfg.nvml_call_ns);
  *reasons =
      reading(nvml_device(d)).busy ? static_cast<unsigned long long>(st().cfg.busy_reasons) : kIdleReason;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned len) {
  std::snprintf(out, len, "%s", st().cfg.nvml_driver_version.c_str());
  return NVML_SUCCESS;
}
const char* nvmlErrorString(nvmlReturn_t r) {
  return r == NVML_ERROR_NOT_SUPPORTED ? "Not Supported" : "Unknown Error";
}

// --- test controls (ctypes) ------------------------------------------------------

void opbench_fake_reset() {
  std::lock_guard<std::recursive_mutex> lk(mu);
  State& S = st();
  // Events of an earlier test that are still alive stay valid memory: they are
  // only forgotten (their destroy then fails harmlessly).
  S.events.clear();
  S = State{};
  ctx_stack.clear();
}

#define FAKE_NUMBER(key) \
  if (k == #key) {       \
    S.cfg.key = value;   \
    return 0;            \
  }

int opbench_fake_set(const char* key, double value) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  State& S = st();
  const std::string k = key;
  if (k == "device_count") {
    if (value < 0 || value > kMaxDevices) return -2;
    S.cfg.device_count = static_cast<int>(value);
    return 0;
  }
  if (k == "l2_bytes") {
    S.cfg.l2_bytes = static_cast<long long>(value);
    return 0;
  }
  if (k == "driver_version") {
    S.cfg.driver_version = static_cast<int>(value);
    return 0;
  }
  // clang-format off: one setting a line (the macro expands to a whole if statement)
  FAKE_NUMBER(sm_clock_idle)
  FAKE_NUMBER(sm_clock_busy)
  FAKE_NUMBER(sm_clock_max)
  FAKE_NUMBER(mem_clock_idle)
  FAKE_NUMBER(mem_clock_busy)
  FAKE_NUMBER(mem_clock_max)
  FAKE_NUMBER(busy_reasons)
  FAKE_NUMBER(nvml_clocks)
  FAKE_NUMBER(memset_bytes_per_ms)
  FAKE_NUMBER(stream_mem_ops)
  FAKE_NUMBER(queue_depth)
  FAKE_NUMBER(event_quantum_ns)
  FAKE_NUMBER(event_ns)
  FAKE_NUMBER(launch_ns)
  FAKE_NUMBER(lazy_loading)
  FAKE_NUMBER(load_ns)
  FAKE_NUMBER(load_device_ns)
  FAKE_NUMBER(call_ns)
  FAKE_NUMBER(host_real_time)
  FAKE_NUMBER(nvml_period_ns)
  FAKE_NUMBER(nvml_call_ns)
  FAKE_NUMBER(clock_ramp_ns)
  FAKE_NUMBER(clock_idle_ns)
  FAKE_NUMBER(kernel_overlap_ns)
  FAKE_NUMBER(writeback_bytes_per_ms)
  FAKE_NUMBER(read_bytes_per_ms)
  // clang-format on
  return -1;
}

int opbench_fake_set_text(const char* key, const char* value) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  const std::string k = key;
  if (k == "name")
    st().cfg.name = value;
  else if (k == "nvml_driver_version")
    st().cfg.nvml_driver_version = value;
  else
    return -1;
  return 0;
}

/// A kernel of `ms` device milliseconds on `stream`, from kernel `kernel` (0: a
/// kernel loaded long ago; others load lazily on first launch); `fault` != 0
/// makes it fault with that code when it runs. Returns what a launch returns.
int opbench_fake_launch(std::uintptr_t stream, int kernel, double ms, int fault) {
  FAKE_ENTER("launch");
  FAKE_NEED_CONTEXT();
  State& S = st();
  Stream* s = find_stream(reinterpret_cast<CUstream>(stream), cur);
  if (s == nullptr || s->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  long long ns = std::llround(ms * 1e6);
  if (kernel != 0 && S.cfg.lazy_loading != 0 && !S.dev[cur].loaded.count(kernel)) {
    // Loading a module waits for the device to finish what is queued on it.
    block_until(lk, [&] { return S.dev[cur].sticky || !device_has_queued_work(cur); }, &S.stats.load_blocks);
    if (S.dev[cur].sticky) return S.dev[cur].sticky;
    S.host_ns += static_cast<long long>(S.cfg.load_ns);
    ns += static_cast<long long>(S.cfg.load_device_ns);
    ++S.stats.loads;
  }
  if (kernel != 0) S.dev[cur].loaded.insert(kernel);
  S.host_ns += static_cast<long long>(S.cfg.launch_ns);
  ++S.stats.launches;
  Command c{Kind::Kernel};
  c.ns = ns;
  c.fault = fault;
  c.counts_as_kernel = true;
  submit(lk, *s, c);
  return CUDA_SUCCESS;
}

/// Starts the "max_queued" statistic afresh.
void opbench_fake_reset_max_queued() {
  std::lock_guard<std::recursive_mutex> lk(mu);
  st().stats.max_queued = 0;
}

void opbench_fake_fail(const char* function, int code) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  if (code == 0)
    st().failures.erase(function);
  else
    st().failures[function] = code;
}

/// A counter or clock of the fake; false for an unknown name.
bool opbench_fake_stat(const char* name, long long* out) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  const State& S = st();
  const Stats& s = S.stats;
  const std::map<std::string, long long> all = {
      {"events_created", s.events_created},
      {"events_live", s.events_live},
      {"records", s.records},
      {"event_syncs", s.event_syncs},
      {"stream_syncs", s.stream_syncs},
      {"memsets", s.memsets},
      {"memset_bytes", s.memset_bytes},
      {"allocs_live", s.allocs_live},
      {"host_allocs_live", s.host_allocs_live},
      {"stream_waits", s.stream_waits},
      {"launches", s.launches},
      {"kernels", s.kernels},
      {"loads", s.loads},
      {"queue_full_blocks", s.queue_full_blocks},
      {"load_blocks", s.load_blocks},
      {"sync_blocks", s.sync_blocks},
      {"max_queued", s.max_queued},
      {"nvml_clock_reads", s.nvml_clock_reads},
      {"flush_reads", s.flush_reads},
      {"writebacks", s.writebacks},
      {"captures", s.captures},
      {"host_ns", S.host_ns},
      {"device_ns", S.dev[0].free_at_ns},
      {"contexts_retained",
       [&] {
         long long n = 0;
         for (const Device& d : S.dev) n += d.retained;
         return n;
       }()},
      {"current_device", current_device()},
  };
  auto it = all.find(name);
  if (it == all.end()) return false;
  *out = it->second;
  return true;
}

/// A new stream on `device`; its handle. Non-blocking as torch.cuda.Stream makes
/// them, or blocking (cuStreamCreate's default: synchronises with the legacy stream).
std::uintptr_t opbench_fake_stream_create(int device, int blocking) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  const std::uintptr_t h = 0x10000 + st().next_stream++;
  st().streams[h].device = device;
  st().streams[h].blocking = blocking != 0;
  return h;
}

/// Commands submitted to `stream` that have not run yet (-1: no such stream).
long long opbench_fake_pending(std::uintptr_t stream, int device) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  drain_all();
  Stream* s = find_stream(reinterpret_cast<CUstream>(stream), device);
  return s ? static_cast<long long>(s->queue.size()) : -1;
}

/// Events recorded on `stream` (0: device `device`'s legacy stream).
long long opbench_fake_stream_records(std::uintptr_t stream, int device) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  Stream* s = find_stream(reinterpret_cast<CUstream>(stream), device);
  return s ? s->records : -1;
}

/// What cudaSetDevice does: makes `device`'s primary context current (-1: none).
void opbench_fake_set_current(int device) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  if (ctx_stack.empty())
    ctx_stack.push_back(device);
  else
    ctx_stack.back() = device;
}

}  // extern "C"
