// detail/cuda_driver.h: the CUDA driver and NVML, reached through function tables.
//
// opbench builds without the CUDA toolkit and imports on machines without a
// GPU, so nothing here links against CUDA: the real tables are filled by
// dlopen/dlsym at first use. Tests build a fake driver library of their own
// (tests/fake_cuda/) and point the loader at it, so the loader, the bookkeeping
// and the error paths they exercise are the ones that run against libcuda.
//
// Only the handful of declarations opbench needs are reproduced below, with
// the values of the driver's stable ABI (cuda.h); versioned symbols (_v2) are
// the ones cuda.h maps the plain names to since CUDA 11.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace opbench::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr int CU_MODULE_EAGER_LOADING = 1;
constexpr int CU_MODULE_LAZY_LOADING = 2;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
constexpr int CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
constexpr unsigned CU_EVENT_DEFAULT = 0;
constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0x0;
constexpr int NVML_SUCCESS = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr unsigned long long NVML_CLOCKS_EVENT_REASON_GPU_IDLE = 0x1;

/// Errors a kernel fault leaves behind: the context is unusable afterwards and
/// every later call on it returns the same code (cuda.h calls them sticky).
inline bool is_sticky(CUresult r) {
  switch (r) {
    case 700:  // ILLEGAL_ADDRESS
    case 702:  // LAUNCH_TIMEOUT
    case 710:  // ASSERT
    case 714:  // HARDWARE_STACK_ERROR
    case 715:  // ILLEGAL_INSTRUCTION
    case 716:  // MISALIGNED_ADDRESS
    case 717:  // INVALID_ADDRESS_SPACE
    case 718:  // INVALID_PC
    case 719:  // LAUNCH_FAILED
      return true;
    default:
      return false;
  }
}

/// Pointers to every driver entry point opbench calls, filled by load_driver();
/// never partially: a table missing a required symbol is never handed out
/// (the ones marked optional may be null).
struct CudaTable {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, std::uint32_t, unsigned);
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, std::size_t, CUstream);
  CUresult (*cuMemHostAlloc)(void**, std::size_t, unsigned);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuModuleGetLoadingMode)(int*);  // optional (CUDA 11.7+)
  // optional: counting a call's launches by capturing it (CUDA 10+)
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphGetNodes)(CUgraph, void*, std::size_t*);
  CUresult (*cuGraphDestroy)(CUgraph);
  // optional: the nodes of a capture in progress (one torch began), CUDA 11.3+
  CUresult (*cuStreamGetCaptureInfo)(CUstream, int*, std::uint64_t*, CUgraph*, const void**, std::size_t*);
  // optional: the cold-L2 flush's read kernel, JIT-compiled from PTX by the driver
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
};

/// NVML, for clocks and the driver's release number. Optional: a driver
/// without NVML (some containers) still times, it only reports no clocks.
struct NvmlTable {
  nvmlReturn_t (*nvmlInit)();
  nvmlReturn_t (*nvmlShutdown)();
  nvmlReturn_t (*nvmlDeviceGetHandleByPciBusId)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*nvmlDeviceGetClockInfo)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*nvmlDeviceGetMaxClockInfo)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*nvmlSystemGetDriverVersion)(char*, unsigned);
  const char* (*nvmlErrorString)(nvmlReturn_t);
  // optional: "clocks event reasons" since NVML 12.2, "throttle reasons" before
  nvmlReturn_t (*nvmlDeviceGetCurrentClocksEventReasons)(nvmlDevice_t, unsigned long long*);
};

/// What a process learns about one device once and reuses in every Context.
struct DeviceMemo {
  long long hold_commands = 0;  ///< most launch-queue commands one held block may queue; 0: not learned yet
  long long hold_calls = 0;     ///< most calls one held block may hold, as a caller set it; 0: no cap
  bool quantum_measured = false;
  double event_quantum_s = 0;  ///< the step of event timestamps; 0: none seen
};

/// A driver failure: the call, the CUresult and the driver's own words for it.
struct CudaError : std::runtime_error {
  CudaError(std::string message, std::string function, int code)
      : std::runtime_error(std::move(message)), function(std::move(function)), code(code) {}
  std::string function;  ///< the driver call that failed ("" for load failures)
  int code;              ///< the CUresult (-1 when the library itself is missing)
};

/// One loaded driver. Contexts hold a shared_ptr to the Driver they were made
/// with, so switching libraries (tests use a fake one) never strands a handle.
struct Driver {
  CudaTable cu{};
  NvmlTable nvml{};
  bool has_nvml = false;
  bool nvml_initialised = false;
  std::string nvml_problem;        ///< why clocks are unavailable, when they are
  std::string origin;              ///< the library's file name
  std::map<int, DeviceMemo> memo;  ///< by device ordinal; lives as long as the loaded driver

  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  // The libraries stay loaded: torch shares libcuda, and unloading a driver
  // library under live contexts is undefined.
  ~Driver() {
    if (nvml_initialised && nvml.nvmlShutdown) nvml.nvmlShutdown();
  }

  /// "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered"
  std::string describe(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cu.cuGetErrorName == nullptr || cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (cu.cuGetErrorString == nullptr || cu.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    std::string s = name ? name : "unknown CUDA error";
    s += " (" + std::to_string(r) + ")";
    if (text) s += std::string(": ") + text;
    return s;
  }

  /// Throws CudaError naming `call` unless r is CUDA_SUCCESS. A sticky error
  /// says where it came from: an earlier kernel, not the call that reports it.
  void check(CUresult r, const char* call) const {
    if (r != CUDA_SUCCESS)
      throw CudaError(std::string(call) + " failed: " + describe(r) + sticky_note(r), call, r);
  }

  static std::string sticky_note(CUresult r) {
    return is_sticky(r) ? " (a sticky error: a kernel that ran earlier faulted, and the CUDA context "
                          "stays unusable until the process exits)"
                        : "";
  }
};

namespace detail {

template <class Fn>
bool bind_symbol(void* lib, Fn& slot, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* p = dlsym(lib, name)) {
      slot = reinterpret_cast<Fn>(p);
      return true;
    }
  }
  return false;
}

}  // namespace detail

/// dlopens `libcuda` (and `libnvml`, optionally) and fills the tables.
/// Throws CudaError naming the missing library or symbol.
inline std::shared_ptr<Driver> load_driver(const std::string& libcuda, const std::string& libnvml) {
  // RTLD_NOLOAD first: if torch already loaded the driver, share its copy.
  void* lib = dlopen(libcuda.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(libcuda.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    throw CudaError(
        libcuda + " not found: no NVIDIA driver on this machine (dlopen: " + (why ? why : "unknown error") +
            "). Device timing needs an NVIDIA GPU and its driver; use the default "
            "host-clock timing instead.",
        "", -1);
  }
  auto d = std::make_shared<Driver>();
  d->origin = libcuda;
  auto& t = d->cu;
  std::string missing;
  auto need = [&](auto& slot, std::initializer_list<const char*> names) {
    if (!detail::bind_symbol(lib, slot, names))
      missing += std::string(missing.empty() ? "" : ", ") + *names.begin();
  };
  need(t.cuInit, {"cuInit"});
  need(t.cuDriverGetVersion, {"cuDriverGetVersion"});
  need(t.cuDeviceGetCount, {"cuDeviceGetCount"});
  need(t.cuDeviceGet, {"cuDeviceGet"});
  need(t.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  need(t.cuDeviceGetName, {"cuDeviceGetName"});
  need(t.cuDeviceGetPCIBusId, {"cuDeviceGetPCIBusId"});
  need(t.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  need(t.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  need(t.cuCtxPushCurrent, {"cuCtxPushCurrent_v2", "cuCtxPushCurrent"});
  need(t.cuCtxPopCurrent, {"cuCtxPopCurrent_v2", "cuCtxPopCurrent"});
  need(t.cuEventCreate, {"cuEventCreate"});
  need(t.cuEventRecord, {"cuEventRecord"});
  need(t.cuEventQuery, {"cuEventQuery"});
  need(t.cuEventSynchronize, {"cuEventSynchronize"});
  need(t.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  need(t.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
  need(t.cuStreamSynchronize, {"cuStreamSynchronize"});
  need(t.cuMemAlloc, {"cuMemAlloc_v2"});
  need(t.cuMemFree, {"cuMemFree_v2"});
  need(t.cuMemsetD8Async, {"cuMemsetD8Async"});
  need(t.cuGetErrorName, {"cuGetErrorName"});
  need(t.cuGetErrorString, {"cuGetErrorString"});
  if (!missing.empty()) {
    throw CudaError(libcuda + " is too old for opbench: it lacks " + missing + "; update the NVIDIA driver.",
                    "", -1);
  }
  // Optional: holding launches back (see bindings/cuda.cpp). Without these the
  // timing still works, launch-bound statements just show their launch gaps.
  detail::bind_symbol(lib, t.cuStreamWaitValue32, {"cuStreamWaitValue32_v2", "cuStreamWaitValue32"});
  detail::bind_symbol(lib, t.cuMemHostAlloc, {"cuMemHostAlloc"});
  detail::bind_symbol(lib, t.cuMemHostGetDevicePointer, {"cuMemHostGetDevicePointer_v2"});
  detail::bind_symbol(lib, t.cuMemFreeHost, {"cuMemFreeHost"});
  detail::bind_symbol(lib, t.cuModuleGetLoadingMode, {"cuModuleGetLoadingMode"});
  detail::bind_symbol(lib, t.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"});
  detail::bind_symbol(lib, t.cuStreamEndCapture, {"cuStreamEndCapture"});
  detail::bind_symbol(lib, t.cuGraphGetNodes, {"cuGraphGetNodes"});
  detail::bind_symbol(lib, t.cuGraphDestroy, {"cuGraphDestroy"});
  detail::bind_symbol(lib, t.cuStreamGetCaptureInfo, {"cuStreamGetCaptureInfo_v2"});
  detail::bind_symbol(lib, t.cuModuleLoadData, {"cuModuleLoadData"});
  detail::bind_symbol(lib, t.cuModuleGetFunction, {"cuModuleGetFunction"});
  detail::bind_symbol(lib, t.cuModuleUnload, {"cuModuleUnload"});
  detail::bind_symbol(lib, t.cuLaunchKernel, {"cuLaunchKernel"});

  void* nv = dlopen(libnvml.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nv == nullptr) {
    const char* why = dlerror();
    d->nvml_problem = libnvml + " not found (" + (why ? why : "dlopen failed") + "): no clock readings";
    return d;
  }
  auto& n = d->nvml;
  const bool ok =
      detail::bind_symbol(nv, n.nvmlInit, {"nvmlInit_v2", "nvmlInit"}) &&
      detail::bind_symbol(nv, n.nvmlShutdown, {"nvmlShutdown"}) &&
      detail::bind_symbol(nv, n.nvmlDeviceGetHandleByPciBusId,
                          {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"}) &&
      detail::bind_symbol(nv, n.nvmlDeviceGetClockInfo, {"nvmlDeviceGetClockInfo"}) &&
      detail::bind_symbol(nv, n.nvmlDeviceGetMaxClockInfo, {"nvmlDeviceGetMaxClockInfo"}) &&
      detail::bind_symbol(nv, n.nvmlSystemGetDriverVersion, {"nvmlSystemGetDriverVersion"}) &&
      detail::bind_symbol(nv, n.nvmlErrorString, {"nvmlErrorString"});
  if (!ok) {
    d->nvml_problem = libnvml + " lacks a needed symbol: no clock readings";
    return d;
  }
  detail::bind_symbol(
      nv, n.nvmlDeviceGetCurrentClocksEventReasons,
      {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  d->has_nvml = true;
  return d;
}

}  // namespace opbench::cuda
