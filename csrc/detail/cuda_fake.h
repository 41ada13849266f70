// detail/cuda_fake.h: a fake CUDA driver and NVML for tests on machines without a GPU.
//
// It fills the same tables as the real driver (detail/cuda_driver.h), so the
// timing loops, event bookkeeping and error paths under test are the shipped
// ones. Events read a fake device clock that only moves when told to
// (fake_advance, standing in for a kernel) or when a memset "runs", so tests
// can assert exact device times, e.g. that a cold-cache flush stays outside
// the timed window. Any entry point can be made to fail with a chosen code,
// and a pending "kernel error" surfaces from the next synchronisation, as a
// real asynchronous fault does.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "detail/cuda_driver.h"

namespace opbench::cuda::fake {

struct Config {
  int device_count = 1;
  std::string name = "opbench fake GPU";
  int l2_bytes = 50 * 1024 * 1024;
  int driver_version = 12040;
  bool nvml = true;
  std::string nvml_driver_version = "999.99.99";
  std::vector<unsigned> sm_clocks{1980};   // successive readings; the last one repeats
  std::vector<unsigned> mem_clocks{2619};
  double memset_bytes_per_ms = 1e9;  // how far a memset moves the device clock
  bool stream_mem_ops = true;        // cuStreamWaitValue32 available
  long queue_depth = 0;              // launches a held stream accepts before launching blocks (0: no limit)
};

struct Stats {
  long events_created = 0, events_live = 0, records = 0, event_syncs = 0, stream_syncs = 0;
  long memsets = 0, memset_bytes = 0, allocs_live = 0, host_allocs_live = 0, stream_waits = 0;
  long contexts_retained = 0;
  std::set<std::uintptr_t> streams;  // every stream an event was recorded on
};

struct Event {
  bool recorded = false;
  double t_ms = 0;
};

struct State {
  Config cfg;
  Stats stats;
  double now_ms = 0;
  std::map<std::string, int> failures;  // entry point -> CUresult it returns
  int pending_error = 0;                // sticky, like a real kernel fault
  std::size_t sm_reads = 0, mem_reads = 0;
  std::uint32_t* wait_flag = nullptr;  // the hold a stream waits on
  std::uint32_t wait_value = 0;
  long launches_held = 0;  // launches queued behind the current hold
};

inline State& state() {
  static State s;
  return s;
}

inline void reset(const Config& cfg) {
  State& s = state();
  s.cfg = cfg;
  s.stats = Stats{};
  s.now_ms = 0;
  s.failures.clear();
  s.pending_error = 0;
  s.sm_reads = s.mem_reads = 0;
  s.wait_flag = nullptr;
  s.wait_value = 0;
  s.launches_held = 0;
}

inline int injected(const char* fn) {
  auto it = state().failures.find(fn);
  return it == state().failures.end() ? CUDA_SUCCESS : it->second;
}

#define OPBENCH_FAKE_ENTER(name)                      \
  if (int injected_rc = injected(name)) return injected_rc

// A stream held by cuStreamWaitValue32 runs nothing until the host writes the
// flag, so synchronising on it blocks: as on a real GPU, only the writer (the
// timing loop or its watchdog) can release it.
inline void wait_for_release() {
  State& s = state();
  while (s.wait_flag != nullptr && __atomic_load_n(s.wait_flag, __ATOMIC_ACQUIRE) < s.wait_value)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

inline bool held() {
  const State& s = state();
  return s.wait_flag != nullptr && __atomic_load_n(s.wait_flag, __ATOMIC_ACQUIRE) < s.wait_value;
}

/// A kernel of `ms` milliseconds. Behind a hold, the launch blocks once the
/// fake launch queue is full, as a real launch does when the GPU is not
/// draining it.
inline void launch(double ms) {
  State& s = state();
  if (held() && s.cfg.queue_depth > 0 && ++s.launches_held > s.cfg.queue_depth) wait_for_release();
  s.now_ms += ms;
}

inline CUresult cuInit(unsigned) {
  OPBENCH_FAKE_ENTER("cuInit");
  return state().cfg.device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
inline CUresult cuDriverGetVersion(int* v) {
  OPBENCH_FAKE_ENTER("cuDriverGetVersion");
  *v = state().cfg.driver_version;
  return CUDA_SUCCESS;
}
inline CUresult cuDeviceGetCount(int* n) {
  OPBENCH_FAKE_ENTER("cuDeviceGetCount");
  *n = state().cfg.device_count;
  return CUDA_SUCCESS;
}
inline CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  OPBENCH_FAKE_ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= state().cfg.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
inline CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice) {
  OPBENCH_FAKE_ENTER("cuDeviceGetAttribute");
  if (attr != CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) return CUDA_ERROR_INVALID_VALUE;
  *v = state().cfg.l2_bytes;
  return CUDA_SUCCESS;
}
inline CUresult cuDeviceGetName(char* out, int len, CUdevice) {
  OPBENCH_FAKE_ENTER("cuDeviceGetName");
  std::snprintf(out, static_cast<std::size_t>(len), "%s", state().cfg.name.c_str());
  return CUDA_SUCCESS;
}
inline CUresult cuDeviceGetPCIBusId(char* out, int len, CUdevice d) {
  OPBENCH_FAKE_ENTER("cuDeviceGetPCIBusId");
  std::snprintf(out, static_cast<std::size_t>(len), "0000:%02x:00.0", d + 1);
  return CUDA_SUCCESS;
}
inline CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  OPBENCH_FAKE_ENTER("cuDevicePrimaryCtxRetain");
  *c = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + d));
  ++state().stats.contexts_retained;
  return CUDA_SUCCESS;
}
inline CUresult cuDevicePrimaryCtxRelease(CUdevice) {
  OPBENCH_FAKE_ENTER("cuDevicePrimaryCtxRelease");
  --state().stats.contexts_retained;
  return CUDA_SUCCESS;
}
inline CUresult cuCtxSetCurrent(CUcontext) {
  OPBENCH_FAKE_ENTER("cuCtxSetCurrent");
  return CUDA_SUCCESS;
}
inline CUresult cuEventCreate(CUevent* e, unsigned) {
  OPBENCH_FAKE_ENTER("cuEventCreate");
  *e = reinterpret_cast<CUevent>(new Event);
  ++state().stats.events_created;
  ++state().stats.events_live;
  return CUDA_SUCCESS;
}
inline CUresult cuEventRecord(CUevent e, CUstream s) {
  OPBENCH_FAKE_ENTER("cuEventRecord");
  auto* ev = reinterpret_cast<Event*>(e);
  ev->recorded = true;
  ev->t_ms = state().now_ms;
  ++state().stats.records;
  state().stats.streams.insert(reinterpret_cast<std::uintptr_t>(s));
  return CUDA_SUCCESS;
}
inline CUresult cuEventQuery(CUevent e) {
  OPBENCH_FAKE_ENTER("cuEventQuery");
  if (state().pending_error) return state().pending_error;
  return reinterpret_cast<Event*>(e)->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
inline CUresult cuEventSynchronize(CUevent) {
  OPBENCH_FAKE_ENTER("cuEventSynchronize");
  wait_for_release();
  ++state().stats.event_syncs;
  return state().pending_error;
}
inline CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  OPBENCH_FAKE_ENTER("cuEventElapsedTime");
  if (state().pending_error) return state().pending_error;
  auto* start = reinterpret_cast<Event*>(a);
  auto* stop = reinterpret_cast<Event*>(b);
  if (!start->recorded || !stop->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(stop->t_ms - start->t_ms);
  return CUDA_SUCCESS;
}
inline CUresult cuEventDestroy(CUevent e) {
  OPBENCH_FAKE_ENTER("cuEventDestroy");
  delete reinterpret_cast<Event*>(e);
  --state().stats.events_live;
  return CUDA_SUCCESS;
}
inline CUresult cuStreamSynchronize(CUstream) {
  OPBENCH_FAKE_ENTER("cuStreamSynchronize");
  wait_for_release();
  ++state().stats.stream_syncs;
  return state().pending_error;
}
inline CUresult cuStreamWaitValue32(CUstream, CUdeviceptr addr, std::uint32_t value, unsigned) {
  OPBENCH_FAKE_ENTER("cuStreamWaitValue32");
  if (!state().cfg.stream_mem_ops) return CUDA_ERROR_NOT_SUPPORTED;
  state().wait_flag = reinterpret_cast<std::uint32_t*>(static_cast<std::uintptr_t>(addr));
  state().wait_value = value;
  state().launches_held = 0;
  ++state().stats.stream_waits;
  return CUDA_SUCCESS;
}
inline CUresult cuMemAlloc(CUdeviceptr* p, std::size_t bytes) {
  OPBENCH_FAKE_ENTER("cuMemAlloc");
  // Fake device memory is never touched, so no real allocation of `bytes`.
  *p = reinterpret_cast<CUdeviceptr>(new char[1]);
  (void)bytes;
  ++state().stats.allocs_live;
  return CUDA_SUCCESS;
}
inline CUresult cuMemFree(CUdeviceptr p) {
  OPBENCH_FAKE_ENTER("cuMemFree");
  delete[] reinterpret_cast<char*>(static_cast<std::uintptr_t>(p));
  --state().stats.allocs_live;
  return CUDA_SUCCESS;
}
inline CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, std::size_t bytes, CUstream) {
  OPBENCH_FAKE_ENTER("cuMemsetD8Async");
  State& s = state();
  s.now_ms += static_cast<double>(bytes) / s.cfg.memset_bytes_per_ms;
  ++s.stats.memsets;
  s.stats.memset_bytes += static_cast<long>(bytes);
  return CUDA_SUCCESS;
}
inline CUresult cuMemHostAlloc(void** p, std::size_t bytes, unsigned) {
  OPBENCH_FAKE_ENTER("cuMemHostAlloc");
  *p = std::calloc(1, bytes < 64 ? 64 : bytes);
  ++state().stats.host_allocs_live;
  return CUDA_SUCCESS;
}
inline CUresult cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned) {
  OPBENCH_FAKE_ENTER("cuMemHostGetDevicePointer");
  *d = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
inline CUresult cuMemFreeHost(void* p) {
  OPBENCH_FAKE_ENTER("cuMemFreeHost");
  if (state().wait_flag == p) state().wait_flag = nullptr;
  std::free(p);
  --state().stats.host_allocs_live;
  return CUDA_SUCCESS;
}

struct ErrorText {
  int code;
  const char* name;
  const char* text;
};
// The real driver's names and strings for the codes the fake can produce.
inline const ErrorText* find_error(CUresult r) {
  static const ErrorText table[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
  };
  for (const auto& e : table)
    if (e.code == r) return &e;
  return nullptr;
}
inline CUresult cuGetErrorName(CUresult r, const char** out) {
  const ErrorText* e = find_error(r);
  *out = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
inline CUresult cuGetErrorString(CUresult r, const char** out) {
  const ErrorText* e = find_error(r);
  *out = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

inline nvmlReturn_t nvmlInit() { return injected("nvmlInit"); }
inline nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
inline nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char*, nvmlDevice_t* d) {
  OPBENCH_FAKE_ENTER("nvmlDeviceGetHandleByPciBusId");
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(0x2000));
  return NVML_SUCCESS;
}
inline nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t, int type, unsigned* mhz) {
  OPBENCH_FAKE_ENTER("nvmlDeviceGetClockInfo");
  State& s = state();
  const bool sm = type == NVML_CLOCK_SM;
  const auto& seq = sm ? s.cfg.sm_clocks : s.cfg.mem_clocks;
  std::size_t& i = sm ? s.sm_reads : s.mem_reads;
  if (seq.empty()) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *mhz = seq[i < seq.size() ? i : seq.size() - 1];
  ++i;
  return NVML_SUCCESS;
}
inline nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned len) {
  std::snprintf(out, len, "%s", state().cfg.nvml_driver_version.c_str());
  return NVML_SUCCESS;
}
inline const char* nvmlErrorString(nvmlReturn_t r) { return r == 3 ? "Not Supported" : "Unknown Error"; }

#undef OPBENCH_FAKE_ENTER

/// A Driver whose tables point at the fake above, configured by `cfg`.
inline std::shared_ptr<Driver> make_driver(const Config& cfg) {
  reset(cfg);
  auto d = std::make_shared<Driver>();
  d->origin = "fake";
  d->cu = CudaTable{cuInit,
                    cuDriverGetVersion,
                    cuDeviceGetCount,
                    cuDeviceGet,
                    cuDeviceGetAttribute,
                    cuDeviceGetName,
                    cuDeviceGetPCIBusId,
                    cuDevicePrimaryCtxRetain,
                    cuDevicePrimaryCtxRelease,
                    cuCtxSetCurrent,
                    cuEventCreate,
                    cuEventRecord,
                    cuEventQuery,
                    cuEventSynchronize,
                    cuEventElapsedTime,
                    cuEventDestroy,
                    cuStreamSynchronize,
                    cuStreamWaitValue32,
                    cuMemAlloc,
                    cuMemFree,
                    cuMemsetD8Async,
                    cuMemHostAlloc,
                    cuMemHostGetDevicePointer,
                    cuMemFreeHost,
                    cuGetErrorName,
                    cuGetErrorString};
  if (cfg.nvml) {
    d->nvml = NvmlTable{nvmlInit, nvmlShutdown, nvmlDeviceGetHandleByPciBusId, nvmlDeviceGetClockInfo,
                        nvmlSystemGetDriverVersion, nvmlErrorString};
    d->has_nvml = true;
  } else {
    d->nvml_problem = "libnvidia-ml.so.1 not found (fake driver without NVML): no clock readings";
  }
  return d;
}

}  // namespace opbench::cuda::fake
