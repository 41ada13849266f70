// A fake CUDA driver and NVML, as one C-ABI shared library, for tests on machines
// without a GPU. Built by the tests themselves (tests/fake_cuda/__init__.py) and
// handed to opbench through opbench._C._cuda_set_libraries(path, path), so the
// production loader (dlopen/dlsym), the timing loops and every error path run
// exactly as they do against libcuda.so.1; nothing of this ships in opbench._C.
//
// It is meant to be as unkind as hardware, not kinder. Its defaults are the
// hardware's; a test suite that asserts device times exactly turns individual
// behaviours off through FakeCuda.defaults, and the tests of each behaviour turn
// it back on.
//   * Work is queued per stream and runs on a device timeline of its own
//     (nanoseconds, exact integers). A stream behind cuStreamWaitValue32 runs
//     nothing until the host writes the flag; the "GPU" notices the write at
//     the next driver call (or while the host is blocked in one).
//   * Streams share hardware connections (`connections`, as
//     CUDA_DEVICE_MAX_CONNECTIONS, 8): streams are spread over them round-robin
//     (the legacy stream on the first), and a connection runs its commands in
//     submission order, so a stream held behind a wait also holds every later
//     command of the other streams on its connection.
//   * The launch queue is finite: a command submitted to a connection that
//     already holds `queue_depth` queued commands blocks the host until the
//     queue drains, as a full pushbuffer does.
//   * Kernels load lazily (CUDA >= 12.2 default): the first launch of a kernel
//     waits until the device has no queued work, so a first call made under the
//     launch hold blocks until something releases it.
//   * Frees synchronise: cuMemFree, cuMemFreeHost and cuModuleUnload wait until
//     the device has no queued work (a free inside a held block blocks).
//   * Event timestamps come from a timer that ticks every `event_quantum_ns`
//     (~0.5 us on real parts), at a phase of its own and with each tick up to
//     `event_jitter_ns` off its nominal time: an elapsed time is a difference of
//     two ticks, never an exact multiple of the step. Recording an event takes
//     device time (`event_ns`).
//   * A kernel that follows another starts `dependent_gap_ns` after it ends (the
//     front end's launch latency), less `kernel_overlap_ns` (its ramp-up hidden
//     under the last one's tail); after an event record the gap is whole (the
//     record serialises them). A kernel runs slower at a lower SM clock: its time
//     scales with sm_clock_max / the clock it starts at (ramping up from idle
//     after an idle spell, then `sm_clock_busy`).
//   * A faulting kernel sets a sticky error when it *runs*; from then on every
//     call on that device (record, launch, memset, wait, synchronize, query)
//     returns it, as a real context does.
//   * Calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT when none
//     is current on the calling thread; contexts are a per-thread stack.
//   * Events and streams belong to one device: recording on another device's
//     stream is CUDA_ERROR_INVALID_HANDLE.
//   * NVML answers only at its update period (`nvml_period_ns`): a reading is
//     what the GPU did over the last period before its update tick. The SM clock
//     ramps from idle to busy over `clock_ramp_ns` after the device was idle for
//     `clock_idle_ns`; a GPU kept busy under half of the period reads a clock
//     lowered in proportion (a launch-bound loop reads half-idle clocks); the
//     reasons are the busy reasons (`busy_reasons`, any combination of bits)
//     combined with GpuIdle when the GPU was idle for almost all of it. Every
//     NVML query costs host time (`nvml_call_ns`).
//   * Host time: the host clock follows the real clock between driver calls
//     (a host that sleeps or runs Python lets the device run on and go idle),
//     and every cost the fake charges the host (`call_ns`, `launch_ns`,
//     `load_ns`, `nvml_call_ns`) is spent in real time. `host_real_time=0`
//     freezes it between calls and charges the costs to the fake clock alone,
//     for tests that assert unheld windows exactly.
//   * The legacy stream (0) synchronises implicitly with every *blocking*
//     stream of its device: work on one waits for earlier work on the other, so
//     a legacy stream held behind a wait also holds the blocking streams.
//     Non-blocking streams (torch's) are independent.
//   * The cold-L2 flush: a memset leaves `l2_bytes` of dirty lines whose
//     write-back (`writeback_bytes_per_ms`) lands in the next kernel that runs;
//     a kernel that reads the buffer (opbench's PTX read kernel, loaded through
//     cuModuleLoadData, which checks that the image is PTX it could compile)
//     leaves the L2 clean.
//   * Stream capture (cuStreamBeginCapture) records work into a graph rather
//     than running it: an event recorded in the capture and waited for by
//     another stream brings that stream into the capture (and it must be waited
//     for again before the capture ends: CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
//     waiting for an event from outside the capture, synchronizing, a launch on
//     the legacy stream while a blocking stream captures, and (in global mode)
//     allocating or freeing invalidate it. Work on streams outside the capture
//     runs. Graphs are instantiated and launched as one command, their first
//     launch uploading them (`graph_upload_ns`).
//
// Test controls are the opbench_fake_* functions at the end (ctypes).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "detail/cuda_driver.h"  // the ABI (types and constants) opbench expects

using namespace opbench::cuda;

namespace {

constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;
constexpr int kMaxDevices = 8;
constexpr int kCaptureModeGlobal = 0;
constexpr std::uint64_t kIdleReason = 0x1;  // nvmlClocksEventReasonGpuIdle
constexpr std::size_t kKernelLog = 1 << 16;

struct Config {
  int device_count = 1;
  std::string name = "opbench fake GPU";
  std::string nvml_driver_version = "999.99.99";
  long long l2_bytes = 50LL * 1024 * 1024;
  int driver_version = 12040;
  double compute_capability = 90;  // sm_90 (H100, H200): the newest PTX target it compiles
  double sm_clock_idle = 345, sm_clock_busy = 1980, sm_clock_max = 1980;
  double mem_clock_idle = 405, mem_clock_busy = 2619, mem_clock_max = 2619;
  double busy_reasons = 0;          // NVML clock-event reasons reported while busy (bitmask)
  double nvml_clocks = 1;           // 0: clock queries are NVML_ERROR_NOT_SUPPORTED
  double clock_scales_kernels = 1;  // kernels run slower at lower SM clocks
  double memset_bytes_per_ms = 1e9;
  double stream_mem_ops = 1;  // 0: cuStreamWaitValue32 is CUDA_ERROR_NOT_SUPPORTED
  double queue_depth = 1024;  // commands a connection takes before submitting blocks
  double connections = 8;     // hardware connections streams share (CUDA_DEVICE_MAX_CONNECTIONS)
  double event_quantum_ns = 500;
  double event_jitter_ns = 24;          // each timer tick lands up to this far off its nominal time
  double event_phase_ns = 137;          // the timer's ticks against the device clock's zero
  double event_ns = 40;                 // device time one event record takes
  double dependent_gap_ns = 1000;       // a kernel after a kernel or record starts this much later
  double kernel_overlap_ns = 0;         // ...less this after a kernel (ramp-up under the last one's tail)
  double launch_ns = 0;                 // host time per kernel launch (launch gaps when unheld)
  double lazy_loading = 1;              // cuModuleGetLoadingMode: 1 lazy, 0 eager
  double load_ns = 0;                   // host time of loading a kernel lazily
  double load_device_ns = 0;            // device time added to a kernel's first launch
  double call_ns = 0;                   // host time of every driver call
  double host_real_time = 1;            // the host clock is the real clock (0: only the charged costs)
  double nvml_period_ns = 1e6;          // NVML's readings change only at this period
  double nvml_call_ns = 20000;          // host time of one NVML query
  double clock_ramp_ns = 2e6;           // idle -> busy clock ramp after an idle spell
  double clock_idle_ns = 20e6;          // an idle gap this long drops the clocks to idle
  double writeback_bytes_per_ms = 1e9;  // dirty L2 lines written back by the next kernel
  double read_bytes_per_ms = 2e9;       // the L2 read kernel's rate
  double graph_upload_ns = 0;           // device time of a graph's first launch (its upload)
  double graph_node_gap_ns = 200;       // between the kernels of one graph (no launch between them)
};

enum class Kind { Kernel, Event, Memset, Wait, WaitEvent, Read, Graph };

struct Capture;

struct FakeEvent {
  int device = 0;
  bool recorded = false;  // record submitted
  bool done = false;      // reached by the device
  long long t_ns = 0;
  std::shared_ptr<Capture> capture;  // recorded inside this capture (never reached by the device)
  std::uintptr_t recorded_on = 0;    // ...on this stream,
  long long capture_nodes = 0;       // ...after that stream's first this many nodes
};

struct Node {
  Kind kind;
  long long ns;
};

struct FakeGraph {
  std::vector<Node> nodes;
};

struct FakeGraphExec {
  std::vector<Node> nodes;
  bool uploaded = false;
};

struct Command {
  Kind kind;
  long long ns = 0;  // device duration
  FakeEvent* event = nullptr;
  const std::uint32_t* flag = nullptr;
  std::uint32_t value = 0;
  int fault = 0;
  bool counts_as_kernel = false;
  FakeGraphExec* exec = nullptr;
  long long seq = 0;            // submission order (connections, the legacy stream's synchronisation)
  long long submitted_ns = -1;  // host time it was submitted, when only other streams held it back
};

// One stream capture in progress: the origin stream and those it brought in.
struct Capture {
  int mode = 0;
  CUresult invalid = CUDA_SUCCESS;
  FakeGraph graph;                           // what was captured so far
  std::map<std::uintptr_t, bool> joined;     // streams brought in -> waited for since their last node
  std::map<std::uintptr_t, long long> last;  // stream -> node count after its last node
};

struct Stream {
  int device = 0;
  int connection = 0;
  bool legacy = false;
  bool blocking = true;  // cuStreamCreate's default; torch's streams are non-blocking
  std::shared_ptr<Capture> capture;
  std::uintptr_t capture_origin = 0;  // the stream whose cuStreamBeginCapture started `capture`
  std::deque<Command> queue;  // submitted, not yet run: behind a wait, another stream or the connection
  long long records = 0;
};

struct Device {
  long long free_at_ns = 0;  // when the device finishes what it has started
  int sticky = 0;
  std::set<int> loaded;
  int retained = 0;
  Kind last_kind = Kind::Wait;
  bool ever_busy = false;
  long long last_kernel_ns = 0;
  long long busy_since_ns = 0;                       // the busy stretch the clock ramps in
  std::deque<std::pair<long long, long long>> busy;  // recent busy intervals (device ns), for NVML
  long long dirty_bytes = 0;                         // L2 lines a memset left dirty
};

struct Stats {
  long long events_created = 0, events_live = 0, records = 0, event_syncs = 0, stream_syncs = 0;
  long long memsets = 0, memset_bytes = 0, allocs_live = 0, host_allocs_live = 0, stream_waits = 0;
  long long launches = 0, kernels = 0, queue_full_blocks = 0, load_blocks = 0, sync_blocks = 0;
  long long max_queued = 0, nvml_clock_reads = 0, loads = 0, flush_reads = 0, writebacks = 0;
  long long captures = 0, captured_nodes = 0, free_blocks = 0, graph_launches = 0, graph_uploads = 0;
  long long event_waits = 0, connection_stall_ns = 0, module_loads = 0;
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
  std::vector<std::pair<long long, long long>> kernel_log;  // (start, end) of device 0's kernels
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
    legacy.connection = 0;
    return &legacy;
  }
  auto it = st().streams.find(h);
  return it == st().streams.end() ? nullptr : &it->second;
}

std::uintptr_t handle_of(const Stream& s) {
  for (auto& [h, o] : st().streams)
    if (&o == &s) return h;
  return 0;
}

// The event timer: ticks at phase + k * quantum, each up to `jitter` off (a
// fixed pseudo-random offset per tick); a timestamp is the last tick reached.
long long tick_at(long long k) {
  const Config& c = st().cfg;
  const auto q = static_cast<long long>(c.event_quantum_ns);
  const long long j =
      std::min(static_cast<long long>(c.event_jitter_ns), (q - 1) / 2);  // ticks stay in order
  std::uint64_t h = static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  const long long off = j > 0 ? static_cast<long long>(h % static_cast<std::uint64_t>(2 * j + 1)) - j : 0;
  return static_cast<long long>(c.event_phase_ns) + k * q + off;
}

long long timestamp(long long t) {
  const auto q = static_cast<long long>(st().cfg.event_quantum_ns);
  if (q <= 0) return t;
  const auto phase = static_cast<long long>(st().cfg.event_phase_ns);
  long long k = (t - phase) >= 0 ? (t - phase) / q : -((phase - t + q - 1) / q);
  while (tick_at(k + 1) <= t) ++k;
  while (tick_at(k) > t) --k;
  return tick_at(k);
}

bool flag_reached(const Command& c) { return __atomic_load_n(c.flag, __ATOMIC_ACQUIRE) >= c.value; }

// The SM clock at device time t: ramping up from idle at the start of a busy
// stretch, then the busy clock.
double sm_clock_at(const Device& d, long long t) {
  const Config& c = st().cfg;
  if (c.clock_ramp_ns <= 0 || t - d.busy_since_ns >= c.clock_ramp_ns) return c.sm_clock_busy;
  const double f = std::max(0.0, static_cast<double>(t - d.busy_since_ns) / c.clock_ramp_ns);
  return c.sm_clock_idle + (c.sm_clock_busy - c.sm_clock_idle) * f;
}

void note_busy(Device& d, long long start, long long end) {
  if (end <= start) return;
  if (!d.busy.empty() && start <= d.busy.back().second)
    d.busy.back().second = std::max(d.busy.back().second, end);
  else
    d.busy.emplace_back(start, end);
  while (d.busy.size() > 4096) d.busy.pop_front();
}

long long graph_ns(const FakeGraphExec& g) {
  long long ns = 0;
  for (const Node& n : g.nodes) ns += n.ns;
  if (!g.nodes.empty()) ns += static_cast<long long>(st().cfg.graph_node_gap_ns) * (g.nodes.size() - 1);
  return ns;
}

// Runs one command on its device, starting no earlier than `ready_ns` (host time
// it became runnable).
void execute(Stream& s, const Command& c, long long ready_ns) {
  State& S = st();
  Device& d = S.dev[s.device];
  if (d.sticky) return;  // a faulted device runs nothing more
  if (c.submitted_ns >= 0)
    S.stats.connection_stall_ns = std::max(S.stats.connection_stall_ns, S.host_ns - c.submitted_ns);
  const Config& cfg = S.cfg;
  long long start = std::max(d.free_at_ns, ready_ns);
  if (c.kind == Kind::WaitEvent) start = std::max(start, c.event->t_ns);
  const bool runs =
      c.kind == Kind::Kernel || c.kind == Kind::Read || c.kind == Kind::Memset || c.kind == Kind::Graph;
  if (runs && (!d.ever_busy || start - d.free_at_ns >= static_cast<long long>(cfg.clock_idle_ns))) {
    d.ever_busy = true;  // a new busy stretch: the clock ramps up from idle
    d.busy_since_ns = start;
  }
  // The write-back of dirty lines lands in the next kernel that evicts them.
  const auto writeback = [&] {
    if (d.dirty_bytes == 0) return 0LL;
    const long long ns = std::llround(static_cast<double>(d.dirty_bytes) / cfg.writeback_bytes_per_ms * 1e6);
    d.dirty_bytes = 0;
    ++S.stats.writebacks;
    return ns;
  };
  const bool kernel_like = c.kind == Kind::Kernel || c.kind == Kind::Graph;
  if (kernel_like && start == d.free_at_ns && d.ever_busy) {
    if (d.last_kind == Kind::Kernel || d.last_kind == Kind::Graph)  // behind a kernel: launch latency,
      start += static_cast<long long>(cfg.dependent_gap_ns) -       // part of it under the last one's tail
               std::min(static_cast<long long>(cfg.kernel_overlap_ns), d.last_kernel_ns);
    else if (d.last_kind == Kind::Event)  // behind a record: the whole latency
      start += static_cast<long long>(cfg.dependent_gap_ns);
  }
  const double slow =
      cfg.clock_scales_kernels != 0 && kernel_like ? cfg.sm_clock_max / sm_clock_at(d, start) : 1;
  switch (c.kind) {
    case Kind::Kernel:
    case Kind::Graph: {
      long long ns = c.ns;
      if (c.kind == Kind::Graph) {
        ns = graph_ns(*c.exec);
        ++S.stats.graph_launches;
        if (!c.exec->uploaded) {
          c.exec->uploaded = true;
          ns += static_cast<long long>(cfg.graph_upload_ns);
          ++S.stats.graph_uploads;
        }
      }
      ns = std::llround(static_cast<double>(ns) * slow) + writeback();
      d.free_at_ns = std::max(d.free_at_ns, start + ns);
      d.last_kernel_ns = ns;
      note_busy(d, start, start + ns);
      if (s.device == 0 && S.kernel_log.size() < kKernelLog) S.kernel_log.emplace_back(start, start + ns);
      if (c.counts_as_kernel) ++S.stats.kernels;
      if (c.fault) d.sticky = c.fault;
      break;
    }
    case Kind::Read:
      d.free_at_ns = start + c.ns + writeback();
      note_busy(d, start, d.free_at_ns);
      ++S.stats.flush_reads;
      break;
    case Kind::Event:
      c.event->t_ns = start;
      c.event->done = true;
      d.free_at_ns = start + static_cast<long long>(cfg.event_ns);
      break;
    case Kind::Memset:
      d.free_at_ns = start + c.ns;
      note_busy(d, start, d.free_at_ns);
      d.dirty_bytes = std::min<long long>(c.ns > 0 ? cfg.l2_bytes : 0, cfg.l2_bytes);
      break;
    case Kind::Wait:
    case Kind::WaitEvent:
      d.free_at_ns = start;
      break;
  }
  if (c.kind != Kind::Wait && c.kind != Kind::WaitEvent) d.last_kind = c.kind;
}

// Whether another stream's queued command submitted before `c` keeps it back: the
// legacy stream's implicit synchronisation with blocking streams, or an earlier
// command on the same hardware connection that has not started.
bool held_by_others(const Stream& s, const Command& c) {
  for (auto& [h, o] : st().streams) {
    if (&o == &s || o.device != s.device || o.queue.empty() || o.queue.front().seq > c.seq) continue;
    if (o.connection == s.connection) return true;
    if ((s.legacy && !o.legacy && o.blocking) || ((!s.legacy && s.blocking) && o.legacy)) return true;
  }
  return false;
}

bool head_waits(const Command& c) {
  if (c.kind == Kind::Wait) return !flag_reached(c);
  if (c.kind == Kind::WaitEvent) return !c.event->done;
  return false;
}

// The GPU's side: whatever a written flag or a reached event has released runs now.
void drain_all() {
  State& S = st();
  for (bool moved = true; moved;) {  // one stream's progress may unblock another's
    moved = false;
    for (auto& [h, s] : S.streams) {
      while (!s.queue.empty()) {
        const Command& head = s.queue.front();
        if (head_waits(head) || held_by_others(s, head)) break;
        const Command c = head;
        s.queue.pop_front();
        execute(s, c, S.host_ns);
        moved = true;
      }
    }
  }
}

// Host time: with host_real_time the real time since the last call counts.
void advance_real() {
  State& S = st();
  if (S.cfg.host_real_time == 0) return;
  const auto now = std::chrono::steady_clock::now();
  S.host_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(now - S.real_mark).count();
  S.real_mark = now;
}

// Charges the host `ns`: spent in real time (the host clock follows it), or on
// the fake clock alone when it is frozen.
void spend_host(double ns) {
  if (ns <= 0) return;
  if (st().cfg.host_real_time == 0) {
    st().host_ns += static_cast<long long>(ns);
    return;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<long long>(ns));
  while (std::chrono::steady_clock::now() < until) {
  }
  advance_real();
}

void advance_host() {
  advance_real();
  spend_host(st().cfg.call_ns);
}

bool device_has_queued_work(int device) {
  for (auto& [h, s] : st().streams)
    if (s.device == device && !s.queue.empty()) return true;
  return false;
}

long long connection_queued(const Stream& s) {
  long long n = 0;
  for (auto& [h, o] : st().streams)
    if (o.device == s.device && o.connection == s.connection) n += static_cast<long long>(o.queue.size());
  return n;
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

void invalidate(const std::shared_ptr<Capture>& cap, CUresult why) {
  if (cap && cap->invalid == CUDA_SUCCESS) cap->invalid = why;
}

// The capture a global-mode rule applies to on `device`: any capture in global
// mode makes allocating and freeing unsafe.
std::shared_ptr<Capture> global_capture(int device) {
  for (auto& [h, s] : st().streams)
    if (s.device == device && s.capture && s.capture->mode == kCaptureModeGlobal) return s.capture;
  return nullptr;
}

// Submits `c` to stream `s` from the host: runs it at once, or queues it behind
// a hold, another stream or its connection. A capturing stream records it instead.
CUresult submit(std::unique_lock<std::recursive_mutex>& lk, Stream& s, Command c) {
  State& S = st();
  if (s.capture) {
    if (c.kind != Kind::Event && c.kind != Kind::WaitEvent) {
      s.capture->graph.nodes.push_back(
          {c.kind == Kind::Graph ? Kind::Kernel : c.kind, c.kind == Kind::Graph ? graph_ns(*c.exec) : c.ns});
      s.capture->last[handle_of(s)] = static_cast<long long>(s.capture->graph.nodes.size());
      auto j = s.capture->joined.find(handle_of(s));
      if (j != s.capture->joined.end()) j->second = false;  // new work to be waited for
      ++S.stats.captured_nodes;
    }
    return CUDA_SUCCESS;
  }
  if (s.legacy) {  // the legacy stream would synchronise with a capturing blocking stream
    for (auto& [h, o] : S.streams)
      if (o.device == s.device && o.blocking && !o.legacy && o.capture) {
        invalidate(o.capture, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
  }
  c.seq = S.next_seq++;
  const auto depth = static_cast<long long>(S.cfg.queue_depth);
  if (depth > 0 && connection_queued(s) >= depth) {
    block_until(lk, [&] { return connection_queued(s) < depth; }, &S.stats.queue_full_blocks);
  }
  const bool others = held_by_others(s, c);
  if (s.queue.empty() && !head_waits(c) && !others) {
    execute(s, c, S.host_ns);
    return CUDA_SUCCESS;
  }
  if (s.queue.empty() && !head_waits(c)) c.submitted_ns = S.host_ns;  // only other streams hold it back
  s.queue.push_back(c);
  S.stats.max_queued = std::max<long long>(S.stats.max_queued, static_cast<long long>(s.queue.size()));
  return CUDA_SUCCESS;
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
      {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
       "no kernel image is available for "
       "execution on the device"},
      {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
      {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
       "the provided PTX was compiled with an unsupported toolchain."},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
       "the operation is not permitted in the "
       "current state"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
      {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
      {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
       "operation not permitted when stream is capturing"},
      {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
       "operation failed due to a previous error during capture"},
      {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
       "capture was not joined with the origin stream"},
      {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
       "dependency created on uncaptured work in another stream"},
      {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
       "operation would make the legacy stream depend on a capturing blocking stream"},
  };
  for (const auto& e : table)
    if (e.code == r) return &e;
  return nullptr;
}

// A PTX image the driver's JIT would take: the header directives in order, a
// version this driver knows (CUDA 12.4 -> PTX ISA 8.4), a target this device
// runs, an .entry, balanced braces, statements that end in ';', and registers
// used inside their declared ranges (`.reg .b32 %r<12>` declares %r0..%r11).
CUresult check_ptx(const char* image, const char** entry_out) {
  const std::string text(image);
  auto directive = [&](const char* name, std::size_t from) { return text.find(name, from); };
  const std::size_t v = directive(".version ", 0), t = directive(".target ", 0),
                    a = directive(".address_size ", 0);
  if (v == std::string::npos || t == std::string::npos || a == std::string::npos || !(v < t && t < a))
    return CUDA_ERROR_INVALID_PTX;
  int major = 0, minor = 0;
  if (std::sscanf(text.c_str() + v, ".version %d.%d", &major, &minor) != 2) return CUDA_ERROR_INVALID_PTX;
  const int cuda = st().cfg.driver_version;  // 12040 -> PTX ISA 8.4; 13000 -> 9.0
  const int isa_major = cuda / 1000 - 4, isa_minor = cuda % 1000 / 10;
  if (major > isa_major || (major == isa_major && minor > isa_minor))
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  int sm = 0;
  if (std::sscanf(text.c_str() + t, ".target sm_%d", &sm) != 1) return CUDA_ERROR_INVALID_PTX;
  if (sm > static_cast<int>(st().cfg.compute_capability)) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  const std::size_t e = directive(".entry ", a);
  const std::size_t open = text.find('{', e), close = text.rfind('}');
  if (e == std::string::npos || open == std::string::npos || close == std::string::npos || close < open)
    return CUDA_ERROR_INVALID_PTX;
  static thread_local std::string entry;
  entry = text.substr(e + 7, text.find('(', e) - e - 7);
  *entry_out = entry.c_str();
  std::map<std::string, int> declared;  // "%r" -> 12
  int depth = 0;
  std::size_t line_start = open + 1;
  for (std::size_t i = open; i <= close; ++i) depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
  if (depth != 0) return CUDA_ERROR_INVALID_PTX;
  while (line_start < close) {
    std::size_t end = text.find('\n', line_start);
    if (end == std::string::npos || end > close) end = close;
    std::string line = text.substr(line_start, end - line_start);
    line_start = end + 1;
    line.erase(0, line.find_first_not_of(" \t"));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.pop_back();
    if (line.empty()) continue;
    if (line.back() == ':') continue;  // a label
    if (line.back() != ';') return CUDA_ERROR_INVALID_PTX;
    if (line.rfind(".reg ", 0) == 0) {
      char name[16] = {0};
      int count = 0;
      const std::size_t pct = line.find('%');
      if (pct == std::string::npos || std::sscanf(line.c_str() + pct, "%%%15[a-z]<%d>", name, &count) != 2)
        return CUDA_ERROR_INVALID_PTX;
      declared[std::string("%") + name] = count;
      continue;
    }
    for (std::size_t p = line.find('%'); p != std::string::npos; p = line.find('%', p + 1)) {
      std::size_t q = p + 1;
      while (q < line.size() && std::isalpha(static_cast<unsigned char>(line[q]))) ++q;
      if (q == line.size() || !std::isdigit(static_cast<unsigned char>(line[q]))) continue;  // %tid.x ...
      const std::string reg = line.substr(p, q - p);
      const int index = std::atoi(line.c_str() + q);
      auto it = declared.find(reg);
      if (it == declared.end() || index >= it->second) return CUDA_ERROR_INVALID_PTX;
    }
  }
  return CUDA_SUCCESS;
}

void free_synchronises(std::unique_lock<std::recursive_mutex>& lk, int device) {
  Device& d = st().dev[device];
  block_until(lk, [&] { return d.sticky || !device_has_queued_work(device); }, &st().stats.free_blocks);
  st().host_ns = std::max(st().host_ns, d.free_at_ns);
}

// The NVML reading at its last update tick: what the device did over the period before it.
struct Reading {
  double util;   // busy fraction of the period
  double clock;  // SM MHz
  double mem;    // memory MHz
};
Reading reading(int device) {
  const State& S = st();
  const Device& d = S.dev[device];
  const Config& c = S.cfg;
  const auto period = std::max(1LL, static_cast<long long>(c.nvml_period_ns));
  const long long tick = S.host_ns - S.host_ns % period;
  long long busy = 0;
  for (const auto& [b, e] : d.busy) busy += std::max(0LL, std::min(e, tick) - std::max(b, tick - period));
  const double util = static_cast<double>(busy) / static_cast<double>(period);
  if (busy == 0) return {0, c.sm_clock_idle, c.mem_clock_idle};
  // Under half busy, the clock governor keeps the clock down in proportion.
  const double load = std::min(1.0, util / 0.5);
  const double sm = c.sm_clock_idle + (sm_clock_at(d, tick) - c.sm_clock_idle) * load;
  const double mem = c.mem_clock_idle + (c.mem_clock_busy - c.mem_clock_idle) * load;
  return {util, sm, mem};
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
  ++st().stats.records;
  ++stream->records;
  if (stream->capture) {  // an event of the capture: other streams that wait for it join in
    ev->recorded = true;
    ev->done = false;
    ev->capture = stream->capture;
    ev->recorded_on = reinterpret_cast<std::uintptr_t>(s);
    ev->capture_nodes = stream->capture->last[ev->recorded_on];
    return CUDA_SUCCESS;
  }
  ev->recorded = true;
  ev->done = false;
  ev->capture = nullptr;
  Command c{Kind::Event};
  c.event = ev;
  return submit(lk, *stream, c);
}
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned) {
  FAKE_ENTER("cuStreamWaitEvent");
  FAKE_NEED_CONTEXT();
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  ++st().stats.event_waits;
  if (ev->capture) {
    if (stream->capture && stream->capture != ev->capture) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    if (stream->legacy) {  // the legacy stream cannot join a capture
      invalidate(ev->capture, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    const std::uintptr_t h = reinterpret_cast<std::uintptr_t>(s);
    if (!stream->capture) {  // forked into the capture
      stream->capture = ev->capture;
      stream->capture->joined[h] = false;
      stream->capture->last[h] = ev->capture_nodes;
      return CUDA_SUCCESS;
    }
    // Within the capture: waiting for a forked stream's event recorded after its
    // last node joins that stream back.
    auto joined = ev->capture->joined.find(ev->recorded_on);
    if (joined != ev->capture->joined.end() && ev->capture_nodes >= ev->capture->last[ev->recorded_on])
      joined->second = true;
    return CUDA_SUCCESS;
  }
  if (stream->capture) {  // waiting for work outside the capture
    invalidate(stream->capture, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (!ev->recorded) return CUDA_SUCCESS;  // nothing to wait for
  Command c{Kind::WaitEvent};
  c.event = ev;
  return submit(lk, *stream, c);
}
CUresult cuEventQuery(CUevent e) {
  FAKE_ENTER("cuEventQuery");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (st().dev[ev->device].sticky) return st().dev[ev->device].sticky;
  if (ev->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  // Reached only once the host clock has passed its timestamp, not when queued.
  return !ev->recorded || (ev->done && ev->t_ns <= st().host_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
  FAKE_ENTER("cuEventSynchronize");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Device& d = st().dev[ev->device];
  block_until(lk, [&] { return d.sticky || !ev->recorded || ev->done; }, &st().stats.sync_blocks);
  ++st().stats.event_syncs;
  if (d.sticky) return d.sticky;
  if (ev->recorded) st().host_ns = std::max(st().host_ns, ev->t_ns);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  FAKE_ENTER("cuEventElapsedTime");
  auto* start = reinterpret_cast<FakeEvent*>(a);
  auto* stop = reinterpret_cast<FakeEvent*>(b);
  if (!st().events.count(start) || !st().events.count(stop)) return CUDA_ERROR_INVALID_HANDLE;
  if (st().dev[start->device].sticky) return st().dev[start->device].sticky;
  if (!start->recorded || !stop->recorded || start->capture || stop->capture)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!start->done || !stop->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(timestamp(stop->t_ns) - timestamp(start->t_ns)) * 1e-6);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  FAKE_ENTER("cuEventDestroy");
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!st().events.erase(ev)) return CUDA_ERROR_INVALID_HANDLE;  // from before a reset: leaked
  // As on hardware, work already queued on it (a record, another stream's wait)
  // still completes: the fake keeps its memory.
  --st().stats.events_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  FAKE_ENTER("cuStreamSynchronize");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture) {  // waiting for work that is only being recorded: the capture is void
    invalidate(stream->capture, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
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
  return submit(lk, *stream, c);
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, std::size_t) {
  FAKE_ENTER("cuMemAlloc");
  FAKE_NEED_CONTEXT();
  if (auto cap = global_capture(cur)) {
    invalidate(cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  // Fake device memory is never touched: no real allocation of the size asked.
  *p = reinterpret_cast<CUdeviceptr>(new char[1]);
  ++st().stats.allocs_live;
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_ENTER("cuMemFree");
  const int cur = std::max(0, current_device());
  if (auto cap = global_capture(cur)) {
    invalidate(cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  free_synchronises(lk, cur);  // a free waits for the device's queued work
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
  return submit(lk, *stream, c);
}
CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  FAKE_ENTER("cuStreamBeginCapture");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (stream->capture) return CUDA_ERROR_ILLEGAL_STATE;
  stream->capture = std::make_shared<Capture>();
  stream->capture->mode = mode;
  stream->capture_origin = reinterpret_cast<std::uintptr_t>(s);
  ++st().stats.captures;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, int* status) {
  FAKE_ENTER("cuStreamIsCapturing");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *status = !stream->capture ? 0 : stream->capture->invalid ? 2 : 1;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCaptureInfo_v2(CUstream s, int* status, std::uint64_t* id, CUgraph* graph,
                                   const void** deps, std::size_t* ndeps) {
  FAKE_ENTER("cuStreamGetCaptureInfo");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->legacy) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  *status = !stream->capture ? 0 : stream->capture->invalid ? 2 : 1;
  if (id) *id = reinterpret_cast<std::uintptr_t>(stream->capture.get());
  if (graph) *graph = stream->capture ? reinterpret_cast<CUgraph>(&stream->capture->graph) : nullptr;
  if (deps) *deps = nullptr;
  if (ndeps) *ndeps = 0;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  FAKE_ENTER("cuStreamEndCapture");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  *g = nullptr;
  if (stream == nullptr || !stream->capture || stream->capture_origin != reinterpret_cast<std::uintptr_t>(s))
    return CUDA_ERROR_ILLEGAL_STATE;
  std::shared_ptr<Capture> cap = stream->capture;
  CUresult r = cap->invalid;
  for (auto& [h, joined] : cap->joined)
    if (!joined && r == CUDA_SUCCESS) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  for (auto& [h, o] : st().streams)  // every stream of the capture leaves it
    if (o.capture == cap) o.capture = nullptr;
  stream->capture_origin = 0;
  if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_ISOLATION ||
      r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (r != CUDA_SUCCESS) return r;
  *g = reinterpret_cast<CUgraph>(new FakeGraph(cap->graph));
  return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph g, void*, std::size_t* n) {
  FAKE_ENTER("cuGraphGetNodes");
  *n = reinterpret_cast<FakeGraph*>(g)->nodes.size();
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) {
  FAKE_ENTER("cuGraphDestroy");
  delete reinterpret_cast<FakeGraph*>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(void** exec, CUgraph g, unsigned long long) {
  FAKE_ENTER("cuGraphInstantiate");
  auto* e = new FakeGraphExec;
  e->nodes = reinterpret_cast<FakeGraph*>(g)->nodes;
  *exec = e;
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(void* exec, CUstream s) {
  FAKE_ENTER("cuGraphLaunch");
  FAKE_NEED_CONTEXT();
  Stream* stream = find_stream(s, cur);
  if (stream == nullptr || stream->device != cur) return CUDA_ERROR_INVALID_HANDLE;
  Command c{Kind::Graph};
  c.exec = static_cast<FakeGraphExec*>(exec);
  ++st().stats.launches;
  return submit(lk, *stream, c);
}
CUresult cuGraphExecDestroy(void* exec) {
  FAKE_ENTER("cuGraphExecDestroy");
  (void)exec;  // queued launches may still run it: its memory is kept
  return CUDA_SUCCESS;
}
// Modules: only opbench's L2 read kernel exists, from a PTX image the JIT would compile.
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  FAKE_ENTER("cuModuleLoadData");
  FAKE_NEED_CONTEXT();
  const char* entry = nullptr;
  if (CUresult r = check_ptx(static_cast<const char*>(image), &entry)) return r;
  if (std::strcmp(entry, "opbench_l2_read") != 0) return CUDA_ERROR_INVALID_PTX;
  ++st().stats.module_loads;
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
  free_synchronises(lk, std::max(0, current_device()));
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
  return submit(lk, *stream, c);
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
  free_synchronises(lk, std::max(0, current_device()));
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

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  FAKE_ENTER("nvmlDeviceGetClockInfo");
  if (st().cfg.nvml_clocks == 0) return NVML_ERROR_NOT_SUPPORTED;
  spend_host(st().cfg.nvml_call_ns);
  const Reading r = reading(nvml_device(d));
  *mhz = static_cast<unsigned>(type == NVML_CLOCK_SM ? r.clock : r.mem);
  ++st().stats.nvml_clock_reads;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t, int type, unsigned* mhz) {
  FAKE_ENTER("nvmlDeviceGetMaxClockInfo");
  if (st().cfg.nvml_clocks == 0) return NVML_ERROR_NOT_SUPPORTED;
  spend_host(st().cfg.nvml_call_ns);
  *mhz = static_cast<unsigned>(type == NVML_CLOCK_SM ? st().cfg.sm_clock_max : st().cfg.mem_clock_max);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* reasons) {
  FAKE_ENTER("nvmlDeviceGetCurrentClocksEventReasons");
  spend_host(st().cfg.nvml_call_ns);
  const Reading r = reading(nvml_device(d));
  // The reasons of the whole period, combined: the busy reasons while it worked,
  // GpuIdle when it was idle for most of it.
  *reasons = (r.util > 0 ? static_cast<unsigned long long>(st().cfg.busy_reasons) : 0) |
             (r.util < 0.05 ? kIdleReason : 0);
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
  if (k == "connections" && value < 1) return -2;
  // clang-format off: one setting a line (the macro expands to a whole if statement)
  FAKE_NUMBER(compute_capability)
  FAKE_NUMBER(sm_clock_idle)
  FAKE_NUMBER(sm_clock_busy)
  FAKE_NUMBER(sm_clock_max)
  FAKE_NUMBER(mem_clock_idle)
  FAKE_NUMBER(mem_clock_busy)
  FAKE_NUMBER(mem_clock_max)
  FAKE_NUMBER(busy_reasons)
  FAKE_NUMBER(nvml_clocks)
  FAKE_NUMBER(clock_scales_kernels)
  FAKE_NUMBER(memset_bytes_per_ms)
  FAKE_NUMBER(stream_mem_ops)
  FAKE_NUMBER(queue_depth)
  FAKE_NUMBER(connections)
  FAKE_NUMBER(event_quantum_ns)
  FAKE_NUMBER(event_jitter_ns)
  FAKE_NUMBER(event_phase_ns)
  FAKE_NUMBER(event_ns)
  FAKE_NUMBER(dependent_gap_ns)
  FAKE_NUMBER(kernel_overlap_ns)
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
  FAKE_NUMBER(writeback_bytes_per_ms)
  FAKE_NUMBER(read_bytes_per_ms)
  FAKE_NUMBER(graph_upload_ns)
  FAKE_NUMBER(graph_node_gap_ns)
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
    spend_host(S.cfg.load_ns);
    ns += static_cast<long long>(S.cfg.load_device_ns);
    ++S.stats.loads;
  }
  if (kernel != 0) S.dev[cur].loaded.insert(kernel);
  spend_host(S.cfg.launch_ns);
  ++S.stats.launches;
  Command c{Kind::Kernel};
  c.ns = ns;
  c.fault = fault;
  c.counts_as_kernel = true;
  return submit(lk, *s, c);
}

/// What torch's Stream.wait_stream does through the runtime: an event recorded
/// on `waitee` and waited for by `waiter`, on the current context. The CUresult.
int opbench_fake_wait_stream(std::uintptr_t waiter, std::uintptr_t waitee) {
  CUevent e = nullptr;
  CUresult r = cuEventCreate(&e, 0);
  if (r != CUDA_SUCCESS) return r;
  r = cuEventRecord(e, reinterpret_cast<CUstream>(waitee));
  if (r == CUDA_SUCCESS) r = cuStreamWaitEvent(reinterpret_cast<CUstream>(waiter), e, 0);
  cuEventDestroy_v2(e);
  return r;
}

/// Starts the "max_queued" statistic afresh.
void opbench_fake_reset_max_queued() {
  std::lock_guard<std::recursive_mutex> lk(mu);
  st().stats.max_queued = 0;
  st().stats.connection_stall_ns = 0;
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
      {"event_waits", s.event_waits},
      {"launches", s.launches},
      {"kernels", s.kernels},
      {"loads", s.loads},
      {"module_loads", s.module_loads},
      {"queue_full_blocks", s.queue_full_blocks},
      {"load_blocks", s.load_blocks},
      {"sync_blocks", s.sync_blocks},
      {"free_blocks", s.free_blocks},
      {"max_queued", s.max_queued},
      {"connection_stall_ns", s.connection_stall_ns},
      {"nvml_clock_reads", s.nvml_clock_reads},
      {"flush_reads", s.flush_reads},
      {"writebacks", s.writebacks},
      {"captures", s.captures},
      {"captured_nodes", s.captured_nodes},
      {"graph_launches", s.graph_launches},
      {"graph_uploads", s.graph_uploads},
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
/// Streams take the hardware connections in turn, after the legacy stream's.
std::uintptr_t opbench_fake_stream_create(int device, int blocking) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  const std::uintptr_t n = st().next_stream++;
  const std::uintptr_t h = 0x10000 + n;
  st().streams[h].device = device;
  st().streams[h].blocking = blocking != 0;
  st().streams[h].connection = static_cast<int>(n % static_cast<std::uintptr_t>(st().cfg.connections));
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

/// The hardware connection `stream` runs on (-1: no such stream).
int opbench_fake_stream_connection(std::uintptr_t stream, int device) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  Stream* s = find_stream(reinterpret_cast<CUstream>(stream), device);
  return s ? s->connection : -1;
}

/// What cudaSetDevice does: makes `device`'s primary context current (-1: none).
void opbench_fake_set_current(int device) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  if (ctx_stack.empty())
    ctx_stack.push_back(device);
  else
    ctx_stack.back() = device;
}

/// The kernels device 0 ran since the last call, as a profiler sees them: up to
/// `max` (start, end) pairs in device nanoseconds; the log starts afresh.
long long opbench_fake_kernel_log(long long* starts, long long* ends, long long max) {
  std::lock_guard<std::recursive_mutex> lk(mu);
  drain_all();
  auto& log = st().kernel_log;
  const long long n = std::min<long long>(max, static_cast<long long>(log.size()));
  for (long long i = 0; i < n; ++i) {
    starts[i] = log[static_cast<std::size_t>(i)].first;
    ends[i] = log[static_cast<std::size_t>(i)].second;
  }
  log.clear();
  return n;
}

}  // extern "C"
